"""Does the console slow the run down? The same zero-latency workload twice in one go: once
``--headless`` with no console attached, once with the real console attached in a pseudo-terminal
(80x24, 4 Hz), and the dispatch rate (ok requests/s from the run's summary) of each, with the ratio.

The simulator answers at once (ttft 0, all tokens at once), so the client is the bottleneck: any
CPU the console takes from the machine, or any stall it causes in the engine, shows up as a lower
rate. In both runs the engine has its own process: `--headless` runs it in the `oxconsole` process
(there is no console); with the console, the engine runs in the host process the console starts,
and the console process reads its snapshots over the control socket. The console process's CPU is
read from /proc over the run. Linux only.

    python bench/console_impact.py                       # ~15 s per run
    python bench/console_impact.py --repeat 3            # 3 pairs, alternating which runs first
    python bench/console_impact.py --seconds 30 --concurrency 128 --size 160x48

The request count is calibrated once (a 4 s headless run) so that each run takes about
``--seconds``; pass ``--requests N`` to fix it. Both runs send exactly the same requests.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import pty
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from console_cpu import children  # the same /proc walk

WORKLOAD = """
name = "console-impact"

[run]
concurrency = {concurrency}
rate = 0
arrival = "closed"
requests = {requests}
duration = "{duration}"
timeout = "30s"
stream = true
seed = 1
grace = "5s"

[output]
results = "{results}"
save_text = false

[endpoints.default]
base_url = "sim"
max_connections = {concurrency}

[[models]]
name = "m"
max_tokens = 16

[prompts]
synthetic = {{ count = 1000, input_tokens = 16, output_tokens = 16 }}

[sim.models.m]
ttft = 0
tokens_per_s = 0
output_tokens = 16
capacity = {capacity}
jitter = 0
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def write_workload(folder: Path, tag: str, ns: argparse.Namespace, requests: int, duration: str) -> Path:
    path = folder / f"{tag}.toml"
    path.write_text(
        WORKLOAD.format(
            concurrency=ns.concurrency,
            capacity=max(ns.concurrency, 64),
            requests=requests,
            duration=duration,
            results=(folder / tag / "results.jsonl").as_posix(),
        )
    )
    return path


def run_headless(workload: Path, summary: Path) -> dict[str, float]:
    """``oxconsole WORKLOAD --headless``; its CPU is sampled from /proc while it runs."""
    argv = [sys.executable, "-m", "oxconsole", str(workload), "--headless", "--summary-json", str(summary)]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cpu = 0.0
    while proc.poll() is None:
        try:
            cpu = cpu_seconds(proc.pid)
        except OSError:
            pass
        time.sleep(0.1)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode not in (0, 1):
        raise SystemExit(f"headless run failed with exit code {proc.returncode}:\n{err[-2000:]}")
    s = json.loads(summary.read_text())
    return {
        "rate": s["throughput"]["requests_per_s"],
        "ok": s["requests"]["ok"],
        "duration": s["duration_s"],
        "engine_cpu": 100 * cpu / wall,
        "engine_ms_per_1k": 1e6 * cpu / max(1, s["requests"]["total"]),
    }


