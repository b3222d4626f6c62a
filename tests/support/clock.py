"""An event loop on virtual time, for timing logic that sleeps on the loop (limiters, schedules).

`run_virtual(coro)` runs `coro` on a loop whose clock stands still while callbacks are ready and,
when nothing is ready, jumps straight to the next timer instead of waiting for it (and moves on by
at least a nanosecond, so a timer re-armed for "now" cannot spin forever). A test of "20
acquisitions at 100/s take 0.19 s" then takes microseconds and gives exactly 0.19 s, however busy
the machine is. Only for code without real I/O: sockets and threads still run on wall time.

The loop relies on two attributes of asyncio's `BaseEventLoop`, `_ready` and `_scheduled`, stable
since Python 3.4; `test_the_virtual_clock_jumps` in test_limits.py fails if that ever changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector loop whose `time()` is virtual: it only moves to the next timer when idle."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def _run_once(self) -> None:
        ready: Any = getattr(self, "_ready")  # noqa: B009 - asyncio internals, see the module doc
        scheduled: Any = getattr(self, "_scheduled")  # noqa: B009
        if not ready:
            due = [h.when() for h in scheduled if not h.cancelled()]
            if due:
                # At least a nanosecond per idle turn, as on a real clock: code that re-arms a
                # timer for "now" after a rounding error (aiolimiter does) then moves on.
                self._now = max(min(due), self._now + 1e-9)
        super()._run_once()  # type: ignore[misc]


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to its end on a `VirtualClockLoop`; its result."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(coro)
