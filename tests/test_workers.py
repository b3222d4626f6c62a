"""run.workers: several engine processes, one journal, one collector, commands split into shares."""

from __future__ import annotations

import asyncio
import os
import signal

import orjson

from oxconsole.engine.commands import Pause, Resume, SetConcurrency
from oxconsole.engine.pool import WorkerPool, make_engine, split

from .conftest import WorkloadFactory

WL = """
[run]
concurrency = 8
workers = 2
[endpoints.default]
base_url = "sim"
[[models]]
name = "a"
[[models]]
name = "b"
[prompts]
synthetic = {{ count = {count}, input_tokens = 5, output_tokens = 4 }}
[sim.models.a]
ttft = "{ttft}"
tokens_per_s = 0
[sim.models.b]
ttft = "{ttft}"
tokens_per_s = 0
"""


def test_split_shares() -> None:
    assert split(10, 2) == [5, 5]
    assert split(11, 2) == [6, 5]
    assert split(1, 3) == [1, 1, 1]  # every worker keeps at least one slot
    assert sum(split(1000, 7)) == 1000


async def test_two_workers_one_journal_each_id_once(make_workload: WorkloadFactory) -> None:
    w = make_workload(WL.format(count=300, ttft="20ms"))
    e = make_engine(w, results_path=w.results_path(), total_expected=300, publish_interval=0.05)
    assert isinstance(e, WorkerPool) and e.n == 2
    seen_limits: list[int] = []
    peak_after = 0

    async def drive() -> None:
        nonlocal peak_after
        while e.latest is None or e.latest.counts.total < 60:
            await asyncio.sleep(0.02)
        e.apply(SetConcurrency(2))
        e.apply(Pause())
        await asyncio.sleep(0.4)  # in flight drains; nothing new is sent
        frozen = e.latest.gauges.dispatched if e.latest else 0
        await asyncio.sleep(0.3)
        assert e.latest is not None and e.latest.gauges.dispatched == frozen
        e.apply(Resume())
        while e.state == "running":
            if e.latest is not None:
                seen_limits.append(e.latest.gauges.concurrency)
                peak_after = max(peak_after, e.latest.gauges.in_flight)
            await asyncio.sleep(0.02)

    d = asyncio.create_task(drive())
    out = await e.run()
    await d
    recs = [orjson.loads(x) for x in w.results_path().read_bytes().splitlines()]
    ids = [r["id"] for r in recs]
    assert len(ids) == 300 and len(set(ids)) == 300
    assert out.exit_code == 0
    assert out.summary["requests"]["ok"] == 300
    assert out.summary["workers"] == 2
    # the workers' own event-loop lag and GC pacing reach the summary (the worst lag, summed GC)
    lag = out.summary["loop_lag_ms"]
    assert set(lag) == {"p50", "p99", "max"} and 0.0 <= lag["p50"] <= lag["p99"] <= lag["max"]
    assert set(out.summary["gc"]) == {"collections", "pause_ms"}
    assert [c["what"] for c in out.summary["changes"]] == ["concurrency", "paused", "paused"]
    assert set(seen_limits) == {2}
    assert peak_after <= 2
    assert {r["model"] for r in recs} == {"a", "b"}


async def test_worker_crash_is_reported_not_silent(make_workload: WorkloadFactory) -> None:
    w = make_workload(WL.format(count=2000, ttft="50ms"))
    e = make_engine(w, results_path=w.results_path(), total_expected=2000)
    assert isinstance(e, WorkerPool)

    async def kill_one() -> None:
        while e.latest is None or e.latest.counts.total < 20:
            await asyncio.sleep(0.02)
        pid = e._workers[0].proc.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)

    k = asyncio.create_task(kill_one())
    out = await e.run()
    await k
    assert out.exit_code == 1
    assert any("worker 0 ended unexpectedly" in x for x in out.warnings)
    ids = [orjson.loads(x)["id"] for x in w.results_path().read_bytes().splitlines()]
    assert len(ids) == len(set(ids)) and 20 <= len(ids) < 2000


async def test_attempt_errors_reach_the_parent_while_requests_retry(make_workload: WorkloadFactory) -> None:
    # Every attempt is a 429 asking for 0.5 s: each request fails twice, waits, and ends with a
    # third 429 after about a second. Its retried attempts must show in the parent's snapshot at
    # once (a worker forwards them live), not only when the records that carry them arrive.
    w = make_workload(
        """
        [run]
        concurrency = 8
        workers = 2
        [endpoints.default]
        base_url = "sim"
        [[models]]
        name = "m"
        [prompts]
        synthetic = { count = 8, input_tokens = 5, output_tokens = 4 }
        [retry]
        max_attempts = 3
        backoff = "1ms"
        backoff_max = "5ms"
        [sim.models.m]
        ttft = "5ms"
        throttle_rate = 1.0
        retry_after = "500ms"
        """
    )
    e = make_engine(w, results_path=w.results_path(), total_expected=8, publish_interval=0.02)
    assert isinstance(e, WorkerPool)
    live_before_any_record: list[int] = []

    async def watch() -> None:
        while e.state != "done":
            s = e.latest
            if s is not None and s.counts.total == 0 and s.attempt_errors:
                live_before_any_record.append(sum(s.attempt_errors.values()))
            await asyncio.sleep(0.01)

    wt = asyncio.create_task(watch())
    out = await e.run()
    await wt
    recs = [orjson.loads(x) for x in w.results_path().read_bytes().splitlines()]
    assert len(recs) == 8 and all(r["error"] == "http_429" for r in recs)
    assert live_before_any_record, "no attempt error reached the parent before the first record"
    journaled: dict[str, int] = {}
    for r in recs:
        for cls, n in (r["attempt_errors"] or {}).items():
            journaled[cls] = journaled.get(cls, 0) + n
    assert journaled == {"http_429": 16}
    assert out.summary["attempt_errors"] == journaled  # counted live, then once as final
    assert e.latest is not None and e.latest.attempt_errors == journaled
