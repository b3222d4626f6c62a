"""A trace's absolute schedule: each row due at its offset from the run's start, at `trace_speed`.

Why this module exists: replaying a trace by sleeping the gap between rows drifts (each late
wake-up delays every row after it); here each row is due at `t0 + (due - base) / speed` on the
loop's clock, so a late row is sent at once and the rows after it keep their times.

`base` is 0 on a fresh run (the first row is due at the start). On `--resume` the rows already
`ok` are not sent again and the first missing row is due at once: `base` is its offset, so the
missing rows keep their gaps without waiting out the time the earlier session already spent
(with workers, each worker's first missing row is due at once).
"""

from __future__ import annotations

import asyncio

__all__ = ["TraceClock"]


class TraceClock:
    """Due times of a trace's rows on the loop's clock."""

    __slots__ = ("_base", "_t0", "speed")

    def __init__(self, speed: float) -> None:
        self.speed = speed if speed > 0 else 1.0
        self._t0: float | None = None
        self._base: float | None = 0.0

    def begin(self, t0: float, *, resumed: bool) -> None:
        """The run's clock starts at loop time `t0`; `resumed`: the first row taken is due at once."""
        self._t0 = t0
        self._base = None if resumed else 0.0

    def due_at(self, due: float, now: float) -> float:
        """The loop time a row `due` seconds into the trace is due at."""
        if self._t0 is None:
            self._t0 = now
        if self._base is None:
            self._base = due
        return self._t0 + (due - self._base) / self.speed

    async def until_due(self, due: float, now: float) -> float:
        """Wait until the row is due (at once when it is already); its due time."""
        at = self.due_at(due, now)
        if at > now:
            await asyncio.sleep(at - now)
        return at
