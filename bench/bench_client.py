"""Client cost benchmark: oxconsole --headless vs a raw aiohttp client vs the article's pattern.

One zero-latency simulator (ttft 0, all tokens at once, N-chunk streams) on loopback, pinned to
core 0 where `taskset` exists; each client runs in turn as its own process pinned to core 1, at the
same concurrency, for the same number of requests; repeated, medians and ratios printed in one run
so the ratios do not depend on the machine. `--chunks 16,256` runs each stream length in turn
(long generations are where per-chunk cost dominates) and prints one table for each.

`--reasoning` measures instead what reading reasoning costs the client: one simulator serves a
plain model and a reasoning model whose streams have the same number of chunks (half of them
`reasoning_content` before the answer), oxconsole runs each in turn, and the ratio of the two is
printed (the target: within 10%).

CPU per request is counted after each client's imports (importing the openai SDK alone costs
about a second of CPU, once per process); oxconsole's import CPU is printed beside it.

    python bench/bench_client.py [--requests 4000] [--concurrency 64] [--chunks 16[,256]] [--reps 3]
    python bench/bench_client.py --reasoning [--chunks 64] [--reps 3]
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


def start_server(chunks: int, reasoning: bool = False) -> tuple[subprocess.Popen[str], str]:
    plain = {"ttft": 0, "tokens_per_s": 0, "output_tokens": chunks, "capacity": 100000, "jitter": 0}
    profiles: dict[str, dict[str, object]] = {"bench": plain}
    if reasoning:  # the same number of chunks, the first half of them reasoning
        profiles["think"] = {**plain, "output_tokens": chunks - chunks // 2, "reasoning_tokens": chunks // 2}
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


def run_client(
    kind: str, url: str, n: int, conc: int, chunks: int, tmp: Path, model: str = "bench"
) -> dict[str, float]:
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
name = "{model}"
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
            "import resource,sys,time,json\n"
            "def cpu():\n r=resource.getrusage(resource.RUSAGE_SELF);return r.ru_utime+r.ru_stime\n"
            "import openai,oxconsole.engine.runner;from oxconsole.cli.main import main;c0=cpu()\n"
            "t=time.perf_counter();rc=main(sys.argv[1:]);w=time.perf_counter()-t\n"
            "print(json.dumps({'rc':rc,'wall_s':w,'cpu_s':cpu()-c0,'import_cpu_s':c0}),file=sys.stderr)",
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
            "import_cpu_s": meta["import_cpu_s"],
        }
    cmd = [*pin(1), sys.executable, str(HERE / "clients.py"), kind, url, str(n), str(conc), str(chunks)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return {"ok": d["ok"], "req_s": d["ok"] / d["wall_s"], "cpu_ms_per_req": d["cpu_s"] * 1000 / n}


def bench_chunks(args: argparse.Namespace, chunks: int) -> dict[str, float]:
    """One simulator with `chunks`-chunk streams; every client `reps` times; a table; the ratios."""
    proc, url = start_server(chunks)
    results: dict[str, list[dict[str, float]]] = {"raw": [], "oxconsole": [], "article": []}
    try:
        with tempfile.TemporaryDirectory() as td:
            for rep in range(args.reps):
                for kind in results:
                    n = args.requests
                    if kind == "article":
                        # the SDK's pydantic chunks cost ~0.5 ms each: keep its share of the time sane
                        n = args.article_requests or max(100, args.requests * 4 // chunks)
                    r = run_client(kind, url, n, args.concurrency, chunks, Path(td))
                    results[kind].append(r)
                    print(
                        f"{chunks:4d} chunks rep {rep + 1} {kind:10s} {r['req_s']:8.0f} req/s  "
                        f"{r['cpu_ms_per_req']:.3f} ms CPU/req  ok={r['ok']:.0f}/{n}",
                        file=sys.stderr,
                    )
    finally:
        proc.terminate()
        proc.wait(5)
    med = {k: statistics.median(x["req_s"] for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x["cpu_ms_per_req"] for x in v) for k, v in results.items()}
    imp = statistics.median(x["import_cpu_s"] for x in results["oxconsole"])
    print(
        f"\nclient benchmark: {chunks}-chunk streams, concurrency {args.concurrency}, "
        f"{args.requests} requests, {args.reps} reps, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    print(f"{'client':<12}{'req/s (median)':>16}{'CPU ms/req':>12}{'vs raw':>9}")
    for k in ("raw", "oxconsole", "article"):
        print(f"{k:<12}{med[k]:>16.0f}{cpu[k]:>12.3f}{med[k] / med['raw']:>8.2f}x")
    ratios = {"raw": med["oxconsole"] / med["raw"], "article": med["oxconsole"] / med["article"]}
    print(
        f"oxconsole / raw aiohttp = {ratios['raw']:.2f}x; oxconsole / article = {ratios['article']:.2f}x"
        f" (oxconsole imports: {imp:.2f} s CPU once per process, not counted above)"
    )
    return ratios


def bench_reasoning(args: argparse.Namespace, chunks: int) -> float:
    """oxconsole on plain streams and on reasoning streams of as many chunks, interleaved `reps`
    times on one simulator; the ratio of their median rates (reasoning / plain)."""
    proc, url = start_server(chunks, reasoning=True)
    results: dict[str, list[dict[str, float]]] = {"bench": [], "think": []}
    try:
        with tempfile.TemporaryDirectory() as td:
            for rep in range(args.reps):
                for model in results:
                    r = run_client("oxconsole", url, args.requests, args.concurrency, chunks, Path(td), model)
                    results[model].append(r)
                    print(
                        f"{chunks:4d} chunks rep {rep + 1} {model:6s} {r['req_s']:8.0f} req/s  "
                        f"{r['cpu_ms_per_req']:.3f} ms CPU/req  ok={r['ok']:.0f}/{args.requests}",
                        file=sys.stderr,
                    )
    finally:
        proc.terminate()
        proc.wait(5)
    med = {k: statistics.median(x["req_s"] for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x["cpu_ms_per_req"] for x in v) for k, v in results.items()}
    print(
        f"\nreasoning streams: {chunks} chunks each ({chunks // 2} reasoning), concurrency "
        f"{args.concurrency}, {args.requests} requests, {args.reps} reps, {os.cpu_count()} cores"
    )
    print(f"{'streams':<12}{'req/s (median)':>16}{'CPU ms/req':>12}")
    for k, label in (("bench", "plain"), ("think", "reasoning")):
        print(f"{label:<12}{med[k]:>16.0f}{cpu[k]:>12.3f}")
    ratio = med["think"] / med["bench"]
    print(f"reasoning / plain = {ratio:.2f}x req/s, {cpu['think'] / cpu['bench']:.2f}x CPU per request")
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--chunks", default="16", help="chunks per stream; several: 16,256")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--article-requests",
        type=int,
        default=0,
        help="requests for the (slow) article client; default requests*4/chunks, at least 100",
    )
    ap.add_argument("--reasoning", action="store_true", help="reasoning streams against plain ones")
    args = ap.parse_args()
    lengths = [int(c) for c in str(args.chunks).split(",") if c.strip()]
    if args.reasoning:
        for c in lengths:
            bench_reasoning(args, c)
        return
    ratios = {c: bench_chunks(args, c) for c in lengths}
    if len(ratios) > 1:
        print()
        for c, r in ratios.items():
            print(
                f"{c:4d} chunks: oxconsole / raw aiohttp = {r['raw']:.2f}x; "
                f"oxconsole / article = {r['article']:.2f}x"
            )


if __name__ == "__main__":
    main()
