"""Trace replay fidelity: how close to its row's offset each request of a trace leaves.

A synthetic Mooncake trace of `--rate` rows a second for `--duration` seconds (evenly spaced,
16-token prompts, 1-token answers) is replayed against the embedded simulator (its own process,
ttft 5 ms, capacity far above the load) with `run.concurrency` far above what is in flight, so
nothing but the client's own pacing decides when a row leaves. From the journal, per row:
`error = (t_sent - t_first) - offset / trace_speed`, where `t_first` is the first row's due time;
printed: p50, p99 and max of |error| in ms, the summary's `schedule_lag_ms` and its share within
10 ms. Target (docs/bursts.md): p99 within 2 ms up to 1,000 rows/s on one worker, 2,000 rows/s
with `run.workers = 2`. `--server nginx`: instead of the simulator, nginx (C, one worker process)
answering every row with a recorded 16-chunk stream (bench_workers.py's), a server that costs the
two cores far less, so what is left is the client's (needs `nginx` on the PATH, Debian's
nginx-light).

    python bench/bench_trace.py [--rate 1000] [--duration 10] [--workers 1] [--speed 1.0]
                                [--server sim|nginx]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = """
name = "trace-bench"
[run]
concurrency = 20000
workers = {workers}
trace_speed = {speed}
timeout = "30s"
[output]
results = "{results}"
save_text = false
[endpoints.default]
base_url = "{base_url}"
[[models]]
name = "m"
[prompts]
file = "{trace}"
format = "mooncake"
[sim.models.m]
ttft = "5ms"
tokens_per_s = 0
output_tokens = 1
capacity = 100000
jitter = 0
"""


def write_trace(path: Path, rate: float, duration: float) -> list[float]:
    n = int(rate * duration)
    offsets = [i / rate for i in range(n)]
    with path.open("w") as f:
        for t in offsets:
            f.write(f'{{"timestamp": {t * 1000:.3f}, "input_length": 16, "output_length": 1}}\n')
    return offsets


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--server", choices=("sim", "nginx"), default="sim")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oxtrace") as d:
        tmp = Path(d)
        offsets = write_trace(tmp / "t.jsonl", a.rate, a.duration)
        results = tmp / "results.jsonl"
        server, base_url = None, "sim"
        if a.server == "nginx":
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from bench_workers import start_nginx

            server, base_url = start_nginx(tmp, 16)
        text = WORKLOAD.format(
            workers=a.workers, speed=a.speed, results=results, trace=tmp / "t.jsonl", base_url=base_url
        )
        if server is not None:
            text = text[: text.index("[sim.models.m]")]
        (tmp / "w.toml").write_text(text)
        cmd = [sys.executable, "-m", "oxconsole", str(tmp / "w.toml"), "--headless"]
        cmd += ["--summary-json", str(tmp / "s.json")]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
        finally:
            if server is not None:
                server.terminate()
                server.wait(5)
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            return run.returncode
        recs = [json.loads(x) for x in results.read_text().splitlines()]
        summary = json.loads((tmp / "s.json").read_text())
    t_first = min(r["t_scheduled"] for r in recs if r["id"] == "row-1")
    errors = []
    for r in recs:
        k = int(r["id"].split("-")[1]) - 1
        errors.append(abs((r["t_sent"] - t_first) - offsets[k] / a.speed) * 1000.0)
    lag = summary["schedule_lag_ms"]
    print(
        f"rows/s {a.rate * a.speed:,.0f} workers {a.workers} server {a.server}: {len(recs):,} rows; "
        f"|send - offset| "
        f"p50 {pct(errors, 50):.2f} ms p99 {pct(errors, 99):.2f} ms max {max(errors):.1f} ms; "
        f"schedule_lag_ms p50 {lag['p50']:.2f} p99 {lag['p99']:.2f}; "
        f"within 10 ms {summary['schedule']['within_10ms']:.1%}; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
