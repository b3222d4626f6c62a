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

    `next_due()` returns the due time of the next request. `set_rate(rate, at)` takes effect for
    the first interval that ends at or after `at` (the time of the change): due times the old rate
    gave before the change stay as they were, even when the dispatcher is behind and has not taken
    them yet (without `at`, from the next interval). `rebase(now)` restarts the schedule at `now`
    (after a pause, so a resumed run does not burst to catch up on the paused time).
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
        self._pending: tuple[float, float] | None = None  # (rate, from when)

    @property
    def rate(self) -> float:
        """The rate last set (already in effect, or from the time of its change)."""
        return self._rate if self._pending is None else self._pending[0]

    def set_rate(self, rate: float, at: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        if at is None or at <= self._last:
            self._rate, self._pending = rate, None
        else:
            self._pending = (rate, at)

    def rebase(self, now: float) -> None:
        self._last = now
        self._first = True
        if self._pending is not None:
            self._rate, self._pending = self._pending[0], None

    def next_due(self) -> float:
        if self._first:
            # The first request of a (re)started schedule is due at once.
            self._first = False
            return self._last
        gap = self._gap()
        if self._pending is not None and self._last + gap >= self._pending[1]:
            self._rate, self._pending = self._pending[0], None  # the change's time is reached
            gap = self._gap()
        self._last += gap
        return self._last

    def _gap(self) -> float:
        if self.kind == "constant":
            return 1.0 / self._rate
        return self._rng.expovariate(self._rate)
