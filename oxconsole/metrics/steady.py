"""The steady window: the longest span where the requests in flight stay at or above 90% of their
peak, and the throughput over that span alone.

Why this module exists: a run's whole-run requests/s mixes in the ramp-up (slots filling, no
request finished yet) and the drain (the last requests finishing with nothing sent after them);
a closed loop of 64 at 5 s latencies reads 7% low over a 63 s run. The summary's `steady` block
gives the figures of the plateau instead.

Everything is per whole second of the run and computed from finished requests alone (send time,
end time, ok, output tokens), so `oxconsole report` rebuilds the very same block from a journal:

* `Timeline.add` files a request in O(1): its time in flight is spread over the seconds it covers
  (a difference array for the whole seconds, the two partial ones directly), so in flight per
  second is its time average, exact to the request, whatever the snapshot rate;
* `steady_window` finds the span in O(n) over the n seconds: a centred moving average, the level,
  one pass over the runs at or above 90% of it, merging runs apart by a short dip;
* the level is the **plateau** (the median of the seconds above half the highest): our reading
  of the contract's "90% of their peak" as the peak the series holds, not a spike of it. Taken
  to the letter (the highest second), or as the highest of 5 s averages, an open loop's peak is a
  spike: its in flight is a Poisson count whose highest average sits 20-40% above its mean, and
  at ~45 in flight the span found was 2 s (letter) or 22 s (averages) of a 300-second run
  (docs/statistics.md has the table). For a closed loop or stages the plateau is the peak;
* the rates over the span are the ok requests that **ended** in it (and their output tokens)
  over its length: the figure a journal reader recomputes. A span that starts with the run
  still lacks its first latency's completions: ``-(1 - cv^2) W / 2T`` (W the mean latency, cv
  its variation, T the span), -4% for W = 5 s over 60 s, where the whole run read -7%.

Memory: 4 floats a second of run (32 bytes; 2.8 MB a day), never a list of requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "MAX_GAP_S",
    "MAX_SECONDS",
    "SMOOTH_S",
    "STEADY_FRACTION",
    "Steady",
    "Timeline",
    "longest_span",
    "moving_average",
    "plateau",
    "steady_window",
]

MAX_SECONDS = 7 * 86_400
"""The timeline keeps the first week of a run (19 MB); a request ending later is left out of it,
so a journal line with a time far ahead cannot make it allocate gigabytes."""
STEADY_FRACTION = 0.9
"""The span's requests in flight stay at or above this share of their peak (the contract)."""
SMOOTH_S = 5
"""In flight is averaged over this many seconds before the span is sought. An open loop's in
flight is a Poisson count: at 450 in flight its one-second values wander ±5%, enough for a
single second's dip to split the plateau."""
MAX_GAP_S = 10
"""Dips below the line of at most this many seconds stay inside the span: shorter than any load
stage a person would set, longer than an open loop's noise at a few seconds' latency."""


@dataclass(frozen=True, slots=True)
class Steady:
    """The summary's `steady` block: ``from_s`` and ``to_s`` in seconds since the run started."""

    from_s: float
    to_s: float
    requests_per_s: float
    output_tokens_per_s: float

    def to_dict(self) -> dict[str, float]:
        return {
            "from_s": round(self.from_s, 3),
            "to_s": round(self.to_s, 3),
            "requests_per_s": round(self.requests_per_s, 3),
            "output_tokens_per_s": round(self.output_tokens_per_s, 3),
        }


class Timeline:
    """Finished requests, per whole second since the run started (times in seconds, relative)."""

    __slots__ = ("_busy", "_edge", "_last", "ok", "tokens")

    def __init__(self) -> None:
        self._busy: list[float] = []
        """Partial seconds in flight (a request's first and last second)."""
        self._edge: list[float] = []
        """Difference array of whole seconds in flight."""
        self._last = -1
        """The last second a request ended in."""
        self.ok: list[float] = []
        """Ok requests by the second they ended (as the collector's per-second series; zeros past
        `seconds`)."""
        self.tokens: list[float] = []
        """Their output tokens, by the same second."""

    def _grow(self, sec: int) -> None:
        """Room up to ``sec + 1``, and a minute beyond, so that growing is rare."""
        need = sec + 62 - len(self._busy)
        if need > 0:
            for a in (self._busy, self._edge, self.ok, self.tokens):
                a.extend([0.0] * need)

    def add(self, t_sent: float, t_end: float, ok: bool, output_tokens: float = 0.0) -> None:
        """One finished request (its final attempt: sent at ``t_sent``, ended at ``t_end``); ~0.6 µs."""
        a = t_sent if t_sent > 0.0 else 0.0
        b = t_end if t_end > a else a
        if b >= MAX_SECONDS:
            return
        sa = int(a)
        sb = int(b)
        if sb > self._last:
            self._last = sb
            if sb + 2 > len(self._busy):
                self._grow(sb)
        busy = self._busy
        if sa == sb:
            busy[sa] += b - a
        else:
            busy[sa] += sa + 1 - a
            busy[sb] += b - sb
            edge = self._edge
            edge[sa + 1] += 1.0
            edge[sb] -= 1.0
        if ok:
            self.ok[sb] += 1.0
            self.tokens[sb] += output_tokens

    def seconds(self) -> int:
        """Seconds covered so far (up to the last request's end)."""
        return self._last + 1

    def in_flight(self) -> list[float]:
        """Mean requests in flight in each second: 0..`seconds`-1."""
        out: list[float] = []
        run = 0.0
        for busy, edge in zip(self._busy, self._edge, strict=True):
            run += edge
            out.append(run + busy)
        return out[: self.seconds()]


