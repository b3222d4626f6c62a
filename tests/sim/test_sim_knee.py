"""The simulator's load curve (`knee`, `knee_power`): slower answers as the batch grows, exactly.

Timing is read from the simulator's own trace (`OXCONSOLE_SIM_TRACE`) less the lateness it reports
for its own writes, as in test_sim.py, so the expected values hold to a few ms on a busy machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from oxconsole.sim import start_sim
from oxconsole.sim.curve import slowdown, throughput_peak
from oxconsole.workload import SimModelProfile, WorkloadError, load_sim_section

EPS = 0.003
"""Seconds: the trace's wall clock against the loop's, and the batch's arrival spread."""

TTFT, TPS, N, KNEE = 0.05, 100.0, 5, 2.0
KNEED = SimModelProfile(ttft=TTFT, tokens_per_s=TPS, output_tokens=N, jitter=0.0, knee=KNEE)
FLAT = SimModelProfile(ttft=TTFT, tokens_per_s=TPS, output_tokens=N, jitter=0.0)


@pytest.fixture
async def traced(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setenv("OXCONSOLE_SIM_TRACE", "1")
    runner, url = await start_sim(profiles={"kneed": KNEED, "flat": FLAT}, seed=1)
    try:
        yield url
    finally:
        await runner.cleanup()


async def _fire(url: str, model: str, count: int) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """`count` streamed requests sent at once; the trace and the simulator's lateness (s)."""
    async with aiohttp.ClientSession() as s:

        async def one(i: int) -> None:
            body = {"model": model, "stream": True, "messages": [{"role": "user", "content": f"r{i}"}]}
            async with s.post(url + "/chat/completions", json=body) as r:
                assert r.status == 200
                await r.read()

        await asyncio.gather(*(one(i) for i in range(count)))
        base = url.removesuffix("/v1")
        async with s.get(base + "/sim/trace") as r:
            trace = [tuple(t) for t in await r.json()]
        async with s.get(base + "/sim/stats") as r:
            late = (await r.json())["lateness_ms"]
    return trace, {k: late[k]["max"] / 1000 for k in ("first", "last")}


def test_slowdown_is_the_documented_curve() -> None:
    assert slowdown(7, 0.0, 2.0) == 1.0  # no knee: flat
    assert slowdown(64, 64.0, 2.0) == 2.0  # capacity C = knee: twice as slow
    assert slowdown(32, 64.0, 2.0) == 1.25
    assert slowdown(8, 4.0, 3.0) == 9.0
    assert throughput_peak(64.0, 2.0) == 64.0  # p = 2: requests/s peak at the knee too
    assert throughput_peak(10.0, 1.0) == float("inf")
    rps = [b / slowdown(b, 16.0, 2.0) for b in range(1, 40)]
    assert max(range(1, 40), key=lambda b: rps[b - 1]) == 16


@pytest.mark.asyncio
async def test_each_request_is_slowed_by_the_batch_it_joins(traced: str) -> None:
    """Six requests at once join batches of 1..6: the k-th admitted waits ttft * slowdown(k) for
    its first token and (n - 1) gaps of slowdown(k) / tokens_per_s for the rest, exactly."""
    trace, late = await _fire(traced, "kneed", 6)
    assert len(trace) == 6
    by_admission = sorted(trace, key=lambda t: t[2])
    for b, (_, t_in, t_admit, t_first, t_end) in enumerate(by_admission, start=1):
        f = slowdown(b, KNEE, 2.0)
        ttft, decode = TTFT * f, (N - 1) * f / TPS
        assert t_in <= t_admit <= t_first <= t_end
        assert ttft - EPS <= t_first - t_admit <= ttft + late["first"] + EPS, (b, t_first - t_admit)
        last = ttft + decode
        assert last - EPS <= t_end - t_admit <= last + late["last"] + EPS, (b, t_end - t_admit)


@pytest.mark.asyncio
async def test_without_a_knee_the_batch_changes_nothing(traced: str) -> None:
    trace, late = await _fire(traced, "flat", 6)
    assert len(trace) == 6
    for _, _, t_admit, t_first, t_end in trace:
        assert TTFT - EPS <= t_first - t_admit <= TTFT + late["first"] + EPS
        last = TTFT + (N - 1) / TPS
        assert last - EPS <= t_end - t_admit <= last + late["last"] + EPS


def test_the_knee_keys_are_read_and_checked(tmp_path: Path) -> None:
    p = tmp_path / "sim.toml"
    p.write_text('[sim.models.m]\nknee = 64\nknee_power = 3\n[sim.models.d]\nttft = "1ms"\n')
    got = load_sim_section(p)
    assert (got["m"].knee, got["m"].knee_power) == (64.0, 3.0)
    assert (got["d"].knee, got["d"].knee_power) == (0.0, 2.0)  # absent: no curve
    p.write_text("[sim.models.m]\nknee = -1\nknee_power = 0.1\n")
    with pytest.raises(WorkloadError) as info:
        load_sim_section(p)
    text = str(info.value)
    assert "sim.models.m.knee: expected a number >= 0, got -1" in text
    assert "sim.models.m.knee_power: expected a number between 0.5 and 8" in text
