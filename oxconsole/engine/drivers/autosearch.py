"""Adaptive concurrency (`run.concurrency = "auto"`): the highest limit whose requests still meet the SLO.

Why this module exists: finding the knee by hand means a sweep and a restart; the engine instead
feeds each finished request's verdict to `AutoConcurrency.observe` and applies the limit it returns.
Pure logic: no loop, no clock (the caller passes the time), no I/O, so it is tested on virtual time
against a synthetic plant (a function concurrency -> latency).

The signal is the SLO's own verdict (good or bad per request), not a latency gradient: on a server
with continuous batching latency rises from the second request on, so a limiter that holds latency
near its minimum (TCP Vegas, Netflix's Gradient2) settles wherever its own tolerance says, not where
the user's SLO stops being met (docs/performance.md, "Adaptive concurrency", has the figures).
A binary signal asks for AIMD's shape, with two changes that make it settle fast and hold still:

* **rounds**: a decision is taken per round, on requests *started* after the last change (finished
  time less latency), so each round judges the limit it names. A round is bad as soon as its bad
  requests exceed what the target allows for a full round (``bad > (1 - target) * needed``); good
  when ``needed = max(min_round, limit)`` requests were judged and the share good is >= target;
* **start**: the limit doubles each good round (TCP's slow start) until a round is bad;
* **search**: then bisection between the last good limit and the first bad one, until they are
  within `resolution` (3%, at least 1) of each other; the limit is the good end;
* **hold**: the limit stays; every `probe_after` good rounds it probes one step up (1/16 of the
  limit, at least 1). A good probe is kept (and the next step doubles); a bad probe goes back and
  doubles the wait before the next one (up to `max_wait` rounds), so a limit at the knee is probed
  rarely. Two bad rounds in a row while holding (the server got slower; one may be noise on a busy
  machine: one took a limit of 64 to 51) search again from 80% of the limit
  (AIMD's multiplicative decrease), again until a round is good, then bisecting.

Increases are skipped while the run cannot use the limit (fewer than half of it in flight: a rate,
a token budget or the end of the prompts hold it back), as AIMD and Gradient2 do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Phase = Literal["start", "search", "hold"]

MIN_ROUND = 4
"""Requests judged before a round may be called good (at limits below it): one request at limit 1
is too few to call a limit good, and four rounds at 1, 2 and 4 cost about four latencies each."""
RESOLUTION = 0.03
"""The search stops when the last good and the first bad limit are this close (relative, at least 1):
3% of the knee is well inside the ±15% the limit must hold, and takes ~5 rounds from a doubling."""
START = 4
"""The first limit: the smallest round `MIN_ROUND` judges in one latency."""
SAME_TIME = 1e-6
"""Seconds: a request that started this close before a change is taken as started after it (the
start is computed as finish less latency, which rounds). Not more: in a closed loop a request is
often sent a fraction of a millisecond before the change, under the old limit, and judges that one
(at 1 ms, such requests failed the first round at the knee after a bisection)."""
DECREASE = 0.8
"""A bad round with no good limit known below it (while holding: the server got slower) tries this
share of the limit next (AIMD's multiplicative decrease), again until a round is good, then
bisects: one noisy round at the knee costs a fifth of the limit for a few rounds, not half of it
(halving, a loaded machine's noise at the knee once took a limit of 32 down to 4)."""
"""The first limit: the smallest round `MIN_ROUND` judges in one latency."""


@dataclass(slots=True)
class Round:
    """What the current round has judged: requests started after `since` (the last change)."""

    since: float
    good: int = 0
    bad: int = 0
    busy: int = 0
    """The most requests in flight seen as one of them finished (itself included)."""


class AutoConcurrency:
    """Finds and holds the highest concurrency whose requests meet the SLO `target` (share good).

    `observe(t, good, latency)` for each finished request (t: when it finished, on any clock the
    caller keeps; latency in seconds, so that t - latency is when it started) returns the limit to
    use now; `changed` says whether that call changed it. Limits stay in [lo, hi].
    """

    def __init__(
        self,
        target: float,
        *,
        hi: int = 1024,
        lo: int = 1,
        start: int = START,
        min_round: int = MIN_ROUND,
        resolution: float = RESOLUTION,
        probe_after: int = 2,
        max_wait: int = 16,
        now: float = 0.0,
    ) -> None:
        if not 0.0 < target <= 1.0:
            raise ValueError(f"target must be in (0, 1], got {target}")
        self.target = target
        self.lo_bound = max(1, lo)
        self.hi_bound = max(self.lo_bound, hi)
        self.limit = self._clamp(start)
        self.min_round = max(1, min_round)
        self.resolution = resolution
        self.phase: Phase = "start"
        self.good_lo: int | None = None
        """The highest limit whose round was good (None: none yet)."""
        self.bad_hi: int | None = None
        """The lowest limit whose round was bad, since the last search began."""
        self.probe_after = probe_after
        self._probe_base = probe_after
        self.max_wait = max_wait
        self._streak = 0
        self._doubt = False
        """While holding: the last round at the held limit was bad (one more bad one decreases)."""
        self._step = 0
        """While holding: the probe's step up (0 = not probing now)."""
        self._next_step = 0
        self.round = Round(now)
        self.changed = False
        self.rounds = 0

    # -- the one entry point ---------------------------------------------------------------------
    def observe(self, t: float, good: bool, latency: float, in_flight: int | None = None) -> int:
        """One finished request: its finish time, verdict and latency (s). Returns the limit now.
        `in_flight` (requests still in flight), when given, keeps the limit from growing while the
        run does not use half of it (the most seen in a round counts)."""
        self.changed = False
        r = self.round
        if t - latency < r.since - SAME_TIME:
            return self.limit  # started before the last change: it judged another limit
        if in_flight is not None and in_flight + 1 > r.busy:
            r.busy = in_flight + 1
        if good:
            r.good += 1
        else:
            r.bad += 1
        needed = max(self.min_round, self.limit)
        if r.bad > (1.0 - self.target) * needed:
            self._decide(False, t)
        elif r.good + r.bad >= needed:
            if (r.good / (r.good + r.bad)) < self.target:
                self._decide(False, t)
            elif in_flight is not None and r.busy * 2 < self.limit:
                self.round = Round(t)  # app-limited: a good round proves nothing about more
            else:
                self._decide(True, t)
        return self.limit

    # -- decisions -------------------------------------------------------------------------------
    def _decide(self, ok: bool, t: float) -> None:
        self.rounds += 1
        old = self.limit
        if self.phase == "start":
            self._start(ok)
        elif self.phase == "search":
            self._search(ok)
        else:
            self._hold(ok)
        self.changed = self.limit != old
        self.round = Round(t)

    def _start(self, ok: bool) -> None:
        if ok:
            self.good_lo = self.limit
            if self.limit >= self.hi_bound:
                self._to_hold()
            else:
                self._set(self.limit * 2)
            return
        self.bad_hi = self.limit
        self.phase = "search"
        self._bisect()

    def _search(self, ok: bool) -> None:
        if ok:
            self.good_lo = self.limit
        else:
            self.bad_hi = self.limit
        self._bisect()

    def _bisect(self) -> None:
        """The next limit to try between the last good and the first bad, or hold when they meet."""
        lo, hi = self.good_lo, self.bad_hi
        assert hi is not None
        if lo is not None and lo >= hi:  # the server got slower: what was good is not now
            lo = self.good_lo = None
        if lo is None:  # nothing good below the bad limit yet: down by a fifth (at least 1)
            if hi <= self.lo_bound:
                self.good_lo = self.lo_bound  # the floor: hold there whatever it gives
                self._to_hold()
                return
            self._set(min(hi - 1, int(hi * DECREASE)))
            return
        if hi - lo <= max(1, math.ceil(lo * self.resolution)):
            self._to_hold()
            return
        self._set((lo + hi) // 2)

    def _to_hold(self) -> None:
        assert self.good_lo is not None
        self.phase = "hold"
        self._set(self.good_lo)
        self._streak = 0
        self._doubt = False
        self._step = 0
        self._next_step = 0

    def _hold(self, ok: bool) -> None:
        assert self.good_lo is not None
        if self._step:  # a probe's round
            if ok:
                self.good_lo = self.limit
                self._next_step = self._step * 2
                self.probe_after = self._probe_base
            else:
                self._set(self.good_lo)
                self._next_step = 0
                self.probe_after = min(self.max_wait, self.probe_after * 2)
            self._step = 0
            self._streak = 0
            return
        if not ok:  # the held limit is bad now (the server got slower): search again below it
            if self.limit <= self.lo_bound:
                return  # the floor: hold there whatever it gives
            if not self._doubt:  # once may be noise (a pause on a busy machine): judge it again
                self._doubt = True
                return
            self.phase = "search"
            self.bad_hi = self.limit
            self.good_lo = None
            self._set(min(self.limit - 1, int(self.limit * DECREASE)))
            return
        self._doubt = False
        self._streak += 1
        if self._streak >= self.probe_after and self.limit < self.hi_bound:
            base = max(1, self.limit // 16)
            self._step = min(max(base, self._next_step), max(1, self.limit // 2))
            self._set(self.limit + self._step)
            if self.limit == self.good_lo:  # clamped at hi: nothing to probe
                self._step = 0

    def _set(self, limit: int) -> None:
        self.limit = self._clamp(limit)

    def _clamp(self, v: int) -> int:
        return max(self.lo_bound, min(self.hi_bound, int(v)))

    def describe(self) -> str:
        """One line for people: `auto: holding 64 (probing every 4 rounds)`."""
        if self.phase == "start":
            return f"auto: doubling, {self.limit}"
        if self.phase == "search":
            return f"auto: searching {self.good_lo or self.lo_bound}..{self.bad_hi}, trying {self.limit}"
        return f"auto: holding {self.good_lo}" + (f", probing {self.limit}" if self._step else "")
