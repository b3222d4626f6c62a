"""Soak benchmark: a long `oxconsole --headless` run against the simulator with faults on, memory sampled.

Runs the real command line as a child process on a synthetic workload that cycles its prompts for
the whole duration (concurrency 100, jittered timings, connection resets, aborted and malformed
streams, 500s, 429 bursts with Retry-After and stalls longer than the timeout, a few % each), and
every `--interval` seconds samples the resident memory (VmRSS in /proc/PID/status) of the engine
process and of its simulator child separately, with the number of requests journaled so far.

At the end it prints the first and last engine RSS, the slope over the second half (MB/min, least
squares), totals by error class and by retried-attempt class, and checks that the journal holds
exactly the summary's total with every id once. Exit status 0 when those checks pass.

    python bench/soak.py [--minutes 10] [--interval 10] [--concurrency 100] [--keep DIR]

Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WORKLOAD = """
name = "soak"

[run]
concurrency = {concurrency}
duration = "{seconds}s"
timeout = "2s"
stream = true
seed = 7
grace = "10s"

[output]
results = "{results}"
save_text = true

[endpoints.default]
base_url = "sim"
max_connections = {concurrency}

[[models]]
name = "fast"
weight = 3
max_tokens = 24
price_per_1m_input = 0.1
price_per_1m_output = 0.4

[[models]]
name = "slow"
weight = 1
max_tokens = 24
price_per_request = 0.0001

[prompts]
synthetic = {{ count = 5000, input_tokens = 60, output_tokens = 24 }}

[retry]
max_attempts = 3
backoff = "50ms"
backoff_max = "1s"

[sim.models.fast]
ttft = "150ms"
tokens_per_s = 60
output_tokens = 24
capacity = 200
jitter = 0.3
error_rate = 0.02
throttle_rate = 0.02
retry_after = "200ms"
reset_rate = 0.02
abort_rate = 0.02
malformed_rate = 0.02
stall_rate = 0.01
stall = "3s"

[sim.models.slow]
ttft = "400ms"
tokens_per_s = 30
output_tokens = 24
capacity = 200
jitter = 0.3
error_rate = 0.02
throttle_rate = 0.03
retry_after = "300ms"
reset_rate = 0.02
abort_rate = 0.02
malformed_rate = 0.02
stall_rate = 0.01
stall = "3s"
"""


def rss_mb(pid: int) -> float | None:
    """VmRSS of a process in MB, None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def children(pid: int) -> list[int]:
    """Direct children of pid (the simulator is one; it runs in its own session but keeps its parent)."""
    out: list[int] = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the command name is in parentheses and may contain spaces: split after the last ")"
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(d))
    return out


