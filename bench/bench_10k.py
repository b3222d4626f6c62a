"""10,000 requests in flight in one run against the embedded simulator.

The workload uses `base_url = "sim"`, so the engine starts the simulator itself (its own process,
which raises its own open-files limit), `run.concurrency = 10000` and
`endpoints.default.max_connections = 10000`. Requests are slow (ttft 20 s, then 4 tokens at
2 tokens/s: 21.5 s each) so that 10,000 are open at once while the client dispatches ~1,000 a
second. Printed: the most requests in flight at once (sampled every 50 ms on the engine's loop),
errors by class (must be none), CPU and peak RSS of the client and of the simulator, open
descriptors at the peak, and the engine's warnings.

    python bench/bench_10k.py [--requests 20000] [--concurrency 10000] [--rate R] [--nofile N]

By default all 10,000 are sent at once (closed loop); `--rate 900` spreads them (open loop).

`--nofile N` first lowers this process's open-files limit (soft and hard) to N, to show what a
user with a low limit sees: the engine's warning and what the requests beyond it do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def proc_status(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_s"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                out["peak_rss_mb"] = int(line.split()[1]) / 1024
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


def child(wl: str, out: str) -> None:
    from oxconsole.base.aio import run_loop
    from oxconsole.cli.headless import engine_with_progress
    from oxconsole.cli.prepare import prepare_run

    prep = prepare_run(wl, [], None, False)
    engine: Any = engine_with_progress(prep, 5.0)
    peak = {"in_flight": 0, "t": 0.0, "fds": 0, "sim_fds": 0}
    sim_last: dict[str, float] = {}

    async def probe() -> None:
        t0 = time.perf_counter()
        ticks = 0
        while True:
            await asyncio.sleep(0.05)
            n = engine.shard.in_flight
            if n > peak["in_flight"]:
                peak["in_flight"] = n
                peak["t"] = round(time.perf_counter() - t0, 1)
            ticks += 1
            if ticks % 20 == 0:  # once a second: open descriptors (sockets) on both sides
                peak["fds"] = max(peak["fds"], len(os.listdir("/proc/self/fd")))
                sim = getattr(engine, "_sim", None)
                if sim is not None and sim.pid:
                    st = proc_status(sim.pid)
                    sim_last.update(st)
                    peak["sim_fds"] = max(peak["sim_fds"], int(st.get("fds", 0)))

    async def go() -> Any:
        task = asyncio.create_task(probe())
        try:
            return await engine.run()
        finally:
            task.cancel()

    t0 = time.perf_counter()
    cpu0 = time.process_time()
    outcome = run_loop(go())
    s = outcome.summary
    Path(out).write_text(
        json.dumps(
            {
                "wall_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - cpu0,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "peak": peak,
                "sim": sim_last,
                "requests": s["requests"],
                "errors": s["errors"],
                "attempt_errors": s.get("attempt_errors", {}),
                "latency_ms": s["latency_ms"],
                "ttft_ms": s["ttft_ms"],
                "rps": s["throughput"]["requests_per_s"],
                "loop_lag_ms": s.get("loop_lag_ms", {}),
                "warnings": outcome.warnings,
                "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
            }
        )
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=0.0, help="constant arrival at this rate (0 = closed loop)")
    ap.add_argument("--nofile", type=int, help="lower the open-files limit (soft and hard) to this first")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ox10k-") as d:
        tmp = Path(d)
        wl = tmp / "10k.toml"
        wl.write_text(
            f"""
name = "10k"
[run]
concurrency = {ns.concurrency}
requests = {ns.requests}
timeout = "60s"
rate = {ns.rate}
arrival = "{"constant" if ns.rate else "closed"}"
[output]
results = "{tmp / "results.jsonl"}"
save_text = false
[endpoints.default]
base_url = "sim"
max_connections = {ns.concurrency}
[[models]]
name = "slow"
[prompts]
synthetic = {{ count = {ns.requests}, input_tokens = 20, output_tokens = 4 }}
[sim.models.slow]
ttft = "20s"
tokens_per_s = 2
output_tokens = 4
capacity = 100000
jitter = 0
"""
        )
        out = tmp / "out.json"

        def limit() -> None:
            if ns.nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (ns.nofile, ns.nofile))

        r = subprocess.run(
            [sys.executable, __file__, "--child", str(wl), str(out)], cwd=tmp, preexec_fn=limit, check=False
        )
        if not out.exists():
            raise SystemExit(f"the run failed (exit {r.returncode})")
        res = json.loads(out.read_text())
    req = res["requests"]
    print(
        f"10k in flight: {req['ok']:,} ok / {req['error']:,} error of {req['total']:,} "
        f"in {res['wall_s']:.1f}s ({res['rps']:.0f} req/s); open-files limit {res['nofile']}"
    )
    p = res["peak"]
    print(
        f"  max in flight {p['in_flight']:,} (at {p['t']}s); descriptors near the peak: "
        f"client {p['fds']:,}, simulator {p['sim_fds']:,}"
    )
    print(f"  errors {res['errors'] or 'none'}; attempt errors {res['attempt_errors'] or 'none'}")
    lat, ttft = res["latency_ms"], res["ttft_ms"]
    print(
        f"  latency p50 {lat['p50']:.0f} p99 {lat['p99']:.0f} ms (truth 21500); "
        f"ttft p50 {ttft['p50']:.0f} p99 {ttft['p99']:.0f} ms (truth 20000)"
    )
    lag = res["loop_lag_ms"]
    if lag:
        print(f"  client loop lag p50 {lag['p50']:.1f} p99 {lag['p99']:.1f} max {lag['max']:.1f} ms")
    sim = res["sim"]
    print(
        f"  client CPU {res['cpu_s']:.1f}s, peak RSS {res['rss_mb']:.0f} MB; simulator CPU "
        f"{sim.get('cpu_s', 0):.1f}s, peak RSS {sim.get('peak_rss_mb', 0):.0f} MB"
    )
    for w in res["warnings"]:
        print(f"  warning: {w}")


if __name__ == "__main__":
    main()
