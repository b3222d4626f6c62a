"""Rolling per-second windows: throughput series and "current" percentiles.

Why this module exists: whole-run averages hide what is happening now. The console plots req/s,
output tok/s and errors/s second by second, and shows percentiles over the last 10 seconds the way
locust's "current" columns do, so the effect of turning a knob is visible within seconds. Both
are rings indexed by the whole second since the run started: recording is O(1), memory is fixed
by the window length, never by the run length.
"""

from __future__ import annotations

import math

from oxconsole.metrics.histogram import DEFAULT_ALPHA, LogHistogram

__all__ = ["RollingHistogram", "SecondSeries"]


class SecondSeries:
    """Per-second sums for the last ``size`` seconds (a ring buffer keyed by whole second).

    Each slot remembers which second it holds, so a slot left over from a lap ago reads as 0
    and seconds without events need no bookkeeping. Events older than the ring are dropped.
    """

    __slots__ = ("_done", "_done_end", "_secs", "_size", "_vals", "last_sec")

    def __init__(self, size: int = 600) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._size = size
        self._vals = [0.0] * size
        self._secs = [-1] * size
        self.last_sec = -1
        """The latest second anything was added to (-1 before the first)."""
        # cache for `completed`: values of seconds up to _done_end, which can no longer change
        self._done: list[float] = []
        self._done_end = -1

    @property
    def size(self) -> int:
        return self._size

    def add(self, sec: int, value: float = 1.0) -> None:
        if sec <= self._done_end:  # a second thought complete changed after all
            self._done_end = -1
            self._done = []
        if sec <= self.last_sec - self._size:
            return  # older than the ring
        j = sec % self._size
        held = self._secs[j]
        if held == sec:
            self._vals[j] += value
        elif held < sec:
            self._secs[j] = sec
            self._vals[j] = value
            if sec > self.last_sec:
                self.last_sec = sec
        # else: older than the ring, dropped

    def get(self, sec: int) -> float:
        j = sec % self._size
        return self._vals[j] if self._secs[j] == sec and sec >= 0 else 0.0

    def series(self, end_sec: int, n: int) -> list[float]:
        """Values for seconds ``end_sec - n + 1 .. end_sec`` (0 where nothing, or out of the ring)."""
        n = min(n, self._size)
        if n <= 0:
            return []
        start = end_sec - n + 1
        j = start % self._size
        # rotate the ring so it starts at `start`: slicing is C speed, one comparison per second
        secs = (self._secs[j:] + self._secs[:j])[:n]
        vals = (self._vals[j:] + self._vals[:j])[:n]
        return [
            v if s == want else 0.0 for s, v, want in zip(secs, vals, range(start, end_sec + 1), strict=True)
        ]

    def completed(self, now_sec: int, n: int) -> list[float]:
        """`series` ending at ``now_sec - 1`` (seconds before ``now_sec`` are complete).

        Cached: with a clock that only moves forward, each second is read from the ring once.
        """
        end = now_sec - 1
        n = min(n, self._size)
        if n <= 0 or end < 0:
            return []
        done = self._done
        if self._done_end >= 0 and self._done_end <= end < self._done_end + n <= len(done) + end:
            if end > self._done_end:
                done.extend(self.series(end, end - self._done_end))
                self._done_end = end
        else:
            done = self._done = self.series(end, n)
            self._done_end = end
        if len(done) > n:
            del done[: len(done) - n]
        return list(done)

    def total(self, start_sec: int, end_sec: int) -> float:
        """Sum over seconds ``start_sec .. end_sec`` inclusive (clipped to the ring)."""
        return math.fsum(self.series(end_sec, end_sec - max(start_sec, 0) + 1))


class RollingHistogram:
    """Values of the last ``window_s`` seconds, as a `LogHistogram` kept up to date.

    A ring of per-second histograms plus their running merge: recording touches one second's
    histogram and the merge (O(1)); when a second leaves the window its histogram is subtracted
    from the merge (amortised O(1) per record), so reading needs no merge at all. Min and max are
    recomputed from the per-second ones, which are exact.
    """

    __slots__ = ("_cur", "_slots", "_total", "_window")

    def __init__(self, window_s: int = 10, alpha: float = DEFAULT_ALPHA) -> None:
        if window_s < 1:
            raise ValueError(f"window_s must be >= 1, got {window_s}")
        self._window = window_s
        self._total = LogHistogram(alpha)
        self._slots = [LogHistogram(gamma=self._total.gamma) for _ in range(window_s)]
        self._cur = 0

    @property
    def window_s(self) -> int:
        return self._window

    def record(self, sec: int, v: float) -> None:
        slot, total = self.targets(sec)
        slot.record(v)
        total.record(v)

    def targets(self, sec: int) -> tuple[LogHistogram, LogHistogram]:
        """The histograms a value seen at ``sec`` goes to: that second's, and the running merge."""
        if sec != self._cur:
            if sec < self._cur:  # late value for an earlier second: count it where it is now
                sec = self._cur
            else:
                self.advance(sec)
        return self._slots[sec % self._window], self._total

    def advance(self, sec: int) -> None:
        """Move the window so it ends at ``sec``, dropping the seconds that left it."""
        if sec <= self._cur:
            return
        total = self._total
        if sec - self._cur >= self._window:
            for h in self._slots:
                h.clear()
            total.clear()
        else:
            for s in range(self._cur + 1, sec + 1):
                h = self._slots[s % self._window]
                if h.n:
                    total.subtract_counts(h)
                    h.clear()
            self._reset_extremes()
        self._cur = sec

    def _reset_extremes(self) -> None:
        total = self._total
        live = [h for h in self._slots if h.n]
        if live:
            total.mn = min(h.mn for h in live)
            total.mx = max(h.mx for h in live)
        else:
            total.clear()

    def view(self, now_sec: int) -> LogHistogram:
        """The window's histogram as of ``now_sec``: a live view, do not mutate it."""
        self.advance(now_sec)
        return self._total

    def histogram(self, now_sec: int) -> LogHistogram:
        """A copy of the window's histogram as of ``now_sec``."""
        return self.view(now_sec).copy()
