"""Long prompts: client CPU per request and TTFT p99 for 250,000-token prompts against 100-token ones.

The simulator (its own process, jitter 0) answers every request whole 100 ms after admission
(`ttft = 100ms`, `tokens_per_s = 0`, capacity far above the concurrency), so every request's true
TTFT is exactly 100 ms however long its prompt. oxconsole sends N requests at 16 in flight
(`oxconsole W.toml --headless`, a child process; its CPU is measured inside it, imports excluded).
Cases:

* `short`: synthetic prompts of 100 tokens;
* `synthetic`: synthetic prompts of 250,000 tokens (~1 MB each);
* `file`: a prompts file of 20 distinct 250,000-token prompts, repeated to N requests.

Printed per case: requests/s, client CPU ms per request, TTFT p50 / p99 and p99 minus the truth,
and the simulator's own share (a fresh simulator a case): the time it took to read and parse each
body before admitting it (`/sim/stats` `read_ms`) and how late its first writes left;
then each long case's CPU per request minus the short case's (target: at most 5 ms) and its p99
against the truth (target: within 20 ms).

    python bench/bench_long.py [--requests 200] [--concurrency 16] [--tokens 250000] [--cases ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TTFT_MS = 100.0

WRAP = (
    "import resource,sys,time,json\n"
    "def cpu():\n r=resource.getrusage(resource.RUSAGE_SELF);return r.ru_utime+r.ru_stime\n"
    "import openai,oxconsole.engine.runner;from oxconsole.cli import main;c0=cpu()\n"
    "t=time.perf_counter();rc=main(sys.argv[1:]);w=time.perf_counter()-t\n"
    "print(json.dumps({'rc':rc,'wall_s':w,'cpu_s':cpu()-c0}),file=sys.stderr)"
)


def start_sim() -> tuple[subprocess.Popen[str], str]:
    profile = {"ttft": TTFT_MS / 1000, "tokens_per_s": 0, "output_tokens": 16, "capacity": 4096}
    profiles = {"m": profile | {"jitter": 0}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.sim", "--port", "0", "--profiles-json", json.dumps(profiles)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def sim_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/sim/stats", timeout=30) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


def prompts_file(tmp: Path, tokens: int) -> Path:
    """20 distinct prompts of `tokens` tokens (4 characters a token), one JSON line each."""
    sys.path.insert(0, str(ROOT))
    from oxconsole.workload.synthtext import synthetic_text

    path = tmp / "long.jsonl"
    with path.open("w") as f:
        for i in range(20):
            f.write(json.dumps({"id": f"long-{i}", "prompt": synthetic_text(11, i, tokens)}) + "\n")
    return path


def workload(tmp: Path, url: str, args: argparse.Namespace, case: str) -> Path:
    n = args.requests
    if case == "file":
        prompts = f'file = "{prompts_file(tmp, args.tokens)}"\nrepeat = {-(-n // 20)}'
    else:
        tokens = 100 if case == "short" else args.tokens
        prompts = f"synthetic = {{ count = {n}, input_tokens = {tokens}, output_tokens = 16 }}"
    wl = tmp / f"{case}.toml"
    wl.write_text(
        f"""
name = "long-{case}"
[run]
concurrency = {args.concurrency}
requests = {n}
timeout = "60s"
[output]
results = "{tmp / (case + ".jsonl")}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "m"
max_tokens = 16
[prompts]
{prompts}
"""
    )
    return wl


def run_case(tmp: Path, url: str, args: argparse.Namespace, case: str) -> dict[str, Any]:
    wl = workload(tmp, url, args, case)
    summary = tmp / f"{case}.summary.json"
    cmd = [sys.executable, "-c", WRAP, str(wl), "--headless", "--summary-json", str(summary)]
    cmd += ["--progress-interval", "1000"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    try:
        meta = json.loads(p.stderr.strip().splitlines()[-1])
        s = json.loads(summary.read_text())
    except (IndexError, ValueError, OSError):
        raise SystemExit(f"{case}: the run failed:\n{p.stderr[-3000:]}") from None
    (tmp / f"{case}.jsonl").unlink(missing_ok=True)
    return {
        "ok": s["requests"]["ok"],
        "req_s": s["throughput"]["requests_per_s"],
        "cpu_ms_per_req": meta["cpu_s"] * 1000 / args.requests,
        "ttft_p50": s["ttft_ms"]["p50"],
        "ttft_p99": s["ttft_ms"]["p99"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=250_000)
    ap.add_argument("--cases", default="short,synthetic,file")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as td:
        for case in cases:
            proc, url = start_sim()  # one a case: its own figures of reading the bodies
            try:
                out[case] = r = run_case(Path(td), url, args, case)
                st = sim_stats(url)
                r["read_p50"], r["read_p99"] = st["read_ms"]["p50"], st["read_ms"]["p99"]
                r["late_p99"] = st["lateness_ms"]["first"]["p99"]
            finally:
                proc.terminate()
                proc.wait(5)
            print(
                f"{case:10s} {r['req_s']:7.1f} req/s  {r['cpu_ms_per_req']:7.2f} ms CPU/req  "
                f"TTFT p50 {r['ttft_p50']:7.1f} p99 {r['ttft_p99']:7.1f} ms  "
                f"ok={r['ok']}/{args.requests}",
                file=sys.stderr,
            )
    print(
        f"\nlong prompts: {args.tokens}-token prompts vs 100-token ones, {args.requests} requests at "
        f"{args.concurrency} in flight, true TTFT {TTFT_MS:.0f} ms, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores"
    )
    print(
        f"{'case':<11}{'req/s':>8}{'CPU ms/req':>12}{'TTFT p50':>10}{'TTFT p99':>10}{'p99-truth':>11}"
        f"{'sim read p50/p99':>18}{'sim late p99':>14}"
    )
    for case, r in out.items():
        print(
            f"{case:<11}{r['req_s']:>8.1f}{r['cpu_ms_per_req']:>12.2f}{r['ttft_p50']:>10.1f}"
            f"{r['ttft_p99']:>10.1f}{r['ttft_p99'] - TTFT_MS:>11.1f}"
            f"{r['read_p50']:>11.1f} /{r['read_p99']:>5.1f}{r['late_p99']:>14.1f}"
        )
    print(
        "(sim read: the simulator's time from a request's headers to its body read and parsed, before"
        " admission; its ttft starts after it. sim late: its first writes against their schedule.)"
    )
    if "short" in out:
        for case in (c for c in out if c != "short"):
            extra = out[case]["cpu_ms_per_req"] - out["short"]["cpu_ms_per_req"]
            late = out[case]["ttft_p99"] - TTFT_MS
            print(
                f"{case}: {extra:+.2f} ms CPU a request over 100-token prompts (target <= 5), "
                f"TTFT p99 {late:+.1f} ms from the truth (target <= 20)"
            )


if __name__ == "__main__":
    main()
