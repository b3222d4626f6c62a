"""95% confidence intervals for a phase's figures, from what the engine keeps: histograms and
per-second counts.

Why this module exists: a figure read while a run is moving ("TTFT p50 412 ms") is one draw from
the noise; the console says how far to trust it, and `settle.py` decides when a phase's figures
hold still (docs/statistics.md has the method and the coverage measured). The engine keeps no
list of samples, so each interval comes from what it does keep:

* **a quantile** (TTFT / latency p50, p90, p99) from its `LogHistogram`: the distribution-free
  order-statistic interval. The number of samples at or below the true quantile is
  Binomial(n, q), so the samples of ranks ``l`` and ``u`` (normal approximation with continuity
  correction, `quantile_ranks`) bracket it with at least 95% probability for any continuous
  distribution; ranks are read off the histogram's cumulative counts and widened to the edges of
  their buckets, so the histogram's resolution cannot make the interval narrower than the truth.
  The exact binomial coverage of these ranks is >= 95.0% for every n checked (6..5000 and
  random n up to 200 000, at q = 0.5, 0.9, 0.99); when they fall outside 1..n (p50 under 6
  samples, p99 under 476) there is no 95% interval and the answer is None.
* **requests/s** from the per-second completion counts: dynamic batch means (`BatchMeans`): the
  seconds folded into at most `MAX_BATCHES` equal batches whose length doubles as the phase grows,
  and a Student-t interval on the batch sums. It estimates the counts' real dispersion, which a
  Poisson interval assumes: a closed loop is under-dispersed (the Poisson interval is too wide and
  settles late), completions in bursts are over-dispersed (the Poisson interval is too narrow).
  Batches are kept at least a mean latency long (`BATCH_LATENCIES`).

Pure: no clock, no I/O, nothing from the engine; any object with the `QuantileSource` shape (the
project's `LogHistogram`) can be read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Protocol

__all__ = [
    "BATCH_LATENCIES",
    "CONFIDENCE",
    "MAX_BATCHES",
    "MIN_BATCHES",
    "BatchMeans",
    "Interval",
    "QuantileSource",
    "quantile_interval",
    "quantile_ranks",
    "rate_interval",
    "t_critical",
]

CONFIDENCE = 0.95
MIN_BATCHES = 10
"""Batches (whole seconds at first) before a rate has an interval: t with 9 degrees of freedom
(2.26) is within 15% of the normal 1.96, and ten seconds is the least a person reads a rate over."""
BATCH_LATENCIES = 1.0
"""A rate's batches last at least this many mean latencies: a closed loop's completions are
correlated over about one latency (longer with a heavy tail), and one-second batches then
under-state the variance (C=32 slots, lognormal latencies of sigma 1, 120 s: 87% coverage with
one-second batches, 89% with this floor, over 1,000 seeds). It also keeps a phase from settling before ten
latencies have passed, when its first completions still belong to the requests sent before it."""
MAX_BATCHES = 32
"""Batches kept; on reaching it adjacent pairs merge (16 batches of twice the length). 16..31
batches keep the t quantile within 9% of the normal one while each batch grows past the
correlation time of the counts (about one request latency in a closed loop)."""


class QuantileSource(Protocol):
    """What an interval needs of a histogram (`LogHistogram` has it)."""

    @property
    def count(self) -> int: ...
    @property
    def gamma(self) -> float: ...
    @property
    def min(self) -> float: ...
    @property
    def max(self) -> float: ...
    @property
    def mean(self) -> float: ...
    def percentiles(self, qs: Iterable[float]) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class Interval:
    """A figure and its confidence interval ``[low, high]`` (``low <= value <= high``)."""

    value: float
    low: float
    high: float

    @property
    def spread(self) -> float:
        """The larger relative distance of an edge from the value: 0.03 reads "±3%". Infinite for a
        value of 0 with an interval that is not [0, 0]."""
        width = max(self.high - self.value, self.value - self.low)
        if self.value <= 0.0:
            return 0.0 if width <= 0.0 else math.inf
        return width / self.value

    def as_list(self, ndigits: int = 3) -> list[float]:
        """``[low, high]`` for the summary, rounded outward so rounding never narrows it."""
        scale = 10.0**ndigits
        return [math.floor(self.low * scale) / scale, math.ceil(self.high * scale) / scale]


@lru_cache(maxsize=8)
def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """The 1-based ranks ``(l, u)`` of the samples that bracket percentile ``q`` (0..100) of the
    population with probability >= ``confidence``, among ``n`` samples; None when they fall
    outside 1..n (too few samples for that percentile).

    With ``B ~ Binomial(n, p)`` the number of samples at or below the true quantile,
    ``P(X(l) <= x_p <= X(u)) = P(l <= B <= u - 1)``; the normal approximation with continuity
    correction gives ``l = floor(np - z s + 1/2)``, ``u = ceil(np + z s + 1/2)``, ``s = sqrt(np(1-p))``.
    """
    p = q / 100.0
    if n <= 0 or not 0.0 < p < 1.0:
        return None
    half = _z(confidence) * math.sqrt(n * p * (1.0 - p))
    lo = math.floor(n * p - half + 0.5)
    hi = math.ceil(n * p + half + 0.5)
    if lo < 1 or hi > n:
        return None
    return lo, hi


def quantile_interval(h: QuantileSource, q: float, confidence: float = CONFIDENCE) -> Interval | None:
    """Percentile ``q`` (0..100) of the histogram ``h`` (nearest rank, as its summary reads it)
    with its distribution-free ``confidence`` interval; None when ``h`` has too few samples.

    The samples of ranks ``l`` and ``u`` are read as their buckets' representatives, which are
    within ``alpha = (gamma - 1) / (gamma + 1)`` of them; the edges are widened by that (and kept
    within the exact min and max) so the interval holds the true order statistics. Costs one
    `percentiles` call: a few µs on the histogram's cached cumulative counts.
    """
    n = h.count
    ranks = quantile_ranks(n, q, confidence)
    if ranks is None:
        return None
    lo_rank, hi_rank = ranks
    # percent such that the nearest rank is exactly l (resp. u)
    value, lo_v, hi_v = h.percentiles((q, 100.0 * lo_rank / n, 100.0 * hi_rank / n))
    g = h.gamma
    alpha = (g - 1.0) / (g + 1.0)
    low = max(h.min, lo_v / (1.0 + alpha))
    high = min(h.max, hi_v / (1.0 - alpha))
    return Interval(value, min(low, value), max(high, value))


class BatchMeans:
    """Per-second counts of a phase, folded into equal batches: the variance of their sum.

    `add(count)` takes one completed second (O(1), amortised: a merge of at most `MAX_BATCHES`
    every time the batch length doubles). Only whole batches count; the batch being filled is
    left out until it is whole. Memory is fixed, whatever the phase's length.
    """

    __slots__ = ("_fill", "_fill_len", "seconds", "size", "sums", "total")

    def __init__(self) -> None:
        self.size = 1
        """Seconds per batch."""
        self.sums: list[float] = []
        self.seconds = 0
        self.total = 0.0
        self._fill = 0.0
        self._fill_len = 0

    def add(self, count: float) -> None:
        self.seconds += 1
        self.total += count
        self._fill += count
        self._fill_len += 1
        if self._fill_len < self.size:
            return
        self.sums.append(self._fill)
        self._fill = 0.0
        self._fill_len = 0
        if len(self.sums) >= MAX_BATCHES:
            s = self.sums
            self.sums = [s[i] + s[i + 1] for i in range(0, len(s) - 1, 2)]
            self.size *= 2

    def relative_half_width(self, confidence: float = CONFIDENCE, min_batch_s: float = 0.0) -> float | None:
        """Half the interval of the mean rate over its value (0.05 = ±5%), from batches at least
        ``min_batch_s`` long (adjacent whole batches are summed to reach it, the rest left out);
        None under `MIN_BATCHES` such batches or with nothing counted."""
        s = self.sums
        group = max(1, math.ceil(min_batch_s / self.size - 1e-9))
        if group > 1:
            s = [math.fsum(s[i : i + group]) for i in range(0, len(s) - group + 1, group)]
        k = len(s)
        if k < MIN_BATCHES:
            return None
        mean = math.fsum(s) / k
        if mean <= 0.0:
            return None
        var = math.fsum((x - mean) ** 2 for x in s) / (k - 1)
        return t_critical(k - 1, confidence) * math.sqrt(var / k) / mean


def rate_interval(
    value: float, batches: BatchMeans, confidence: float = CONFIDENCE, min_batch_s: float = 0.0
) -> Interval | None:
    """``value`` (the phase's requests/s: ok requests over its elapsed time) with the interval the
    batches' relative half-width gives; None while they give none. ``min_batch_s``: see
    `BatchMeans.relative_half_width` (the phase's mean latency times `BATCH_LATENCIES`)."""
    rel = batches.relative_half_width(confidence, min_batch_s)
    if rel is None or value <= 0.0:
        return None
    return Interval(value, max(0.0, value * (1.0 - rel)), value * (1.0 + rel))


# -- Student's t, without scipy --------------------------------------------------------------------

_SERIES_DF = 400
"""Up to this many degrees of freedom the t distribution is summed exactly; beyond, the
Cornish-Fisher expansion is within 1e-9 of it."""


def _t_two_sided(t: float, df: int) -> float:
    """``P(|T| < t)`` for Student's t with integer ``df`` (Abramowitz & Stegun 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, acc = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):  # 1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ...
            term *= c2 * (2 * k) / (2 * k + 1)
            acc += term
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * acc)
    term = acc = 1.0
    for k in range(1, df // 2):  # 1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ...
        term *= c2 * (2 * k - 1) / (2 * k)
        acc += term
    return math.sin(theta) * acc


@lru_cache(maxsize=256)
def t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided critical value of Student's t: ``P(|T| < t) = confidence`` (12.706 for 1
    degree of freedom, 2.262 for 9, 1.96 in the limit). Exact to ~1e-12; cached."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df > _SERIES_DF:
        z = _z(confidence)
        z3, z5, z7 = z**3, z**5, z**7
        return (
            z
            + (z3 + z) / (4 * df)
            + (5 * z5 + 16 * z3 + 3 * z) / (96 * df**2)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df**3)
        )
    lo, hi = 0.0, 2.0
    while _t_two_sided(hi, df) < confidence:
        lo, hi = hi, hi * 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _t_two_sided(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * hi:
            break
    return (lo + hi) / 2.0
