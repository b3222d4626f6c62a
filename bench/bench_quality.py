"""Client CPU per request with `[quality]` (a small JSON schema and a cascade) against the same run
without it, same simulator, one run each.

Why this file exists: judging every answer and sending the failed ones on must stay off the hot
path's budget (target: at most 10% more client CPU per HTTP request). Each run is `oxconsole
W.toml --headless` in its own process against the embedded simulator, which runs in a child
process of its own, so the CPU the run's process used (its user + system time, children excluded)
is the client's. Printed: HTTP requests, client CPU ms per request, the ratio with / without.

    python bench/bench_quality.py [--requests 4000] [--concurrency 64]

The workload with `[quality]`: every answer must be JSON matching a small schema; the simulator's
"small" model is right 90% of the time and "big" always, so 10% of the requests are sent twice.
The one without: the same prompts to "small" alone, no checks.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

WL = """
name = "bench-quality"
[run]
concurrency = {concurrency}
seed = 1
[output]
results = "{results}"
save_text = false
[endpoints.default]
base_url = "sim"
[[models]]
name = "small"
max_tokens = 16
[[models]]
name = "big"
max_tokens = 16
weight = 0
[prompts]
synthetic = {{ count = {requests}, input_tokens = 32, output_tokens = 16 }}
{quality}
[sim.models.small]
ttft = 0
tokens_per_s = 0
capacity = 4096
jitter = 0
quality = 0.9
[sim.models.big]
ttft = 0
tokens_per_s = 0
capacity = 4096
jitter = 0
quality = 1.0
"""

QUALITY = """
[quality]
json_schema = { type = "object", required = ["label"], properties = { label = { enum = ["yes", "no"] } } }
[routing]
cascade = ["small", "big"]
"""


def one_run(
    folder: Path, name: str, quality: str, requests: int, concurrency: int
) -> tuple[int, float, float]:
    """(HTTP requests, client CPU seconds, wall seconds) of one headless run in its own process."""
    wl = folder / f"{name}.toml"
    results = folder / f"{name}.jsonl"
    wl.write_text(WL.format(concurrency=concurrency, results=results, requests=requests, quality=quality))
    summary = folder / f"{name}.json"
    code = (
        "import resource, sys, time; from oxconsole.cli.main import main; t = time.perf_counter(); "
        f"rc = main([{str(wl)!r}, '--headless', '--summary-json', {str(summary)!r}]); "
        "u = resource.getrusage(resource.RUSAGE_SELF); "
        "print(u.ru_utime + u.ru_stime, time.perf_counter() - t, file=sys.stderr); sys.exit(rc)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"{name}: exit {p.returncode}\n{p.stderr[-2000:]}")
    cpu, wall = (float(x) for x in p.stderr.strip().splitlines()[-1].split())
    s = json.loads(summary.read_text())
    sent = s["requests"]["total"] + int((s.get("cascade") or {}).get("escalated") or 0)
    return sent, cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=64)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        base = one_run(folder, "plain", "", a.requests, a.concurrency)
        judged = one_run(folder, "quality", QUALITY, a.requests, a.concurrency)
    print(f"{'run':<10} {'HTTP requests':>14} {'CPU s':>8} {'wall s':>8} {'CPU ms/request':>15}")
    per = []
    for name, (sent, cpu, wall) in (("plain", base), ("quality", judged)):
        per.append(cpu / sent * 1000.0)
        print(f"{name:<10} {sent:>14} {cpu:>8.2f} {wall:>8.2f} {per[-1]:>15.3f}")
    print(f"quality / plain, CPU per HTTP request: {per[1] / per[0]:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
