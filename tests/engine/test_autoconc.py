"""The adaptive-concurrency controller on virtual time against a synthetic plant.

The plant is a closed loop on virtual time (a discrete-event loop): `limit` requests in flight,
each taking `latency(b)` for the batch `b` it joined (the simulator's load curve,
``L0 * (1 + (b / C) ** 2)``), good when within an SLO that every batch up to `C` meets and none
above it does. So `C` is the answer, and a two-minute run takes milliseconds, exactly.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

import pytest

from oxconsole.engine.drivers.autosearch import AutoConcurrency
from oxconsole.sim.curve import slowdown

L0 = 0.7
"""Seconds: the unloaded latency (50 ms ttft + 64 tokens at 100/s, as bench_auto's profile)."""


def closed_loop(
    ctl: AutoConcurrency,
    latency: Callable[[int, float], float],
    slo: float,
    duration: float,
    *,
    send_limit: Callable[[float], int] | None = None,
) -> list[tuple[float, int]]:
    """Run the plant for `duration` virtual seconds; the controller's limit as (time, limit) steps.

    A discrete-event loop: each request takes `latency(b, t)` for the batch `b` it joined at time
    `t`; when requests finish, every one finishing at that instant is observed, then the run sends
    up to the limit again. `send_limit(t)`, when given, caps what the run sends (a rate or the
    prompts running out)."""
    steps = [(0.0, ctl.limit)]
    pending: list[tuple[float, int, float]] = []  # (finish time, sequence, latency)
    n = seq = 0

    def send(t: float) -> None:
        nonlocal n, seq
        cap = ctl.limit if send_limit is None else min(ctl.limit, send_limit(t))
        while n < cap:
            n += 1
            lat = latency(n, t)
            seq += 1
            heapq.heappush(pending, (t + lat, seq, lat))

    send(0.0)
    while pending and pending[0][0] < duration:
        t = pending[0][0]
        while pending and pending[0][0] == t:
            _, _, lat = heapq.heappop(pending)
            n -= 1
            old = ctl.limit
            ctl.observe(t, lat <= slo, lat, n)
            assert ctl.changed == (ctl.limit != old)
            if ctl.changed:
                steps.append((t, ctl.limit))
        send(t)
    return steps


def knee(c: int) -> tuple[Callable[[int, float], float], float]:
    """The plant of capacity `c`: latency by batch, and an SLO met up to c and missed above it."""
    slo = L0 * (slowdown(c, c, 2.0) + slowdown(c + 1, c, 2.0)) / 2
    return (lambda b, t: L0 * slowdown(b, c, 2.0)), slo


def held(steps: list[tuple[float, int]], since: float, until: float) -> list[tuple[float, int]]:
    """(seconds held, limit) for each step overlapping [since, until)."""
    out = []
    for i, (t, v) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else until
        a, z = max(t, since), min(end, until)
        if z > a:
            out.append((z - a, v))
    return out


def settled_at(steps: list[tuple[float, int]], c: int, band: float = 0.15) -> float:
    """When the limit entered ±band of c (or ±1: a limit is whole) for good (0 if it never left)."""
    out = 0.0
    for i, (_, v) in enumerate(steps):
        if abs(v - c) > band * c + 1:
            out = steps[i + 1][0] if i + 1 < len(steps) else float("inf")
    return out


@pytest.mark.parametrize("c", [3, 8, 32, 64, 200, 900])
def test_finds_and_holds_the_knee(c: int) -> None:
    latency, slo = knee(c)
    ctl = AutoConcurrency(0.95, hi=1024)
    steps = closed_loop(ctl, latency, slo, 120.0)
    t_settle = settled_at(steps, c)
    assert t_settle < 30.0, steps[:20]
    after = held(steps, t_settle, 120.0)
    total = sum(w for w, _ in after)
    mean = sum(w * v for w, v in after) / total
    assert abs(mean - c) <= 0.05 * c + 1, (mean, steps[:30])
    assert all(abs(v - c) <= 0.15 * c + 1 for _, v in after), [
        (_, v) for _, v in after if not (abs(v - c) <= 0.15 * c + 1)
    ][:5]
    # no wild oscillation: after the search, a change at most every few rounds (probes back off)
    late = [s for s in steps if s[0] > 60.0]
    assert len(late) <= 12, late


def test_stays_within_its_bounds() -> None:
    latency, slo = knee(64)
    ctl = AutoConcurrency(0.95, hi=20)
    steps = closed_loop(ctl, latency, slo, 30.0)
    assert max(v for _, v in steps) == 20 == steps[-1][1]
    latency, slo = knee(64)
    ctl = AutoConcurrency(0.95, lo=1, hi=1024)
    steps = closed_loop(ctl, lambda b, t: 10.0, 1.0, 60.0)  # nothing ever good: down to 1, held
    assert steps[-1][1] == 1 and min(v for _, v in steps) >= 1


def test_follows_a_server_that_slows_down_and_recovers() -> None:
    """Capacity drops from 64 to 32 at 60 s and comes back at 120 s: the limit follows both ways."""
    slo = knee(64)[1]

    def latency(b: int, t: float) -> float:
        c = 32 if 60.0 <= t < 120.0 else 64
        return L0 * slowdown(b, c, 2.0) * (slowdown(64, 64, 2.0) / slowdown(c, c, 2.0))

    ctl = AutoConcurrency(0.95, hi=1024)
    steps = closed_loop(ctl, latency, slo, 200.0)
    low = held(steps, 90.0, 120.0)
    assert all(abs(v - 32) <= 0.15 * 32 + 1 for _, v in low), low
    back = held(steps, 170.0, 200.0)
    assert all(abs(v - 64) <= 0.15 * 64 + 1 for _, v in back), steps


def test_does_not_grow_a_limit_the_run_cannot_use() -> None:
    """Only 10 requests can be sent at once (a rate, say): the limit stops growing past 2x that."""
    latency, slo = knee(500)
    ctl = AutoConcurrency(0.95, hi=1024)
    steps = closed_loop(ctl, latency, slo, 60.0, send_limit=lambda t: 10)
    assert max(v for _, v in steps) <= 32, steps


def test_with_jitter_holds_near_the_share_the_target_allows() -> None:
    """10% jitter: some requests miss the SLO below the knee, so the limit holds a little below
    it, steadily."""
    rng = random.Random(5)
    base, slo = knee(64)
    ctl = AutoConcurrency(0.95, hi=1024)
    steps = closed_loop(ctl, lambda b, t: base(b, t) * rng.uniform(0.9, 1.1), slo, 120.0)
    after = held(steps, 30.0, 120.0)
    assert all(0.7 * 64 <= v <= 1.1 * 64 for _, v in after), steps


def test_rounds_judge_only_requests_started_after_a_change() -> None:
    ctl = AutoConcurrency(0.9, hi=100, start=4, min_round=4)
    for _ in range(4):  # four good ones started at 0: a good round, the limit doubles at t = 1
        ctl.observe(1.0, True, 1.0)
    assert (ctl.limit, ctl.changed) == (8, True)
    for _ in range(20):  # finished later, but started before the change: they judged 4, not 8
        ctl.observe(1.5, False, 1.0)
    assert (ctl.limit, ctl.phase) == (8, "start")  # (a tuple: mypy keeps no narrowing past observe)
    ctl.observe(2.5, False, 1.0)  # started at 1.5, after the change: 1 bad > 10% of 8
    assert ctl.phase == "search" and ctl.bad_hi == 8 and ctl.limit == 6
    assert "searching" in ctl.describe()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        AutoConcurrency(0.0)
    assert AutoConcurrency(0.9, hi=2, start=4).limit == 2
