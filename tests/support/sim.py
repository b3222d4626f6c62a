"""Helpers for the simulator's tests of reasoning, prefix caching, the Responses API and rate limits:
a simulator on loopback, raw posts, SSE parsing and the simulator's own trace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from oxconsole.sim import start_sim
from oxconsole.workload import SimLimits, SimModelProfile

EPS = 0.002
"""Seconds between the trace's wall clock and the loop's monotonic one, read microseconds apart."""

Trace = list[tuple[str, float, float, float, float]]


@asynccontextmanager
async def running_sim(
    profiles: dict[str, SimModelProfile], limits: SimLimits | None = None
) -> AsyncIterator[str]:
    """A simulator on loopback serving these profiles (and limits); yields its base URL."""
    runner, url = await start_sim(profiles=profiles, seed=3, limits=limits)
    try:
        yield url
    finally:
        await runner.cleanup()


async def raw_post(
    url: str, payload: dict[str, Any], path: str = "/chat/completions"
) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=payload) as r:
        return r.status, dict(r.headers), await r.read()


def sse_chunks(body: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of a chat or text-completion SSE body that ends with [DONE] (asserted)."""
    events = [e for e in body.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]", events[-3:]
    assert all(e.startswith("data: ") for e in events), events
    return [json.loads(e.removeprefix("data: ")) for e in events[:-1]]


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The (event name, data) pairs of a Responses SSE body (no [DONE] there)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for block in body.decode().split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        out.append((lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: "))))
    return out


async def stats_of(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as s, s.get(url.removesuffix("/v1") + "/sim/stats") as r:
        data: dict[str, Any] = await r.json()
        return data


async def trace_of(url: str) -> tuple[Trace, dict[str, Any]]:
    """The simulator's trace (`OXCONSOLE_SIM_TRACE`) and its own lateness figures (ms)."""
    async with aiohttp.ClientSession() as s, s.get(url.removesuffix("/v1") + "/sim/trace") as r:
        trace = [tuple(t) for t in await r.json()]
    return trace, (await stats_of(url))["lateness_ms"]


def assert_on_schedule(trace: Trace, late: dict[str, Any], first: float, last: float) -> None:
    """Every traced request wrote its first token `first` s and its last `last` s after admission
    (late by at most the lateness the simulator reports, never early)."""
    assert trace
    late_first, late_last = late["first"]["max"] / 1000, late["last"]["max"] / 1000
    for _, _, t_admit, t_first, t_end in trace:
        assert first - EPS <= t_first - t_admit <= first + late_first + EPS, (
            t_first - t_admit,
            first,
            late_first,
        )
        assert last - EPS <= t_end - t_admit <= last + late_last + EPS, (t_end - t_admit, last, late_last)
