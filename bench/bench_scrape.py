"""What reading a server's `/metrics` costs the engine: parse + read per scrape, and the whole scrape
task over loopback HTTP at 1 Hz, as a share of one core (the target: at most 2%).

The exposition is 200 sample lines as a vLLM with two engines (data parallel) writes them, plus
the process and Python series `prometheus_client` adds; a later scrape has every value grown. Two
measures:

* parse + read in this process, CPU per call (median of many), warm (label blocks remembered, as
  every scrape after the first) and cold, one URL and four replicas; beside it, the same body read
  by `prometheus_client.parser` (the well-kept parser the issue named) for comparison;
* the engine's own scrape task (`engine/serverwatch.py`) against a server in another process
  serving that exposition (growing at each answer), at `--interval` for `--seconds`: this
  process's CPU over the window (an idle loop's measured first and subtracted), as a share of a core.

    python bench/bench_scrape.py [--seconds 30] [--interval 1]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from oxconsole.metrics.server import parse as parse_module
from oxconsole.metrics.server.pace import CPU_BUDGET, next_interval
from oxconsole.metrics.server.parse import parse
from oxconsole.metrics.server.scrapes import Part, Scrape, read

_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
         40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
_LATENCY = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
            480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
_COUNTERS = ("prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits",
             "num_preemptions", "spec_decode_num_draft_tokens",
             "spec_decode_num_accepted_tokens")  # fmt: skip


def exposition_200(scale: float = 1.0) -> bytes:
    """Exactly 200 sample lines (vLLM, two engines, prometheus_client's own series); `scale`
    multiplies every value (a later scrape)."""
    out: list[str] = [f'python_gc_objects_collected_total{{generation="{g}"}} {1000 + g}' for g in range(3)]
    out += [f"process_cpu_seconds_total {412.0 * scale}", "process_open_fds 88.0",
            "process_resident_memory_bytes 9.1e+09", "process_start_time_seconds 1.762e+09",
            "process_virtual_memory_bytes 4.1e+10", "process_max_fds 1048576.0"]  # fmt: skip
    for e in (0, 1):
        lab = f'engine="{e}",model_name="Qwen/Qwen3-8B"'
        for name, value in (
            ("num_requests_running", 7),
            ("num_requests_waiting", 3),
            ("kv_cache_usage_perc", 0.43),
        ):
            out += [f"# TYPE vllm:{name} gauge", f"vllm:{name}{{{lab}}} {value * scale}"]
        for name in _COUNTERS:
            out += [f"# TYPE vllm:{name}_total counter", f"vllm:{name}_total{{{lab}}} {1234.0 * scale}",
                    f"vllm:{name}_created{{{lab}}} 1.7620129837561e+09"]  # fmt: skip
        for name, bounds in (("time_to_first_token_seconds", _TTFT), ("request_queue_time_seconds", _LATENCY),
                             ("e2e_request_latency_seconds", _LATENCY)):  # fmt: skip
            out.append(f"# TYPE vllm:{name} histogram")
            for i, b in enumerate(bounds):
                out.append(f'vllm:{name}_bucket{{{lab},le="{b}"}} {float(min(i * 40, 1000)) * scale}')
            out += [f'vllm:{name}_bucket{{{lab},le="+Inf"}} {1000.0 * scale}',
                    f"vllm:{name}_count{{{lab}}} {1000.0 * scale}",
                    f"vllm:{name}_sum{{{lab}}} {312.4 * scale}"]  # fmt: skip
    samples = sum(1 for line in out if not line.startswith("#"))
    out += [f'python_info{{implementation="CPython",patchlevel="{i}"}} 1.0' for i in range(200 - samples)]
    return ("\n".join(out) + "\n").encode()


def cpu(fn: Callable[[], object], repeat: int) -> float:
    """Median CPU seconds of one call."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time_ns()
        fn()
        times.append((time.process_time_ns() - t0) / 1e9)
    return statistics.median(times)


def in_process() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    bodies = [exposition_200(s) for s in (1.0, 1.1)]
    urls = [f"http://replica{i}:8000/metrics" for i in range(4)]
    before_1 = Scrape(0.0, (Part(urls[0], parse(bodies[0])),))
    before_4 = Scrape(0.0, tuple(Part(u, parse(bodies[0])) for u in urls))

    def one() -> None:
        read(Scrape(1.0, (Part(urls[0], parse(bodies[1])),)), before_1)

    def cold() -> None:
        parse_module._label_cache.clear()
        one()

    def four() -> None:
        read(Scrape(1.0, tuple(Part(u, parse(bodies[1])) for u in urls)), before_4)

    def theirs() -> None:
        for fam in text_string_to_metric_families(bodies[1].decode()):
            for _ in fam.samples:
                pass

    print(
        f"200-series exposition: {len(bodies[0]):,} bytes; CPU per scrape (median), share of a core at 1 Hz"
    )
    for label, fn, n in (
        ("parse + read, 1 URL, warm", one, 2000),
        ("parse + read, 1 URL, cold", cold, 500),
        ("parse + read, 4 URLs, warm", four, 500),
        ("prometheus_client.parser alone", theirs, 500),
    ):
        med = cpu(fn, n)
        print(f"  {label:32s} {med * 1e3:7.3f} ms  {med * 100:6.3f}%")
    big = exposition_200() * (8 * 2**20 // len(exposition_200()))
    med = cpu(lambda: parse(big[: 8 * 2**20]), 3)
    wait = next_interval(1.0, med)
    print(
        f"  8 MiB of series: parse {med * 1e3:.0f} ms -> scraped every {wait:.1f} s, "
        f"{med / wait * 100:.1f}% of a core"
    )


SERVER = textwrap.dedent(
    """
    import sys
    from aiohttp import web
    sys.path.insert(0, {here!r})
    from bench_scrape import exposition_200
    n = [0]
    async def metrics(request):
        n[0] += 1
        return web.Response(body=exposition_200(1.0 + n[0] / 100), content_type="text/plain")
    app = web.Application()
    app.router.add_get("/metrics", metrics)
    web.run_app(app, host="127.0.0.1", port={port}, print=None, access_log=None)
    """
)


async def task_share(seconds: float, interval: float, port: int) -> tuple[float, float, int]:
    """(idle share, scraping share, rounds): this process's CPU over `seconds` with a bare loop,
    then with the engine's scrape task on one endpoint at `interval`."""
    from oxconsole.engine.serverwatch import ServerWatch
    from oxconsole.workload import load_workload

    with tempfile.TemporaryDirectory() as td:
        wl = Path(td) / "w.toml"
        wl.write_text(
            textwrap.dedent(
                f"""
                [endpoints.x]
                base_url = "http://127.0.0.1:{port}/v1"
                server_metrics_interval = {interval}
                [[models]]
                name = "m"
                [prompts]
                items = ["hi"]
                """
            )
        )
        w = load_workload(wl)
        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds / 3)
        idle = (time.process_time() - c0) / (time.perf_counter() - t0)
        warnings: list[str] = []
        watch = ServerWatch(w, {}, warnings)
        watch.start()
        await asyncio.sleep(interval * 2.5)  # the first rounds: connection, label blocks
        c0, t0 = time.process_time(), time.perf_counter()
        n0 = watch.targets[0].live.scrapes
        await asyncio.sleep(seconds)
        busy = (time.process_time() - c0) / (time.perf_counter() - t0)
        rounds = watch.targets[0].live.scrapes - n0
        await watch.stop()
        assert not warnings, warnings
        return idle, busy, rounds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    in_process()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    here = str(Path(__file__).resolve().parent)
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(here=here, port=port)])
    try:
        time.sleep(1.5)
        idle, busy, rounds = asyncio.run(task_share(args.seconds, args.interval, port))
    finally:
        server.terminate()
        server.wait()
    share = busy - idle
    print(
        f"the scrape task over loopback HTTP, every {args.interval:g} s for {args.seconds:g} s "
        f"({rounds} rounds): "
        f"{share * 100:.2f}% of a core (idle loop {idle * 100:.2f}%, with scraping {busy * 100:.2f}%); "
        f"budget {CPU_BUDGET * 100:.0f}%: {'within' if share <= CPU_BUDGET else 'OVER'}"
    )


if __name__ == "__main__":
    main()