class LineCounter:
    """Counts newline-terminated lines of a growing file, reading only what was appended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def update(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                while chunk := f.read(1 << 20):
                    self.lines += chunk.count(b"\n")
                    self.offset += len(chunk)
        except FileNotFoundError:
            pass
        return self.lines


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    if sxx == 0:
        return 0.0
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return sxy / sxx * 60.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="run length (default 10)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    ap.add_argument("--concurrency", type=int, default=100, help="run.concurrency (default 100)")
    ap.add_argument("--keep", metavar="DIR", help="keep the workload, journal and summary in DIR")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = ap.parse_args()
    if not Path("/proc/self/status").exists():
        raise SystemExit("soak.py reads /proc: Linux only")

    tmp_ctx = None
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp_ctx = tempfile.TemporaryDirectory(prefix="oxconsole-soak-")
        work = Path(tmp_ctx.name)
    results = work / "results.jsonl"
    if results.exists():
        results.unlink()
    summary_path = work / "summary.json"
    seconds = round(args.minutes * 60)
    wl = work / "soak.toml"
    wl.write_text(WORKLOAD.format(concurrency=args.concurrency, seconds=seconds, results=results))

    started = datetime.now(UTC)
    t0 = time.monotonic()
    stderr_path = work / "stderr.log"
    with open(stderr_path, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "oxconsole",
                str(wl),
                "--headless",
                "--summary-json",
                str(summary_path),
                "--progress-interval",
                "30",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        counter = LineCounter(results)
        samples: list[dict[str, float]] = []
        sim_pid: int | None = None
        print(
            f"soak: {args.minutes:g} min, concurrency {args.concurrency}, engine pid {proc.pid}, work {work}"
        )
        print(f"{'t_s':>6} {'engine_MB':>10} {'sim_MB':>8} {'done':>9} {'req/s':>7}")
        next_t = args.interval  # the first sample once the engine and its simulator are up
        last_done = 0
        last_t = 0.0
        while proc.poll() is None:
            now = time.monotonic() - t0
            if now < next_t:
                time.sleep(min(0.5, next_t - now))
                continue
            next_t += args.interval
            if sim_pid is None or rss_mb(sim_pid) is None:
                kids = children(proc.pid)
                sim_pid = kids[0] if kids else None
            eng = rss_mb(proc.pid)
            sim = rss_mb(sim_pid) if sim_pid is not None else None
            done = counter.update()
            if eng is None:
                break
            rate = (done - last_done) / (now - last_t) if now > last_t else 0.0
            last_done, last_t = done, now
            samples.append(
                {
                    "t": round(now, 1),
                    "engine_mb": round(eng, 1),
                    "sim_mb": round(sim, 1) if sim is not None else -1.0,
                    "done": done,
                }
            )
            sim_txt = f"{sim:8.1f}" if sim is not None else f"{'-':>8}"
            print(f"{now:6.0f} {eng:10.1f} {sim_txt} {done:9d} {rate:7.0f}", flush=True)
        out, _ = proc.communicate()
    wall = time.monotonic() - t0
    code = proc.returncode
    counter.update()

    # --- checks on the journal and the summary ---------------------------------------------------
    ids: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    attempt_errors: Counter[str] = Counter()
    status: Counter[str] = Counter()
    torn = 0
    with open(results, "rb") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                torn += 1
                continue
            ids[r["id"]] += 1
            status[r["status"]] += 1
            if r.get("error"):
                errors[r["error"]] += 1
            for k, v in (r.get("attempt_errors") or {}).items():
                attempt_errors[k] += v
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    total = summary.get("requests", {}).get("total")
    lines = sum(ids.values())
    dupes = sum(1 for n in ids.values() if n > 1)

    # --- memory figures ----------------------------------------------------------------------------
    eng_pts = [(s["t"], s["engine_mb"]) for s in samples]
    sim_pts = [(s["t"], s["sim_mb"]) for s in samples if s["sim_mb"] >= 0]
    half = wall / 2
    eng_slope = slope_per_min([p for p in eng_pts if p[0] >= half])
    sim_slope = slope_per_min([p for p in sim_pts if p[0] >= half])
    figures = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{_cpu_model()}, Python {platform.python_version()}",
        "minutes": round(wall / 60, 2),
        "interval_s": args.interval,
        "concurrency": args.concurrency,
        "exit_code": code,
        "requests": total,
        "journal_lines": lines,
        "unique_ids": len(ids),
        "duplicate_ids": dupes,
        "torn_lines": torn,
        "status": dict(status),
        "requests_per_s": round(lines / wall, 1) if wall else 0.0,
        "errors": dict(sorted(errors.items())),
        "attempt_errors": dict(sorted(attempt_errors.items())),
        "summary_errors": summary.get("errors", {}),
        "summary_attempt_errors": summary.get("attempt_errors", {}),
        "cooldowns": summary.get("cooldowns"),
        "engine_rss_mb": {
            "first": eng_pts[0][1] if eng_pts else None,
            "last": eng_pts[-1][1] if eng_pts else None,
            "max": max(v for _, v in eng_pts) if eng_pts else None,
            "slope_mb_per_min_second_half": round(eng_slope, 3),
        },
        "sim_rss_mb": {
            "first": sim_pts[0][1] if sim_pts else None,
            "last": sim_pts[-1][1] if sim_pts else None,
            "max": max(v for _, v in sim_pts) if sim_pts else None,
            "slope_mb_per_min_second_half": round(sim_slope, 3),
        },
        "latency_ms": summary.get("latency_ms"),
        "samples": samples,
    }

    print()
    print(f"exit code {code} after {wall / 60:.2f} min; summary table:")
    print(out.rstrip())
    print()
    e, s = figures["engine_rss_mb"], figures["sim_rss_mb"]
    print(
        f"engine RSS: first {e['first']} MB, last {e['last']} MB, max {e['max']} MB, "
        f"slope over the second half {eng_slope:+.3f} MB/min"
    )
    print(
        f"sim RSS:    first {s['first']} MB, last {s['last']} MB, max {s['max']} MB, "
        f"slope over the second half {sim_slope:+.3f} MB/min"
    )
    print(f"requests: {lines} journaled ({figures['requests_per_s']}/s), status {dict(status)}")
    print(f"errors by class (final):      {figures['errors']}")
    print(f"retried attempts by class:    {figures['attempt_errors']}")
    if figures["cooldowns"] is not None:
        print(f"cooldowns: {figures['cooldowns']}")

    problems = []
    if code not in (0, 1):
        problems.append(f"exit code {code} (expected 0 or 1); stderr in {stderr_path}")
    if total != lines:
        problems.append(f"journal has {lines} records but the summary total is {total}")
    if dupes:
        problems.append(f"{dupes} ids appear more than once in the journal")
    if torn:
        problems.append(f"{torn} unreadable journal lines")
    if dict(sorted(errors.items())) != dict(sorted(figures["summary_errors"].items())):
        problems.append(
            f"summary errors {figures['summary_errors']} differ from the journal's {dict(errors)}"
        )
    figures["checks"] = problems if problems else "ok"
    print(
        "checks: journal lines == summary total, ids unique, no torn lines, errors agree: "
        + ("ok" if not problems else "FAILED")
    )
    for p in problems:
        print(f"  - {p}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if tmp_ctx is not None:
        tmp_ctx.cleanup()
    return 0 if not problems else 1


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
