"""A run's and its current phase's intervals and settledness, fed one finished request at a time.

Why this module exists: the live collector and `oxconsole report` (a journal replayed) must say
the same thing about the same requests: when a phase settled, and the interval of each figure.
Both feed `Confidence.record` with each request's **end time** (``t_sent + latency``, seconds
since the run started) in the order they were journaled, before the request is counted in its
`RunStats`. Seconds are completed by the requests themselves: when one ends in a later second
than the last, the seconds before it are complete, their ok counts go to the rate's batches
(`ci.BatchMeans`) and settledness is evaluated once, at that second's boundary. Nothing here
reads a clock, so the refresh rate of a console, the headless progress interval or the speed of
a replay cannot change the answer; a request journaled late (its end second already complete)
counts in the second being filled, in both.

A phase's batches hold its whole seconds only (the second of a change is split between two
phases); the run's hold every second. Evaluating costs two quantile intervals, a rate interval
and, for the "still moving" check (`settle.moved`), the judged histogram's counts of 10 s ago
kept as a copy: ~0.1 ms a second for the run and its phase.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.ci import BatchMeans, Interval, quantile_interval
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.settle import (
    LATENCY,
    SETTLE_TOLERANCE,
    TTFT,
    Settle,
    SettleView,
    ci_block,
    judged,
    phase_intervals,
)
from oxconsole.metrics.steady import MAX_SECONDS, Timeline, steady_window

__all__ = ["RECENT_S", "Confidence", "Counted", "Replay", "Span", "run_blocks"]

RECENT_S = 10
"""The "still moving" check compares a phase's figure with its last this-many seconds (the
console's rolling window): long enough for an interval at a few requests a second."""


class Counted(Protocol):
    """What a span reads of its requests (`RunStats` has it)."""

    @property
    def ok(self) -> int: ...
    @property
    def ttft(self) -> LogHistogram: ...
    @property
    def latency(self) -> LogHistogram: ...


class Span:
    """One phase's (or the whole run's) intervals and settledness, from ``t0`` seconds on."""

    __slots__ = ("_marks", "batches", "first", "intervals", "settle", "stats", "t0", "view")

    def __init__(self, stats: Counted, t0: float, tolerance: float = SETTLE_TOLERANCE) -> None:
        self.stats = stats
        self.t0 = t0
        self.first = math.ceil(t0 - 1e-9)
        """The first whole second of the span (the change's own is split with the phase before)."""
        self.batches = BatchMeans()
        self.settle = Settle(tolerance)
        self.view = SettleView("settling", None, None, None)
        self.intervals: dict[str, Interval | None] = {}
        """The figures' intervals at the last evaluation."""
        self._marks: deque[tuple[int, str, LogHistogram]] = deque()
        """(second, key, the judged histogram then): the counts the recent figure leaves out."""

    def second(self, sec: int, ok: float) -> None:
        """Second ``sec`` is complete with ``ok`` requests ended in it."""
        if sec >= self.first:
            self.batches.add(ok)

    def evaluate(self, sec: int) -> SettleView:
        """Judge the span at the start of second ``sec`` (every second before it complete)."""
        age = sec - self.t0
        if age <= 0.0:
            return self.view
        st = self.stats
        ivs = phase_intervals(st.ttft, st.latency, st.ok / age, self.batches)
        figures = judged(ivs)
        key = TTFT if TTFT in figures else LATENCY
        recent = self._recent(sec, key, st.ttft if key == TTFT else st.latency)
        self.intervals = ivs
        self.view = self.settle.update(age, figures, st.ok, {key: recent} if recent is not None else None)
        return self.view

    def _recent(self, sec: int, key: str, hist: LogHistogram) -> Interval | None:
        """The judged quantile over the requests of the last `RECENT_S` seconds: the histogram now
        less its copy from then (min and max stay the span's: the edges may only be wider)."""
        marks = self._marks
        if marks and marks[-1][1] != key:
            marks.clear()
        marks.append((sec, key, hist.copy()))
        while len(marks) > 1 and marks[1][0] <= sec - RECENT_S:
            marks.popleft()
        then, _, old = marks[0]
        if then > sec - RECENT_S or then < self.t0:
            return None
        part = hist.copy()
        part.subtract_counts(old)
        return quantile_interval(part, 50.0)

    def block(self, t_end: float) -> dict[str, Any]:
        """The summary's `settled_at_s` and `ci` of the span ending at ``t_end``: its requests/s is
        its ok requests over its length, as `throughput.requests_per_s` is."""
        st = self.stats
        length = t_end - self.t0
        rate = st.ok / length if length > 0.0 else 0.0
        ivs = phase_intervals(st.ttft, st.latency, rate, self.batches)
        return {"settled_at_s": self.settle.settled_at_s, "ci": ci_block(ivs)}

    def live(self) -> dict[str, Any]:
        """The snapshot's view: the settledness and the intervals of the last evaluation."""
        return {**self.view.to_dict(), "ci": ci_block(self.intervals)}


