"""Scale pieces: compact id sets for resume, the simulator's lateness figures, loop lag in the summary."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from oxconsole.base.idset import IdSet, repeated
from oxconsole.journal.journal import ok_ids
from oxconsole.reports.summary import render_summary
from oxconsole.sim import start_sim
from oxconsole.workload import SimModelProfile


def test_idset_membership_and_length() -> None:
    ids = IdSet(f"p{i}" for i in [3, 1, 2, 2, 1000])
    assert len(ids) == 4
    assert "p2" in ids and "p1000" in ids
    not_a_str: object = 7
    assert "p4" not in ids and not_a_str not in ids
    assert ids.nbytes == 4 * 8
    with pytest.raises(TypeError):
        list(ids)  # no source to read the ids from


def test_repeated_keys() -> None:
    from array import array

    assert repeated(array("q", [5, 1, 5, 2, 2, 9])) == {5, 2}
    assert repeated(array("q", [1, 2, 3])) == set()


def test_ok_ids_iterates_from_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    times = {"t_scheduled": 1.7e9, "t_sent": 1.7e9}
    lines = [
        {"id": "a", "status": "ok", **times},
        {"id": "b", "status": "error", **times},
        {"id": "c", "status": "ok", **times},
    ]
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in lines) + b'{"id": "torn')
    done, bad = ok_ids(path)
    assert bad.skipped() == 1 and bad.torn_last, bad
    assert len(done) == 2 and "a" in done and "c" in done and "b" not in done
    assert sorted(done) == ["a", "c"]


async def test_simulator_reports_its_own_lateness() -> None:
    prof = SimModelProfile(ttft=0.05, tokens_per_s=100.0, output_tokens=4, jitter=0.0)
    runner, url = await start_sim(profiles={"t": prof})
    try:
        async with aiohttp.ClientSession() as s:
            body = {"model": "t", "messages": [{"role": "user", "content": "hi"}], "stream": True}

            async def one() -> float:
                t0 = time.perf_counter()
                async with s.post(url + "/chat/completions", json=body) as r:
                    data = await r.read()
                assert data.endswith(b"data: [DONE]\n\n")
                assert data.count(b'"content":"') == 5  # role chunk + 4 tokens
                return (time.perf_counter() - t0) * 1000

            took = await asyncio.gather(*(one() for _ in range(20)))
            async with s.get(url.removesuffix("/v1") + "/sim/stats") as r:
                stats: dict[str, Any] = await r.json()
    finally:
        await runner.cleanup()
    assert min(took) >= 50 + 30 - 2  # ttft + 3 gaps of 10 ms (the loop clock is in whole ms)
    late = stats["lateness_ms"]
    assert late["first"]["n"] == 20 and late["last"]["n"] == 20
    assert late["write"]["n"] >= 20
    # in milliseconds, and no later than the client saw: a last write that left L ms late reached
    # the client at least L ms after the schedule's 80 ms (seconds or microseconds would not fit)
    assert 0.0 <= late["last"]["p50"] <= late["last"]["max"] <= max(took) - 80 + 2, (late, max(took))
    assert 0.0 <= late["first"]["max"] <= max(took)


def test_summary_shows_loop_lag() -> None:
    text = render_summary({"name": "x", "loop_lag_ms": {"p50": 0.4, "p99": 3.2, "max": 12.0}})
    assert "client loop lag" in text and "3.2" in text
