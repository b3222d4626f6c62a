"""Pacing by a provider's rate-limit headers over real minutes: no 429, at least 90% of the limit used.

The embedded simulator (`base_url = "sim"`, its own process, jitter 0) enforces `[sim] rpm_limit`
or `tpm_limit` over the contract's fixed 60 s windows (`ratelimit_window = "60s"`), sending the
`x-ratelimit-*` headers on every answer. oxconsole runs `--headless` against it with
`[endpoints.default] pace_by_headers = true` and demand far above the limit (closed loop, 32 in
flight, answers in 50 ms) for `--minutes` windows. Cases:

* `rpm`: `rpm_limit = 600` (a request is 150 tokens; no token limit);
* `tpm`: `tpm_limit = 60000` (150 tokens a request: 400 requests a minute; no request limit);
* `workers`: the `rpm` case with `run.workers = 2` (two shards sharing the limit).

The cases run at once, each with its own simulator (the load is a few requests a second). From
each journal: the 429s drawn (every attempt's, retried or not), the requests (or tokens) sent in
each 60 s window from the first send (the simulator's windows start with its first request), the
steady state's share of the limit (the full windows), the waits and seconds waited (the summary's
`ratelimit`) and the largest queue time (the waits are client queue time, not latency).

    python bench/bench_ratelimit.py [--minutes 4] [--cases rpm,tpm,workers]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WINDOW_S = 60.0
PROMPT = "word " * 80  # 400 characters: 100 prompt tokens as the simulator counts, + 50 out

CASES = {
    "rpm": {"rpm_limit": 600, "tpm_limit": 0, "workers": 1},
    "tpm": {"rpm_limit": 0, "tpm_limit": 60_000, "workers": 1},
    "workers": {"rpm_limit": 600, "tpm_limit": 0, "workers": 2},
}


def workload(tmp: Path, case: str, minutes: int) -> Path:
    c = CASES[case]
    wl = tmp / f"{case}.toml"
    wl.write_text(
        f"""
name = "ratelimit-{case}"
[run]
concurrency = 32
duration = "{minutes * WINDOW_S + 5:.0f}s"
workers = {c["workers"]}
grace = "10s"
[output]
results = "{tmp / (case + ".jsonl")}"
[endpoints.default]
base_url = "sim"
pace_by_headers = true
[[models]]
name = "m"
max_tokens = 50
[prompts]
items = ["{PROMPT}"]
repeat = 10000000
[sim]
rpm_limit = {c["rpm_limit"]}
tpm_limit = {c["tpm_limit"]}
ratelimit_window = "{WINDOW_S:.0f}s"
[sim.models.m]
ttft = "50ms"
tokens_per_s = 0
output_tokens = 50
capacity = 4096
jitter = 0
"""
    )
    return wl


def start(tmp: Path, case: str, minutes: int) -> subprocess.Popen[str]:
    wl = workload(tmp, case, minutes)
    cmd = [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--progress-interval", "1000"]
    cmd += ["--summary-json", str(tmp / f"{case}.summary.json")]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)


def figures(tmp: Path, case: str) -> dict[str, Any]:
    recs = [json.loads(line) for line in (tmp / f"{case}.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((tmp / f"{case}.summary.json").read_text())
    n429 = sum(
        (r.get("attempt_errors") or {}).get("http_429", 0) + (r.get("error") == "http_429") for r in recs
    )
    ok = [r for r in recs if r["status"] == "ok"]
    tokens = CASES[case]["tpm_limit"] > 0
    limit = CASES[case]["tpm_limit"] if tokens else CASES[case]["rpm_limit"]
    t0 = min(r["t_sent"] for r in recs)
    per: dict[int, float] = {}
    for r in ok:
        k = int((r["t_sent"] - t0) // WINDOW_S)
        per[k] = per.get(k, 0) + ((r["input_tokens"] + r["output_tokens"]) if tokens else 1)
    windows = [per.get(k, 0) for k in range(max(per) + 1)]
    full = windows[: int(summary["duration_s"] // WINDOW_S)] or windows
    return {
        "requests": len(recs),
        "ok": len(ok),
        "http_429": n429,
        "limit": limit,
        "unit": "tokens" if tokens else "requests",
        "windows": windows,
        "steady_share": min(full) / limit,
        "over": max(windows) > limit,
        "ratelimit": (summary.get("ratelimit") or {}).get("default"),
        "queue_ms_max": max(r["queue_ms"] for r in recs),
        "latency_ms_p99": summary["latency_ms"]["p99"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=int, default=4, help="60 s windows to run (default 4)")
    ap.add_argument("--cases", default="rpm,tpm,workers")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        procs = {case: start(tmp, case, args.minutes) for case in cases}
        for case, p in procs.items():
            _, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"{case}: exit {p.returncode}\n{err[-3000:]}")
            out[case] = figures(tmp, case)
    print(
        f"pace_by_headers against the simulator's limits: {args.minutes} windows of {WINDOW_S:.0f} s, "
        f"32 in flight, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores"
    )
    print(f"{'case':<9}{'limit':>16}{'429s':>6}{'steady':>8}  {'per window':<34}{'waits':>6}{'wait s':>8}"
          f"{'queue max':>11}{'lat p99':>9}")  # fmt: skip
    for case, r in out.items():
        rl = r["ratelimit"] or {}
        windows = ", ".join(f"{w:,.0f}" for w in r["windows"])
        print(
            f"{case:<9}{r['limit']:>9,} {r['unit'][:3]}/m{r['http_429']:>6}{100 * r['steady_share']:>7.1f}%  "
            f"{windows:<34}{rl.get('waits', 0):>6}{rl.get('wait_s', 0.0):>8.1f}"
            f"{r['queue_ms_max'] / 1000:>10.1f}s{r['latency_ms_p99']:>8.0f}ms"
        )
    print("(steady: the least used full window's share of the limit; target: no 429 and >= 90%)")
    bad = [c for c, r in out.items() if r["http_429"] or r["steady_share"] < 0.9 or r["over"]]
    if bad:
        print(f"MISSED the target: {', '.join(bad)}")


if __name__ == "__main__":
    main()