class Confidence:
    """The run's span and its current phase's, fed each finished request by its end time."""

    __slots__ = ("_ok", "_sec", "phase", "run", "tolerance")

    def __init__(self, run: Counted, tolerance: float = SETTLE_TOLERANCE) -> None:
        self.tolerance = tolerance
        self.run = Span(run, 0.0, tolerance)
        self.phase = self.run
        """Until the first change the phase is the whole run (one span, judged once)."""
        self._sec = 0
        self._ok = 0

    def record(self, end_s: float, ok: bool) -> None:
        """A request that ended ``end_s`` seconds after the run started; call before it is counted
        in the spans' stats, so an evaluation sees only the requests ended before its second."""
        sec = int(end_s) if end_s > 0.0 else 0
        if sec > self._sec and sec < MAX_SECONDS:
            self._complete(sec)
        if ok:
            self._ok += 1

    def _complete(self, sec: int) -> None:
        run, phase = self.run, self.phase
        s, n = self._sec, self._ok
        while s < sec:
            run.second(s, n)
            if phase is not run:
                phase.second(s, n)
            s += 1
            n = 0
        self._sec, self._ok = sec, 0
        run.evaluate(sec)
        if phase is not run:
            phase.evaluate(sec)

    def new_phase(self, stats: Counted, t0: float) -> Span:
        """A change at ``t0`` starts a phase counted in ``stats``; the span it ends is the caller's
        to close (`Span.block`)."""
        self.phase = Span(stats, t0, self.tolerance)
        return self.phase


def run_blocks(run: Span, timeline: Timeline, duration_s: float) -> dict[str, Any]:
    """The whole run's `settled_at_s`, `ci` (its requests/s over ``duration_s``) and `steady` (null
    when nothing was in flight), as the live summary and `oxconsole report` both write them."""
    steady = steady_window(timeline.in_flight(), timeline.ok, timeline.tokens)
    return {**run.block(duration_s), "steady": None if steady is None else steady.to_dict()}


class _Timed:
    """What a replayed span counts: ok requests and their TTFT and latency (`Counted`)."""

    __slots__ = ("latency", "ok", "ttft")

    def __init__(self) -> None:
        self.ok = 0
        self.ttft = LogHistogram()
        self.latency = LogHistogram()

    def add(self, rec: RequestRecord) -> None:
        if rec.status != "ok":
            return
        self.ok += 1
        if rec.ttft_ms is not None:
            self.ttft.record(rec.ttft_ms)
        if rec.latency_ms is not None:
            self.latency.record(rec.latency_ms)


class Replay:
    """The collector's `Confidence` and `Timeline` fed again from a journal (`oxconsole report`):
    each record, in journal order, by its end time on the run's clock (``clock``: `(t_scheduled,
    t)` -> seconds since the run started, `SessionSpans.clock`), its phase the one whose start
    (``phase_starts``, the run's changes after the first phase) its end is at or after. Live, a
    record goes to the phase current when it is counted, so the two differ only by a record that
    ended just before a change and was counted just after it."""

    def __init__(
        self,
        clock: Callable[[float, float], float],
        tolerance: float = SETTLE_TOLERANCE,
        phase_starts: Sequence[float] = (),
    ) -> None:
        self._clock = clock
        self._run = _Timed()
        self._phase = self._run
        self.confidence = Confidence(self._run, tolerance)
        self.timeline = Timeline()
        self._starts = list(phase_starts)
        self._ended: list[dict[str, Any]] = []

    def add(self, rec: RequestRecord) -> None:
        if rec.warmup:  # [[stages]] warm-up: left out of every figure, as live
            return
        sent = self._clock(rec.t_scheduled, rec.t_sent)
        end = sent + (rec.latency_ms or 0.0) / 1000.0
        while self._starts and end >= self._starts[0]:
            self._next_phase(self._starts.pop(0))
        ok = rec.status == "ok"
        self.confidence.record(end, ok)
        self.timeline.add(sent, end, ok, rec.output_tokens)
        self._run.add(rec)
        if self._phase is not self._run:
            self._phase.add(rec)

    def _next_phase(self, t: float) -> None:
        self._ended.append(self.confidence.phase.block(t))
        self._phase = _Timed()
        self.confidence.new_phase(self._phase, t)

    def finish(
        self, duration_s: float, phase_ends: Sequence[float]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The run's blocks (`run_blocks` over ``duration_s``) and each phase's `settled_at_s` and
        `ci`, the last closed at its end in ``phase_ends`` (one per phase; the run's duration
        when there is none)."""
        while self._starts:
            self._next_phase(self._starts.pop(0))
        last = phase_ends[len(self._ended)] if len(phase_ends) > len(self._ended) else duration_s
        phases = [*self._ended, self.confidence.phase.block(last)]
        return run_blocks(self.confidence.run, self.timeline, duration_s), phases
