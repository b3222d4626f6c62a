"""Open-loop arrival schedules: when each request is due, at a rate that can change live.

Why this module exists: pacing by sleeping a fixed interval after each request drifts (timer
granularity and the work between sleeps add up). These schedules keep absolute due times, so the
achieved rate over a run equals the target even when single wake-ups are late; a request that is
late is sent at once and its lateness shows up as queue time, not as a slower rate.
"""

from __future__ import annotations

import random


class ArrivalSchedule:
    """Due times for `constant` or `poisson` arrival, on any monotonic clock (seconds).

    `next_due()` returns the due time of the next request. `set_rate()` takes effect from the
    next interval. `rebase(now)` restarts the schedule at `now` (after a pause, so a resumed run
    does not burst to catch up on the paused time).
    """

    def __init__(self, kind: str, rate: float, start: float, seed: int = 1) -> None:
        if kind not in ("constant", "poisson"):
            raise ValueError(f"unknown arrival kind {kind!r}")
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self.kind = kind
        self._rate = rate
        self._rng = random.Random(seed)
        self._last = start
        self._first = True

    @property
    def rate(self) -> float:
        return self._rate

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self._rate = rate

    def rebase(self, now: float) -> None:
        self._last = now
        self._first = True

    def next_due(self) -> float:
        if self._first:
            # The first request of a (re)started schedule is due at once.
            self._first = False
            return self._last
        if self.kind == "constant":
            gap = 1.0 / self._rate
        else:
            gap = self._rng.expovariate(self._rate)
        self._last += gap
        return self._last
