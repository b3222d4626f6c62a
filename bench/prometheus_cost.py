"""What `/metrics` costs the engine: CPU seconds per request with and without a 1 s scrape.

Runs the same workload against the simulator (its own process, so not counted) in this process,
alternating without and with `[output] prometheus` scraped every second by a separate `curl`
loop (the scraper's CPU is not the engine's), and prints engine CPU per request and the ratio.
    python bench/prometheus_cost.py [REQUESTS] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from oxconsole.engine.runner import Engine
from oxconsole.workload import load_workload

WL = """
name = "prom-cost"
[run]
concurrency = 64
[output]
results = "{results}"
save_text = false
{extra}
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
[prompts]
synthetic = {{ count = {count}, input_tokens = 5, output_tokens = 16 }}
[sim.models.m]
ttft = "5ms"
tokens_per_s = 2000
jitter = 0
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one(count: int, prom: bool, folder: Path) -> float:
    port = free_port()
    extra = f'prometheus = "127.0.0.1:{port}"' if prom else ""
    wl = folder / "w.toml"
    wl.write_text(WL.format(results=folder / f"r{time.monotonic_ns()}.jsonl", extra=extra, count=count))
    w = load_workload(wl)
    scraper = None
    if prom:
        loop_cmd = f"while true; do curl -s -o /dev/null http://127.0.0.1:{port}/metrics; sleep 1; done"
        scraper = subprocess.Popen(["sh", "-c", loop_cmd])
    try:
        e = Engine(w, results_path=w.results_path(), total_expected=count)
        c0 = time.process_time()
        out = asyncio.run(e.run())
        cpu = time.process_time() - c0
    finally:
        if scraper is not None:
            scraper.kill()
    return cpu / max(1, out.ok + out.error)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    off: list[float] = []
    on: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(rounds):
            off.append(one(count, False, Path(d)))
            on.append(one(count, True, Path(d)))
    a, b = min(off), min(on)
    print(f"engine CPU per request: without {a * 1e6:.1f} µs, with a 1 s scrape {b * 1e6:.1f} µs")
    print(f"cost: {100 * (b - a) / a:+.2f}% (best of {rounds} rounds of {count} requests each)")


if __name__ == "__main__":
    main()
