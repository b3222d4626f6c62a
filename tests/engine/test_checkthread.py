"""engine/send/checkthread.py: checks off the loop, stopped at their deadline, the next ones unharmed;
a check whose caller is cancelled, or whose thread is closed, stops at once."""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest

from oxconsole.engine.send.checkthread import TIMED_OUT, CheckThread


def spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return "done"


def exponential(depth: int) -> bool:
    """fastjsonschema alone on a schema whose two branches both recurse: 2^depth steps."""
    import fastjsonschema

    v = fastjsonschema.compile(
        {"oneOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    )
    try:
        v(orjson.loads("[" * depth + '"x"' + "]" * depth))
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def test_a_check_runs_off_the_loop_thread() -> None:
    async def main() -> None:
        ct = CheckThread(1.0)
        assert await ct.run(threading.get_ident) != threading.get_ident()
        ct.close()

    asyncio.run(main())


def test_a_runaway_check_is_stopped_and_the_next_one_runs() -> None:
    async def main() -> None:
        ct = CheckThread(0.05)
        start = time.perf_counter()
        assert await ct.run(exponential, 40) is TIMED_OUT  # 2^40 steps: days, unstopped
        took = time.perf_counter() - start
        assert took < 5, f"stopped after {took:.2f} s (deadline 0.05 s)"
        assert await ct.run(spin, 0.001) == "done"
        results = await asyncio.gather(*(ct.run(spin, 60) if i % 2 else ct.run(spin, 0.0) for i in range(6)))
        assert results == ["done", TIMED_OUT] * 3, results
        assert ct.timeouts == 4, ct.timeouts
        ct.close()

    asyncio.run(main())


def test_a_queued_check_gets_its_whole_time() -> None:
    async def main() -> None:
        ct = CheckThread(2.0)
        first = ct.run(spin, 0.3)
        second = ct.run(spin, 0.3)
        assert list(await asyncio.gather(first, second)) == ["done", "done"]
        ct.close()

    asyncio.run(main())


def test_an_exception_reaches_the_caller() -> None:
    async def main() -> None:
        ct = CheckThread(1.0)
        with pytest.raises(ZeroDivisionError):
            await ct.run(lambda: 1 / 0)
        assert await ct.run(lambda: 2.0) == 2.0
        ct.close()

    asyncio.run(main())


def test_a_cancelled_check_stops_at_once_and_a_queued_one_never_starts() -> None:
    """A stopped run cancels the requests waiting for their checks: the running check must not go
    on to its deadline (none is armed any more), and the queued ones must not start."""
    started: list[str] = []

    def runaway(name: str) -> str:
        started.append(name)
        return spin(60)

    async def main() -> None:
        ct = CheckThread(3600.0)  # no deadline in the test's time: only the cancel can stop it
        running = asyncio.ensure_future(ct.run(runaway, "first"))
        queued = asyncio.ensure_future(ct.run(runaway, "second"))
        while not started:
            await asyncio.sleep(0.01)
        t = time.perf_counter()
        running.cancel()
        queued.cancel()
        assert await ct.run(spin, 0.0) == "done"  # the thread is free again
        took = time.perf_counter() - t
        assert took < 5, f"the cancelled check held the thread {took:.2f} s"
        assert started == ["first"], started
        ct.close()

    asyncio.run(main())


def test_close_stops_the_running_check_and_ends_the_thread() -> None:
    async def main() -> threading.Thread:
        ct = CheckThread(3600.0)
        task = asyncio.ensure_future(ct.run(spin, 60))
        while ct._thread is None or ct._current is None:
            await asyncio.sleep(0.01)
        thread = ct._thread
        task.cancel()
        ct.close()
        return thread

    thread = asyncio.run(main())
    thread.join(5)
    assert not thread.is_alive(), "the check thread outlived close() by 5 s"


@pytest.mark.timing
def test_the_loop_keeps_ticking_while_a_check_runs_away() -> None:
    deadline = 0.5

    async def main() -> float:
        ct = CheckThread(deadline)
        worst = 0.0

        async def tick() -> None:
            nonlocal worst
            while True:
                t = time.perf_counter()
                await asyncio.sleep(0.001)
                worst = max(worst, time.perf_counter() - t - 0.001)

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        assert await ct.run(spin, 60) is TIMED_OUT
        ticker.cancel()
        ct.close()
        return worst

    worst = asyncio.run(main())
    # the GIL's switch interval (5 ms) and the machine's load, never the check's length
    assert worst < deadline / 2, f"the loop stalled {worst * 1000:.0f} ms while a check ran {deadline} s"
