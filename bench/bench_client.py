"""Client cost benchmark: oxconsole --headless vs a raw aiohttp client vs the article's pattern.

One zero-latency simulator (ttft 0, all tokens at once, N-chunk streams) on loopback, pinned to
core 0 where `taskset` exists; each client runs in turn as its own process pinned to core 1, at the
same concurrency, for the same number of requests; repeated, medians and ratios printed in one run
so the ratios do not depend on the machine.

    python bench/bench_client.py [--requests 4000] [--concurrency 64] [--chunks 16] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def pin(core: int) -> list[str]:
    if shutil.which("taskset") and (os.cpu_count() or 1) > core:
        return ["taskset", "-c", str(core)]
    return []


def start_server(chunks: int) -> tuple[subprocess.Popen[str], str]:
    profiles = {
        "bench": {"ttft": 0, "tokens_per_s": 0, "output_tokens": chunks, "capacity": 100000, "jitter": 0}
    }
    proc = subprocess.Popen(
        [
            *pin(0),
            sys.executable,
            "-m",
            "oxconsole.sim",
            "--port",
            "0",
            "--profiles-json",
            json.dumps(profiles),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def run_client(kind: str, url: str, n: int, conc: int, chunks: int, tmp: Path) -> dict[str, float]:
    if kind == "oxconsole":
        wl = tmp / "bench.toml"
        wl.write_text(
            f"""
name = "bench"
[run]
concurrency = {conc}
requests = {n}
timeout = "30s"
[output]
results = "{tmp / "results.jsonl"}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "bench"
max_tokens = {chunks}
[prompts]
items = ["Say sixteen words."]
"""
        )
        summary = tmp / "summary.json"
        cmd = [
            *pin(1),
            sys.executable,
            "-c",
            "import resource,sys,time,json;from oxconsole.cli import main;"
            "t=time.perf_counter();rc=main(sys.argv[1:]);w=time.perf_counter()-t;"
            "r=resource.getrusage(resource.RUSAGE_SELF);"
            "print(json.dumps({'rc':rc,'wall_s':w,'cpu_s':r.ru_utime+r.ru_stime}),file=sys.stderr)",
            str(wl),
            "--headless",
            "--summary-json",
            str(summary),
            "--progress-interval",
            "1000",
        ]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        last = p.stderr.strip().splitlines()[-1]
        meta = json.loads(last)
        s = json.loads(summary.read_text())
        (tmp / "results.jsonl").unlink(missing_ok=True)
        return {
            "ok": s["requests"]["ok"],
            "req_s": s["throughput"]["requests_per_s"],
            "cpu_ms_per_req": meta["cpu_s"] * 1000 / n,
        }
    cmd = [*pin(1), sys.executable, str(HERE / "clients.py"), kind, url, str(n), str(conc)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return {"ok": d["ok"], "req_s": d["ok"] / d["wall_s"], "cpu_ms_per_req": d["cpu_s"] * 1000 / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--article-requests",
        type=int,
        default=0,
        help="requests for the (slow) article client; default requests/4",
    )
    args = ap.parse_args()
    proc, url = start_server(args.chunks)
    results: dict[str, list[dict[str, float]]] = {"raw": [], "oxconsole": [], "article": []}
    try:
        with tempfile.TemporaryDirectory() as td:
            for rep in range(args.reps):
                for kind in results:
                    n = args.requests
                    if kind == "article":
                        n = args.article_requests or max(200, args.requests // 4)
                    r = run_client(kind, url, n, args.concurrency, args.chunks, Path(td))
                    results[kind].append(r)
                    print(
                        f"rep {rep + 1} {kind:10s} {r['req_s']:8.0f} req/s  {r['cpu_ms_per_req']:.3f} ms CPU/req  ok={r['ok']:.0f}/{n}",
                        file=sys.stderr,
                    )
    finally:
        proc.terminate()
        proc.wait(5)
    med = {k: statistics.median(x["req_s"] for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x["cpu_ms_per_req"] for x in v) for k, v in results.items()}
    print(
        f"\nclient benchmark: {args.chunks}-chunk streams, concurrency {args.concurrency}, "
        f"{args.requests} requests, {args.reps} reps, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    print(f"{'client':<12}{'req/s (median)':>16}{'CPU ms/req':>12}{'vs raw':>9}")
    for k in ("raw", "oxconsole", "article"):
        print(f"{k:<12}{med[k]:>16.0f}{cpu[k]:>12.3f}{med[k] / med['raw']:>8.2f}x")
    print(
        f"oxconsole / raw aiohttp = {med['oxconsole'] / med['raw']:.2f}x; "
        f"oxconsole / article = {med['oxconsole'] / med['article']:.2f}x"
    )


if __name__ == "__main__":
    main()
