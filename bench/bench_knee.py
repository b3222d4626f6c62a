"""The sweep's knee against a simulator whose capacity is known: how close `oxconsole sweep
--over concurrency=auto` lands to it (target: within 10%), in how many points and how long.

The simulator (started by the sweep itself, `base_url = "sim"`) serves one model with jitter 0:
a TTFT, then 16 tokens at 100 tokens/s, at most C requests at once; beyond C requests queue, so
throughput stops rising at C and p99 latency grows. The TTFT is 100 ms, or longer for a large C so
that the knee's throughput stays near `--max-rps` (40 req/s: on a shared 2-core machine a few
hundred requests a second is the client's and the simulator's CPU limit, not the knee); each
point lasts `--point-duration` or 8 latencies, whichever is longer. For each C the bench runs the
automatic search and, with `--list`, a fixed list of values around C too, and prints the knee
found against C.

    python bench/bench_knee.py [--capacities 8,24,64] [--point-duration 3] [--max-rps 40] [--list]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

WORKLOAD = """
name = "knee-bench"
[run]
concurrency = 1
timeout = "60s"
grace = "10s"
[output]
results = "runs/results.jsonl"
save_text = false
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
[prompts]
synthetic = {{ count = 1000, input_tokens = 32, output_tokens = 16 }}
[sim.models.m]
ttft = "{ttft_ms}ms"
tokens_per_s = 100.0
output_tokens = 16
capacity = {capacity}
jitter = 0
"""


def ttft_ms(capacity: int, max_rps: float) -> int:
    """100 ms, or more so that C / latency (the knee's throughput) is about max_rps."""
    return max(100, round(1000.0 * capacity / max_rps) - 150)


def sweep(
    folder: Path, capacity: int, over: str, seconds: float, max_rps: float
) -> tuple[dict[str, Any], float, int]:
    ttft = ttft_ms(capacity, max_rps)
    seconds = max(seconds, 8 * (ttft + 150) / 1000.0)
    (folder / "w.toml").write_text(WORKLOAD.format(capacity=capacity, ttft_ms=ttft))
    cmd = [sys.executable, "-m", "oxconsole", "sweep", "w.toml", "--over", over]
    cmd += [
        "--point-duration",
        f"{seconds}s",
        "--summary-json",
        "s.json",
        "--output",
        f"runs/{capacity}.jsonl",
    ]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=3600)
    took = time.monotonic() - t0
    if p.returncode not in (0, 1) or not (folder / "s.json").exists():
        raise SystemExit(f"sweep failed ({p.returncode}):\n{p.stderr[-2000:]}")
    print(p.stdout, flush=True)
    data = json.loads((folder / "s.json").read_text())
    (folder / "s.json").unlink()
    return data, took, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--capacities", default="8,24,64")
    ap.add_argument("--point-duration", type=float, default=3.0)
    ap.add_argument("--max-rps", type=float, default=40.0)
    ap.add_argument("--list", action="store_true", help="also sweep a list of values around C")
    ns = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="knee") as tmp:
        for c in (int(x) for x in ns.capacities.split(",")):
            overs = ["concurrency=auto"]
            if ns.list:
                values = sorted(
                    {max(1, round(c * f)) for f in (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0)}
                )
                overs.append("concurrency=" + ",".join(map(str, values)))
            for over in overs:
                data, took, code = sweep(Path(tmp), c, over, ns.point_duration, ns.max_rps)
                knee = data["knee"]["value"] if data["knee"] else None
                err = None if knee is None else 100.0 * (knee - c) / c
                best = max(p["summary"]["throughput"]["requests_per_s"] for p in data["points"])
                rows.append((c, over.split("=")[1][:24], knee, err, len(data["points"]), took, best, code))
    head = ("C", "values", "knee", "error", "points", "wall s", "best req/s")
    print("{:>4}  {:<24}  {:>5}  {:>7}  {:>6}  {:>7}  {:>10}".format(*head))
    for c, over, knee, err, n, took, best, _ in rows:
        e = "-" if err is None else f"{err:+.1f}%"
        print(f"{c:>4}  {over:<24}  {knee!s:>5}  {e:>7}  {n:>6}  {took:>7.1f}  {best:>10.1f}")


if __name__ == "__main__":
    main()
