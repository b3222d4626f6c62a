"""More in flight than the connection pool holds: where the wait for a connection goes.

The simulator (its own process, jitter 0, room for every request) answers each request whole
`--ttft` after admission, so every request's true TTFT is exactly that. oxconsole runs a closed
loop at `--concurrency` in flight over `--connections` pooled connections (`max_connections`), so
most requests wait for a connection; the wait must be queue time (`queue_ms`), outside the
attempt's TTFT, latency and `--timeout`. Printed: requests ok and timed out, TTFT p50/p99 against
the truth, queue_ms p50/p99, requests/s and the client's CPU per request.

`--pythonpath DIR` runs the oxconsole of another checkout (its `oxconsole/` folder under DIR), so
one run of this bench can set a version before a change beside the one after it.

    python bench/bench_pool.py [--concurrency 1000] [--connections 200] [--ttft 0.5]
                               [--requests 5000] [--timeout 2] [--pythonpath DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WRAP = (
    "import resource,sys,time,json\n"
    "def cpu():\n r=resource.getrusage(resource.RUSAGE_SELF);return r.ru_utime+r.ru_stime\n"
    "import openai,oxconsole.engine.runner;from oxconsole.cli.main import main;c0=cpu()\n"
    "t=time.perf_counter();rc=main(sys.argv[1:]);w=time.perf_counter()-t\n"
    "print(json.dumps({'rc':rc,'wall_s':w,'cpu_s':cpu()-c0}),file=sys.stderr)"
)


def start_sim(ttft: float) -> tuple[subprocess.Popen[str], str]:
    profile = {"ttft": ttft, "tokens_per_s": 0, "output_tokens": 16, "capacity": 100_000, "jitter": 0}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.sim", "--port", "0", "--profiles-json", json.dumps({"m": profile})],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def run_case(tmp: Path, url: str, args: argparse.Namespace, code: str | None) -> dict[str, Any]:
    tag = "this" if code is None else Path(code).name
    wl = tmp / f"{tag}.toml"
    wl.write_text(
        f"""
name = "pool-{tag}"
[run]
concurrency = {args.concurrency}
requests = {args.requests}
timeout = "{args.timeout}s"
[retry]
max_attempts = 1
[output]
results = "{tmp / (tag + ".jsonl")}"
[endpoints.default]
base_url = "{url}"
max_connections = {args.connections}
[[models]]
name = "m"
max_tokens = 16
[prompts]
synthetic = {{ count = {args.requests}, input_tokens = 10, output_tokens = 16 }}
"""
    )
    summary = tmp / f"{tag}.summary.json"
    cmd = [sys.executable, "-c", WRAP, str(wl), "--headless", "--summary-json", str(summary)]
    cmd += ["--progress-interval", "1000"]
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = code
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
    try:
        meta = json.loads(p.stderr.strip().splitlines()[-1])
        s = json.loads(summary.read_text())
    except (IndexError, ValueError, OSError):
        raise SystemExit(f"{tag}: the run failed:\n{p.stderr[-3000:]}") from None
    (tmp / f"{tag}.jsonl").unlink(missing_ok=True)
    return {
        "code": tag,
        "ok": s["requests"]["ok"],
        "timeouts": s["errors"].get("timeout", 0),
        "req_s": s["throughput"]["requests_per_s"],
        "ttft_p50": s["ttft_ms"]["p50"],
        "ttft_p99": s["ttft_ms"]["p99"],
        "queue_p50": s["queue_ms"]["p50"],
        "queue_p99": s["queue_ms"]["p99"],
        "cpu_ms": meta["cpu_s"] * 1000 / args.requests,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concurrency", type=int, default=1000)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--ttft", type=float, default=0.5, help="the simulator's TTFT, seconds")
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--timeout", type=float, default=2.0, help="run.timeout, seconds")
    ap.add_argument("--pythonpath", action="append", default=[], metavar="DIR")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for code in [*args.pythonpath, None]:
            proc, url = start_sim(args.ttft)  # a fresh simulator a case
            try:
                rows.append(run_case(Path(d), url, args, code))
            finally:
                proc.terminate()
                proc.wait()
    truth = args.ttft * 1000
    print(
        f"pool wait: {args.concurrency} in flight over {args.connections} connections, "
        f"{args.requests} requests, timeout {args.timeout:g}s, true TTFT {truth:g} ms"
    )
    head = f"{'code':<10}{'ok':>7}{'timeouts':>10}{'req/s':>8}{'TTFT p50/p99':>18}{'queue p50/p99':>18}"
    print(head + f"{'CPU ms/req':>12}")
    for r in rows:
        print(
            f"{r['code']:<10}{r['ok']:>7}{r['timeouts']:>10}{r['req_s']:>8.0f}"
            f"{r['ttft_p50']:>9.0f}/{r['ttft_p99']:<8.0f}{r['queue_p50']:>9.0f}/{r['queue_p99']:<8.0f}"
            f"{r['cpu_ms']:>12.3f}"
        )


if __name__ == "__main__":
    main()
