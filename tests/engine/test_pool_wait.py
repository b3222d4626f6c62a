"""More requests in flight than the endpoint's `max_connections`: the wait for a pooled connection is
queue time (`queue_ms`), outside the attempt's clock and timeout, so TTFT and latency stay the
server's and no request times out waiting for a connection.

The simulator answers every request 300 ms after admission (no jitter, room for all of them):
12 in flight over 2 connections is 6 waves, each request waiting up to 1.5 s for a connection;
a timeout of 1 s is far above the server's 300 ms and far below that wait.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import journal, run
from tests.support.workloads import load_workload

TTFT_MS = 300.0


async def test_the_wait_for_a_pooled_connection_is_queue_time_not_the_servers(tmp_path: Path) -> None:
    w = load_workload(
        "sim_exact",
        tmp_path,
        {
            "run.concurrency": 12,
            "run.requests": 36,
            "run.timeout": "1s",
            "endpoints.default.max_connections": 2,
            "prompts.synthetic.count": 36,
            "sim.models.m.ttft": f"{TTFT_MS:g}ms",
            "sim.models.m.capacity": 64,
            "retry.max_attempts": 1,
        },
    )
    out = await run(w)
    recs = journal(w)
    s = out.summary
    assert s["requests"]["ok"] == 36 and s["errors"] == {}, (s["requests"], s["errors"])
    ttft = s["ttft_ms"]
    # the server's 300 ms, plus what a loaded machine adds: never the 5 waves of waiting
    assert TTFT_MS <= ttft["p50"] < 2 * TTFT_MS and ttft["p99"] < 3 * TTFT_MS, ttft
    assert all(r["latency_ms"] < 3 * TTFT_MS for r in recs), [r["latency_ms"] for r in recs]
    # the wait is there, as queue time: 12 in flight over 2 connections
    queue = s["queue_ms"]
    assert queue["p50"] > TTFT_MS and queue["max"] > 3 * TTFT_MS, queue
    # t_sent is when the request left: after its wait, not when its slot was taken
    late = [r for r in recs if r["t_sent"] - r["t_scheduled"] < r["queue_ms"] / 1000.0 - 0.05]
    assert not late, late[:3]