def moving_average(values: Sequence[float], width: int) -> list[float]:
    """Centred moving average over ``width`` values (shorter at the ends); O(n)."""
    n = len(values)
    if width <= 1 or n == 0:
        return list(values)
    half_lo = (width - 1) // 2
    half_hi = width - 1 - half_lo
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    return [
        (prefix[min(n, i + half_hi + 1)] - prefix[max(0, i - half_lo)])
        / (min(n, i + half_hi + 1) - max(0, i - half_lo))
        for i in range(n)
    ]


def longest_span(values: Sequence[float], threshold: float, max_gap: int = 0) -> tuple[int, int] | None:
    """The longest ``[i, j)`` whose values are all >= ``threshold``, allowing runs below it of at
    most ``max_gap`` values inside; the earliest on ties; None when no value reaches it. O(n)."""
    best: tuple[int, int] | None = None
    start = end = -1  # the span being grown: [start, end)
    for i, v in enumerate(values):
        if v < threshold:
            continue
        if start >= 0 and i - end <= max_gap:
            end = i + 1
            continue
        if start >= 0 and (best is None or end - start > best[1] - best[0]):
            best = (start, end)
        start, end = i, i + 1
    if start >= 0 and (best is None or end - start > best[1] - best[0]):
        best = (start, end)
    return best


def plateau(values: Sequence[float], peak: float, bins: int = 1024) -> float:
    """The median of the values at or above half of ``peak``: the level a noisy series holds, where
    its peak is a one-second spike. O(n): a count over ``bins`` bins from peak/2 to peak (the
    answer is within peak/2/bins of the exact median)."""
    lo = 0.5 * peak
    width = (peak - lo) / bins
    if not width > 0.0:
        return peak
    counts = [0] * bins
    n = 0
    for v in values:
        if v >= lo:
            counts[min(bins - 1, int((v - lo) / width))] += 1
            n += 1
    seen = 0
    for k, c in enumerate(counts):
        seen += c
        if 2 * seen >= n:
            return lo + (k + 0.5) * width
    return peak


Level = Literal["peak", "plateau"]


def steady_window(
    in_flight: Sequence[float],
    ok: Sequence[float],
    tokens: Sequence[float],
    *,
    frac: float = STEADY_FRACTION,
    level: Level = "plateau",
    smooth_s: int = SMOOTH_S,
    max_gap_s: int = MAX_GAP_S,
) -> Steady | None:
    """The steady window of per-second series (second k covers ``[k, k+1)`` of the run).

    ``in_flight``: mean requests in flight each second (`Timeline.in_flight`, or the engine's
    gauge averaged per second); ``ok`` and ``tokens``: ok requests and their output tokens by the
    second they ended (`Timeline.ok`, `Timeline.tokens`). In flight is first averaged over
    ``smooth_s`` seconds (centred); the span is where it stays >= ``frac`` of ``level`` (the
    smoothed series' maximum, or its `plateau`), dips of at most ``max_gap_s`` seconds allowed
    inside. ``level="peak", smooth_s=1, max_gap_s=0`` is the contract's sentence to the letter.
    None when nothing was in flight.
    """
    series = moving_average(in_flight, smooth_s)
    peak = max(series, default=0.0)
    if not peak > 0.0:
        return None
    ref = plateau(series, peak) if level == "plateau" else peak
    span = longest_span(series, frac * ref * (1.0 - 1e-12), max_gap_s)
    if span is None:
        return None
    i, j = span
    length = float(j - i)
    n_ok = math.fsum(ok[i : min(j, len(ok))])
    n_tok = math.fsum(tokens[i : min(j, len(tokens))])
    return Steady(float(i), float(j), n_ok / length, n_tok / length)
