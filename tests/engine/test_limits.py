"""Pure tests of the live limits: resizable slots, live-rate bucket, FIFO token budget, arrival.

What sleeps runs on virtual time (`run_virtual`), so the rates are exact and a busy machine
changes nothing.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time

import pytest

from oxconsole.engine.arrival import ArrivalSchedule
from oxconsole.engine.limits import LiveRateLimiter, ResizableSlots
from tests.support.clock import run_virtual


def test_slots_never_exceed_limit_and_shrink_without_cancelling() -> None:
    """On virtual time (tests/support/clock.py): 60 holders of 20 ms each, the limit cut from 8 to 3
    while 8 hold a slot."""

    async def go() -> int:
        slots = ResizableSlots(8)
        active = 0
        peak_after_shrink = 0
        finished = 0
        shrunk = asyncio.Event()

        async def worker(i: int) -> None:
            nonlocal active, peak_after_shrink, finished
            await slots.acquire()
            active += 1
            try:
                if shrunk.is_set():
                    peak_after_shrink = max(peak_after_shrink, active)
                assert active <= max(slots.limit, 8)
                await asyncio.sleep(0.02)
            finally:
                active -= 1
                slots.release()
                finished += 1

        tasks = [asyncio.create_task(worker(i)) for i in range(60)]
        await asyncio.sleep(0.01)
        assert slots.in_use == 8
        slots.set_limit(3)
        shrunk.set()
        # Holders above the new limit keep their slots (nothing cancelled) ...
        assert slots.in_use == 8
        await asyncio.gather(*tasks)
        assert finished == 60
        assert slots.in_use == 0
        return peak_after_shrink

    # ... and every holder that started after the shrink ran with at most 3 at a time (the 8 that
    # started before it had to drain to 2 before the first new one got a slot).
    assert run_virtual(go()) == 3


async def test_slots_respect_lowered_limit_for_new_holders() -> None:
    slots = ResizableSlots(10)
    for _ in range(10):
        await slots.acquire()
    slots.set_limit(4)
    got = asyncio.create_task(slots.acquire())
    for _ in range(6):
        slots.release()
        await asyncio.sleep(0)
        assert not got.done(), "a slot was granted while in_use >= the lowered limit"
    slots.release()  # in_use 3 < 4
    await asyncio.sleep(0)
    assert got.done()
    assert slots.in_use == 4


async def test_slots_grow_wakes_waiters_fifo() -> None:
    slots = ResizableSlots(1)
    await slots.acquire()
    order: list[int] = []

    async def w(i: int) -> None:
        await slots.acquire()
        order.append(i)

    tasks = [asyncio.create_task(w(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert order == []
    slots.set_limit(4)
    await asyncio.sleep(0)
    assert order == [0, 1, 2]
    slots.set_limit(6)
    await asyncio.sleep(0)
    assert order == [0, 1, 2, 3, 4]
    await asyncio.gather(*tasks)


async def test_slot_waiter_cancelled_does_not_leak() -> None:
    slots = ResizableSlots(1)
    await slots.acquire()
    t = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    slots.release()
    assert slots.in_use == 0
    assert slots.try_acquire()


async def _rate_over(limiter: LiveRateLimiter, n: int) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(n):
        await limiter.acquire()
    return n / (loop.time() - t0)


def test_the_virtual_clock_jumps() -> None:
    """The loop under the limiter tests: time stands still while work is ready, jumps when idle."""

    async def go() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await asyncio.sleep(0)
        still = loop.time() - t0
        await asyncio.sleep(100.0)
        return still, loop.time() - t0

    wall = time.monotonic()
    assert run_virtual(go()) == (0.0, 100.0)
    assert time.monotonic() - wall < 5.0


def test_live_rate_change_changes_rate() -> None:
    async def go() -> tuple[float, float]:
        lim = LiveRateLimiter(100.0, burst=1)
        await lim.acquire()  # the bucket starts empty: first acquisition is free
        slow = await _rate_over(lim, 20)
        lim.set_rate(400.0)
        assert lim.rate == 400.0
        return slow, await _rate_over(lim, 80)

    slow, fast = run_virtual(go())
    assert slow == pytest.approx(100.0, rel=0.01)
    assert fast == pytest.approx(400.0, rel=0.01)


def test_live_rate_change_wakes_a_waiter_sooner() -> None:
    async def go() -> float:
        loop = asyncio.get_running_loop()
        lim = LiveRateLimiter(0.5, burst=1)  # one every 2 s
        await lim.acquire()
        waiter = asyncio.create_task(lim.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        lim.set_rate(50.0)
        t0 = loop.time()
        await waiter
        return loop.time() - t0

    # the bucket had drained 0.05 s x 0.5/s by then; at 50/s the rest drains in 19.5 ms, not 1.95 s
    assert run_virtual(go()) == pytest.approx((1 - 0.05 * 0.5) / 50.0, abs=1e-3)


def test_constant_schedule_has_no_drift() -> None:
    s = ArrivalSchedule("constant", 250.0, start=10.0)
    dues = [s.next_due() for _ in range(1001)]
    assert dues[0] == 10.0
    assert dues[-1] == pytest.approx(10.0 + 1000 / 250.0, rel=1e-9)
    s.set_rate(500.0)
    a = s.next_due()
    b = s.next_due()
    assert b - a == pytest.approx(1 / 500.0)


def test_poisson_schedule_mean_and_seed() -> None:
    a = ArrivalSchedule("poisson", 100.0, start=0.0, seed=3)
    b = ArrivalSchedule("poisson", 100.0, start=0.0, seed=3)
    c = ArrivalSchedule("poisson", 100.0, start=0.0, seed=4)
    da = [a.next_due() for _ in range(5001)]
    assert da == [b.next_due() for _ in range(5001)]
    assert da != [c.next_due() for _ in range(5001)]
    gaps = [y - x for x, y in itertools.pairwise(da)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.01, rel=0.05)
    # exponential: the standard deviation equals the mean
    assert statistics.pstdev(gaps) == pytest.approx(mean, rel=0.08)


def test_schedule_rebase_after_pause() -> None:
    s = ArrivalSchedule("constant", 10.0, start=0.0)
    for _ in range(5):
        s.next_due()
    s.rebase(100.0)
    assert s.next_due() == 100.0
    assert s.next_due() == pytest.approx(100.1)


def test_a_rate_change_counts_from_its_time_even_when_the_dispatcher_is_behind() -> None:
    """Due times before the change keep the old rate though nobody took them yet (a loaded machine:
    the dispatcher is behind schedule); the new gap starts with the first interval past it."""
    s = ArrivalSchedule("constant", 10.0, start=0.0)
    assert s.next_due() == 0.0
    assert s.next_due() == pytest.approx(0.1)
    s.set_rate(100.0, at=0.55)  # changed at 0.55 s; the dispatcher has taken due times to 0.1 only
    assert s.rate == 100.0
    dues = [s.next_due() for _ in range(6)]
    assert dues == pytest.approx([0.2, 0.3, 0.4, 0.5, 0.51, 0.52])
    s.set_rate(50.0)  # no time: from the next interval, as before
    assert s.next_due() == pytest.approx(0.54)
