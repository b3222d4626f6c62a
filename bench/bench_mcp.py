"""`oxconsole mcp` against a real run at 1,000 requests in flight: how long an agent's `snapshot`
takes, how soon a `set` shows in a console's snapshot, and what the server costs while idle.

    python bench/bench_mcp.py [--calls 200] [--idle 30]

A run of 1,000 in flight on the simulator (each request held 3 s) is started headless in a process of
its own, as a person would; the MCP server runs here over this user's runs with the SDK's in-memory
client (the transport an agent host adds is a pipe or a loopback socket on top). Printed:

- `snapshot`: p50 / p99 / max of the tool call's round trip (target: under 50 ms);
- `set` -> console: from the `set` call to the first snapshot a console (a `SocketSource` at 4 Hz,
  as `oxconsole attach` reads) shows with the new concurrency (target: one snapshot period, 250 ms,
  plus the socket's round trip);
- idle: CPU of an `oxconsole mcp` process on stdio over `--idle` seconds, connected and quiet, then
  with one snapshot subscription updated once a second (target: under 1% of a core).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORKLOAD = """\
name = "mcpbench"
[run]
concurrency = 1000
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
max_tokens = 4
[prompts]
synthetic = { count = 1000000, input_tokens = 8, output_tokens = 4 }
[sim.models.m]
ttft = "3s"
tokens_per_s = 0
jitter = 0
capacity = 2000
"""


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(calls: int, folder: Path) -> None:
    from mcp import Client

    from oxconsole.cli.agents.runs import Runs
    from oxconsole.cli.agents.tools import build_server
    from oxconsole.control import SocketSource, list_runs

    entry = next(e for e in list_runs() if e.name == "mcpbench")
    runs = Runs()
    mcp, _ = build_server(runs)
    async with Client(mcp) as client:
        while True:  # until the run holds its 1,000 in flight
            r = await client.call_tool("snapshot", {"name": entry.key})
            if (r.structured_content or {}).get("in_flight", 0) >= 990:
                break
            await asyncio.sleep(0.2)
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = await client.call_tool("snapshot", {"name": entry.key})
            times.append((time.perf_counter() - t0) * 1000)
            assert not r.is_error, r.content
        size = len(r.content[0].text)  # type: ignore[union-attr]
        times.sort()
        in_flight = (r.structured_content or {})["in_flight"]
        p50, p99 = statistics.median(times), times[int(0.99 * (len(times) - 1))]
        print(
            f"snapshot at {in_flight} in flight: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
            f"max {times[-1]:.1f} ms ({calls} calls, {size:,} bytes)"
        )
        console = SocketSource.from_entry(entry, hz=4.0)
        await console.start()
        effects = []
        for value in (900, 1000, 900, 1000, 900, 1000, 900, 1000):
            t0 = time.perf_counter()
            r = await client.call_tool("set", {"name": entry.key, "concurrency": value})
            assert not r.is_error, r.content
            while True:
                s = console.latest()
                if s is not None and s.gauges.concurrency == value:
                    break
                await asyncio.sleep(0.005)
            effects.append((time.perf_counter() - t0) * 1000)
        await console.close()
        print(
            "set -> a console's snapshot: "
            + ", ".join(f"{x:.0f}" for x in effects)
            + f" ms (median {statistics.median(effects):.0f} ms)"
        )
        await client.call_tool("stop", {"name": entry.key, "cancel": True})
    await runs.close()


def _idle(seconds: float) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    async def run() -> None:
        env = {k: v for k, v in os.environ.items() if k.startswith("XDG_") or k == "PATH"}
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "oxconsole", "mcp"], cwd=REPO, env=env
        )
        async with Client(params) as client:
            await client.call_tool("runs")
            pid = next(int(p) for p in os.listdir("/proc") if p.isdigit() and _is_mcp(int(p)))
            c0, t0 = _cpu(pid), time.monotonic()
            await anyio.sleep(seconds)
            quiet = (_cpu(pid) - c0) / (time.monotonic() - t0)
            async with client.listen(resource_subscriptions=["oxconsole://runs"]):
                c0, t0 = _cpu(pid), time.monotonic()
                await anyio.sleep(seconds)
                listening = (_cpu(pid) - c0) / (time.monotonic() - t0)
        said = f"{100 * quiet:.2f}% of a core quiet, {100 * listening:.2f}% subscribed"
        print(f"idle `oxconsole mcp` on stdio: {said}")

    anyio.run(run)


def _is_mcp(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[1:4] == [b"-m", b"oxconsole", b"mcp"] and pid != os.getpid()
    except OSError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--idle", type=float, default=30.0)
    ns = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    with tempfile.TemporaryDirectory(prefix="oxcmcp") as d:
        folder = Path(d)
        (folder / "w.toml").write_text(WORKLOAD)
        p = subprocess.Popen(
            [sys.executable, "-m", "oxconsole", "w.toml", "--headless"],
            cwd=folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            from oxconsole.control import list_runs

            deadline = time.monotonic() + 60
            while not any(e.name == "mcpbench" and e.state == "running" for e in list_runs()):
                if time.monotonic() > deadline or p.poll() is not None:
                    raise SystemExit("the run did not start")
                time.sleep(0.1)
            asyncio.run(_measure(ns.calls, folder))
            p.wait(60)
        finally:
            if p.poll() is None:
                p.kill()
    _idle(ns.idle)


if __name__ == "__main__":
    main()
