"""A hostile `/metrics` beside a real run: the run's TTFT and the engine process's peak memory, with
scraping off, against a server answering well, and against each fault.

The run is `oxconsole --headless` against a simulator in its own process (every answer 200 ms
after admission, jitter 0, 16 in flight, `--seconds` long). Its `server_metrics` points at one of:

* `off`: no scraping (the baseline);
* `good`: the simulator's own /metrics (vLLM's names), every 250 ms;
* `stall30`: headers, then nothing for 30 s;
* `body200m`: a 200 MB answer of valid-looking series, chunked (no length: read up to 8 MiB);
* `length200m`: the same with its Content-Length (refused before reading);
* `garbage`: 8 MiB of random bytes.

The faults are served by a thread of this process on raw sockets, at full speed. Each case runs
`--reps` times, interleaved; printed: the median TTFT p50 and p99 (ms) and the engine's peak RSS
(its own `ru_maxrss`, from `wait4`), and each against `off`. The targets: TTFT p50 within noise of
`off`, memory bounded (no case grows by more than the 8 MiB read bound and its copies).

    python bench/bench_hostile_metrics.py [--seconds 10] [--reps 3] [--cases off,good,stall30,...]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

MIB = 1 << 20
LINE = b'vllm:num_requests_running{model_name="m",engine="0"} 1\n'
Answer = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> bool:
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = conn.recv(65536)
        if not got:
            return False
        buf += got
    return True


def stall30(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
    conn.sendall(b"%x\r\n%b\r\n" % (len(LINE), LINE))
    time.sleep(30)


def _body200m(conn: socket.socket, length: bool) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
    block = LINE * (MIB // len(LINE))
    total = 200 * 1000 * 1000
    if length:
        conn.sendall(head + b"content-length: %d\r\n\r\n" % total)
        frame = block
    else:
        conn.sendall(head + b"transfer-encoding: chunked\r\n\r\n")
        frame = b"%x\r\n%b\r\n" % (len(block), block)
    sent = 0
    while sent < total:
        conn.sendall(frame)
        sent += len(block)


def garbage(conn: socket.socket) -> None:
    body = os.urandom(8 * MIB)
    conn.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    )


FAULTS: dict[str, Answer] = {
    "stall30": stall30,
    "body200m": lambda c: _body200m(c, False),
    "length200m": lambda c: _body200m(c, True),
    "garbage": garbage,
}
CASES = ("off", "good", *FAULTS)


def serve(answer: Answer) -> tuple[socket.socket, int]:
    srv = socket.create_server(("127.0.0.1", 0))
    srv.listen(64)

    def one(conn: socket.socket) -> None:
        try:
            if _read_request(conn):
                answer(conn)
        except OSError:
            pass  # the client stopped reading: what a bounded read does
        finally:
            conn.close()

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return srv, srv.getsockname()[1]


def start_sim() -> tuple[subprocess.Popen[str], str]:
    profile = {"m": {"ttft": 0.2, "tokens_per_s": 0, "output_tokens": 8, "capacity": 1000, "jitter": 0}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.sim", "--port", "0", "--profiles-json", json.dumps(profile)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def run_once(folder: Path, sim_url: str, metrics: str, seconds: float) -> dict[str, float]:
    wl = folder / "w.toml"
    wl.write_text(
        f"""[run]
concurrency = 16
duration = "{seconds}s"
[endpoints.s]
base_url = "{sim_url}"
server_metrics = {json.dumps(metrics)}
server_metrics_interval = "250ms"
[[models]]
name = "m"
endpoint = "s"
[prompts]
synthetic = {{ count = 100000, input_tokens = 10, output_tokens = 8 }}
[output]
results = "{folder / "out.jsonl"}"
save_text = false
"""
    )
    summary = folder / "s.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--summary-json", str(summary)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    t0 = time.monotonic()
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    s = json.loads(summary.read_text())
    return {
        "ttft_p50": float(s["ttft_ms"]["p50"]),
        "ttft_p99": float(s["ttft_ms"]["p99"]),
        "rss_mb": usage.ru_maxrss / 1024,
        "wall_s": took,
        "requests": float(s["requests"]["ok"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    sim, url = start_sim()
    servers = {name: serve(fn) for name, fn in FAULTS.items() if name in cases}
    results: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    try:
        for _ in range(args.reps):
            for case in cases:
                if case == "off":
                    metrics = "off"
                elif case == "good":
                    metrics = "auto"
                else:
                    metrics = f"http://127.0.0.1:{servers[case][1]}/metrics"
                with tempfile.TemporaryDirectory() as td:
                    results[case].append(run_once(Path(td), url, metrics, args.seconds))
    finally:
        sim.terminate()
        sim.wait()
    med = {c: {k: statistics.median(r[k] for r in results[c]) for k in results[c][0]} for c in cases}
    base = med.get("off")
    print(f"{'case':12s}{'TTFT p50':>10s}{'p99':>9s}{'peak RSS':>10s}{'wall':>8s}{'ok':>7s}  vs off")
    for c in cases:
        m = med[c]
        vs = ""
        if base is not None and c != "off":
            spread = [r["ttft_p50"] for r in results["off"]]
            noise = max(spread) - min(spread)
            vs = (
                f"TTFT p50 {m['ttft_p50'] - base['ttft_p50']:+.2f} ms (off's spread {noise:.2f} ms), "
                f"RSS {m['rss_mb'] - base['rss_mb']:+.1f} MB"
            )
        print(
            f"{c:12s}{m['ttft_p50']:10.2f}{m['ttft_p99']:9.2f}{m['rss_mb']:8.1f}MB{m['wall_s']:7.1f}s"
            f"{m['requests']:7.0f}  {vs}"
        )


if __name__ == "__main__":
    main()