def run_with_console(
    workload: Path, summary: Path, size: tuple[int, int], refresh: float
) -> dict[str, float]:
    """The real console in a pseudo-terminal; the run ends when the summary is written, then q."""
    cols, rows = size
    argv = [sys.executable, "-m", "oxconsole", str(workload), "--refresh", str(refresh)]
    argv += ["--summary-json", str(summary)]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    os.read(fd, 65536)
                except OSError:
                    return

    t0 = time.monotonic()
    cpu0 = cpu_seconds(pid)
    deadline = t0 + 600
    host_cpu: dict[int, float] = {}  # the engine host is the console's child (the simulator, its)
    while not summary.exists() and time.monotonic() < deadline:
        pump(0.1)
        for kid in children(pid):
            try:
                host_cpu[kid] = cpu_seconds(kid)
            except OSError:
                pass
    cpu1, t1 = cpu_seconds(pid), time.monotonic()
    os.write(fd, b"q")
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pump(0.2)
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
        raise SystemExit("the console did not exit after q")
    os.close(fd)
    s = json.loads(summary.read_text())
    return {
        "rate": s["throughput"]["requests_per_s"],
        "ok": s["requests"]["ok"],
        "duration": s["duration_s"],
        "console_cpu": 100 * (cpu1 - cpu0) / (t1 - t0),
        "engine_ms_per_1k": 1e6 * max(host_cpu.values(), default=0.0) / max(1, s["requests"]["total"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0, help="about how long each run takes")
    ap.add_argument("--requests", type=int, default=0, help="requests per run (default: calibrated)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--size", default="80x24", help="console size, COLSxROWS")
    ap.add_argument("--refresh", type=float, default=4.0, help="console refresh rate (Hz)")
    ap.add_argument(
        "--repeat", type=int, default=1, help="pairs of runs, alternating which goes first (noisy machines)"
    )
    ns = ap.parse_args()
    size = tuple(int(x) for x in ns.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="console-impact-") as tmp:
        folder = Path(tmp)
        requests = ns.requests
        if requests <= 0:
            cal = run_headless(write_workload(folder, "calibrate", ns, 0, "4s"), folder / "calibrate.json")
            requests = max(1000, int(round(cal["rate"] * ns.seconds, -2)))
            print(f"calibration: {cal['rate']:.0f} req/s headless -> {requests} requests per run")
        pairs = []
        for i in range(ns.repeat):
            runs = ["headless", "console"] if i % 2 == 0 else ["console", "headless"]
            got: dict[str, dict[str, float]] = {}
            for kind in runs:
                tag = f"{kind}-{i}"
                wl = write_workload(folder, tag, ns, requests, "0s")
                if kind == "headless":
                    got[kind] = run_headless(wl, folder / f"{tag}.json")
                else:
                    got[kind] = run_with_console(wl, folder / f"{tag}.json", (size[0], size[1]), ns.refresh)
            pairs.append((got["headless"], got["console"]))
    machine = f"{platform.node()} · {os.cpu_count()} CPUs · Python {platform.python_version()}"
    print(f"{time.strftime('%Y-%m-%d')} · {machine} · load average {os.getloadavg()[0]:.1f}")
    print(f"workload: {requests} requests, concurrency {ns.concurrency}, simulator ttft 0, 16 tokens at once")
    ratios = []
    for i, (head, cons) in enumerate(pairs):
        ratios.append(cons["rate"] / head["rate"])
        print(f"pair {i + 1} ({'headless first' if i % 2 == 0 else 'console first'}):")
        print(
            f"  headless:     {head['rate']:8.0f} req/s  ({head['ok']:.0f} ok in {head['duration']:.1f} s; "
            f"engine process {head['engine_cpu']:.0f}% of a core, "
            f"{head['engine_ms_per_1k']:.0f} ms CPU per 1000 requests)"
        )
        print(
            f"  with console: {cons['rate']:8.0f} req/s  ({cons['ok']:.0f} ok in {cons['duration']:.1f} s; "
            f"console {ns.size} at {ns.refresh:g} Hz: {cons['console_cpu']:.1f}% of a core; "
            f"engine {cons['engine_ms_per_1k']:.0f} ms CPU per 1000 requests)"
        )
        print(f"  ratio with/without console: {ratios[-1]:.3f}")
    if len(ratios) > 1:
        print(
            f"median ratio over {len(ratios)} pairs: {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})"
        )
        head_ms = statistics.median(h["engine_ms_per_1k"] for h, _ in pairs)
        cons_ms = statistics.median(c["engine_ms_per_1k"] for _, c in pairs)
        print(
            f"engine CPU per 1000 requests (median): {head_ms:.0f} ms headless, {cons_ms:.0f} ms with the "
            f"console attached ({cons_ms / head_ms:.3f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
