"""A log-bucketed, mergeable histogram with a bounded relative error.

Why this module exists: a load run can finish millions of requests, and the console needs their
percentiles several times a second. Keeping every latency is memory that grows with the run and a
sort per refresh; locust's answer (round to ~2 significant digits, count) is cheap but coarse.
`LogHistogram` does the same at ~3 significant digits, the way DDSketch does: a value ``v > 0``
goes to bucket ``ceil(log(v) / log(gamma))``, each bucket is represented by the value whose
relative distance to both of its edges is ``alpha``, so any percentile read back is within
``alpha`` (0.1%) of a sample of that rank. Buckets live in a dict, so memory is the number of
distinct buckets (a few thousand for six orders of magnitude), never the number of samples, and
two histograms with the same ``gamma`` merge exactly by adding counts.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from typing import Any

__all__ = [
    "DEFAULT_ALPHA",
    "SUMMARY_KEYS",
    "LogHistogram",
    "empty_summary",
    "nearest_rank",
    "record_into",
]

DEFAULT_ALPHA = 0.001
"""Relative accuracy: a percentile is within 0.1% of the true sample of that rank."""

SUMMARY_KEYS = ("mean", "p50", "p90", "p95", "p99", "max")
_SUMMARY_QS = (50.0, 90.0, 95.0, 99.0)
_INF = math.inf
_SHIFT = 4
_GROUP = 1 << _SHIFT
_log = math.log
_ceil = math.ceil
_exp = math.exp


def nearest_rank(q: float, n: int) -> int:
    """The 1-based nearest rank of percentile ``q`` (0..100) among ``n`` samples.

    ``ceil(q/100 * n)``, at least 1; a tiny slack absorbs float noise so that, e.g., p99 of
    100 samples is rank 99 and not 100.
    """
    if n <= 0:
        return 0
    r = _ceil(q * n / 100.0 - 1e-9)
    return 1 if r < 1 else (n if r > n else r)


def empty_summary() -> dict[str, float]:
    return dict.fromkeys(SUMMARY_KEYS, 0.0)


class LogHistogram:
    """Counts of values in logarithmic buckets, plus the exact count, sum, min and max.

    Values ``<= 0`` are counted in a zero bucket represented by 0; NaN and infinities are ignored.
    """

    __slots__ = (
        "_bins",
        "_cache",
        "_gamma",
        "_inv_ln_g",
        "_ln_g",
        "_rep_factor",
        "_summary",
        "b",
        "mn",
        "mx",
        "n",
        "s",
        "sb",
        "zero",
    )

    def __init__(self, alpha: float = DEFAULT_ALPHA, *, gamma: float | None = None) -> None:
        if gamma is None:
            if not 0.0 < alpha < 1.0:
                raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
            # A hair tighter than alpha, so float rounding at bucket edges cannot break the bound.
            a = alpha * (1.0 - 1e-6)
            gamma = (1.0 + a) / (1.0 - a)
        elif not gamma > 1.0:
            raise ValueError(f"gamma must be > 1, got {gamma!r}")
        self._gamma = gamma
        self._ln_g = _log(gamma)
        self._inv_ln_g = 1.0 / self._ln_g
        # bucket i covers (gamma^(i-1), gamma^i]; representing it by 2 gamma^i / (gamma + 1)
        # puts it at relative distance (gamma - 1) / (gamma + 1) = alpha from both edges.
        self._rep_factor = 2.0 / (gamma + 1.0)
        self.b: dict[int, int] = {}
        # counts per group of 2**_SHIFT adjacent buckets: percentiles and bins walk these first,
        # so reading costs O(groups + 2**_SHIFT) instead of O(buckets)
        self.sb: dict[int, int] = {}
        self.zero = 0
        self.n = 0
        self.s = 0.0
        self.mn = _INF
        self.mx = -_INF
        # (n, number of groups) -> sorted group keys and cumulative counts, reused between reads
        self._cache: tuple[int, int, list[int], list[int]] | None = None
        self._summary: tuple[int, dict[str, float]] | None = None
        self._bins: tuple[int, int, list[tuple[float, float, int]]] | None = None

    # -- recording ---------------------------------------------------------------------------

    def record(self, v: float) -> None:
        """Count one value. One ``log`` and one dict update; O(1)."""
        if v > 0.0:
            try:
                i = _ceil(_log(v) * self._inv_ln_g)
            except OverflowError:  # +inf
                return
            b = self.b
            b[i] = b.get(i, 0) + 1
            sb = self.sb
            i >>= _SHIFT
            sb[i] = sb.get(i, 0) + 1
        elif v <= 0.0:
            if v == -_INF:
                return
            self.zero += 1
        else:  # NaN
            return
        self.n += 1
        self.s += v
        if v < self.mn:
            self.mn = v
        if v > self.mx:
            self.mx = v

    def record_many(self, values: Iterable[float]) -> None:
        for v in values:
            self.record(v)

    def merge(self, other: LogHistogram) -> None:
        """Add ``other``'s counts into this histogram (same ``gamma`` required)."""
        if other._gamma != self._gamma:
            raise ValueError("cannot merge histograms with different gamma")
        if other.n == 0:
            return
        b = self.b
        for i, c in other.b.items():
            b[i] = b.get(i, 0) + c
        sb = self.sb
        for i, c in other.sb.items():
            sb[i] = sb.get(i, 0) + c
        self.zero += other.zero
        self.n += other.n
        self.s += other.s
        if other.mn < self.mn:
            self.mn = other.mn
        if other.mx > self.mx:
            self.mx = other.mx
        self._cache = None
        self._summary = None
        self._bins = None

    def subtract_counts(self, other: LogHistogram) -> None:
        """Remove ``other``'s samples (which must have been merged or recorded here before).

        Min and max cannot be un-merged; the caller resets them (see the rolling window).
        """
        for mine, theirs in ((self.b, other.b), (self.sb, other.sb)):
            for i, c in theirs.items():
                left = mine.get(i, 0) - c
                if left > 0:
                    mine[i] = left
                else:
                    mine.pop(i, None)
        self.zero = max(0, self.zero - other.zero)
        self.n = max(0, self.n - other.n)
        self.s = self.s - other.s if self.n else 0.0
        self._cache = None
        self._summary = None
        self._bins = None

    def clear(self) -> None:
        self.b.clear()
        self.sb.clear()
        self.zero = 0
        self.n = 0
        self.s = 0.0
        self.mn = _INF
        self.mx = -_INF
        self._cache = None
        self._summary = None
        self._bins = None

    def copy(self) -> LogHistogram:
        h = LogHistogram(gamma=self._gamma)
        h.b = dict(self.b)
        h.sb = dict(self.sb)
        h.zero = self.zero
        h.n = self.n
        h.s = self.s
        h.mn = self.mn
        h.mx = self.mx
        return h

    # -- reading -----------------------------------------------------------------------------

    @property
    def gamma(self) -> float:
        return self._gamma

    @property
    def count(self) -> int:
        return self.n

    @property
    def total(self) -> float:
        return self.s

    @property
    def min(self) -> float:
        return self.mn if self.n else 0.0

    @property
    def max(self) -> float:
        return self.mx if self.n else 0.0

    @property
    def mean(self) -> float:
        return self.s / self.n if self.n else 0.0

    def __len__(self) -> int:
        return self.n

    def bucket_count(self) -> int:
        """Distinct buckets in use (the memory this histogram costs)."""
        return len(self.b) + (1 if self.zero else 0)

    def representative(self, index: int) -> float:
        """The value reported for bucket ``index``."""
        return _exp(index * self._ln_g) * self._rep_factor

    def _cumulative(self) -> tuple[list[int], list[int]]:
        """Sorted group keys and cumulative counts (starting with the zero bucket), cached."""
        sb = self.sb
        c = self._cache
        if c is not None and c[0] == self.n and c[1] == len(sb):
            return c[2], c[3]
        # groups are only ever added between reads (removal clears the cache), so an unchanged
        # number of groups means an unchanged key set
        keys = sorted(sb) if c is None or c[1] != len(sb) else c[2]
        cum = list(accumulate(map(sb.__getitem__, keys), initial=self.zero))
        self._cache = (self.n, len(sb), keys, cum)
        return keys, cum

    def percentiles(self, qs: Iterable[float]) -> list[float]:
        """Nearest-rank percentiles (q in 0..100), each within ``alpha`` of the true sample."""
        n = self.n
        if n == 0:
            return [0.0 for _ in qs]
        keys, cum = self._cumulative()
        zero = self.zero
        get = self.b.get
        ln_g = self._ln_g
        rf = self._rep_factor
        mn = self.mn
        mx = self.mx
        out: list[float] = []
        for q in qs:
            r = nearest_rank(q, n)
            if r == n:  # the extremes are known exactly
                v = mx
            elif r == 1:
                v = mn
            elif r <= zero:
                v = 0.0
            else:
                # cum[k + 1] = samples up to group keys[k]: find the group, then its bucket
                k = bisect_left(cum, r, 1) - 1
                i = keys[k] << _SHIFT
                seen = cum[k]
                while True:
                    seen += get(i, 0)
                    if seen >= r:
                        break
                    i += 1
                v = _exp(i * ln_g) * rf
            out.append(mn if v < mn else (mx if v > mx else v))
        return out

    def percentile(self, q: float) -> float:
        if not 0.0 <= q <= 100.0:
            raise ValueError(f"percentile must be in [0, 100], got {q!r}")
        return self.percentiles((q,))[0]

    def summary(self) -> dict[str, float]:
        """``{"mean", "p50", "p90", "p95", "p99", "max"}`` rounded to 3 decimals; zeros when empty."""
        if self.n == 0:
            return empty_summary()
        c = self._summary
        if c is not None and c[0] == self.n:
            return dict(c[1])
        p50, p90, p95, p99 = self.percentiles(_SUMMARY_QS)
        out = {
            "mean": round(self.s / self.n, 3),
            "p50": round(p50, 3),
            "p90": round(p90, 3),
            "p95": round(p95, 3),
            "p99": round(p99, 3),
            "max": round(self.mx, 3),
        }
        self._summary = (self.n, out)
        return dict(out)

    def bins(self, n_bins: int) -> list[tuple[float, float, int]]:
        """Coarse ``(lo, hi, count)`` bins, log-spaced from min to max, for a terminal histogram.

        Zeros (and negatives) land in the first bin. Empty histogram: ``[]``.
        """
        if self.n == 0 or n_bins <= 0:
            return []
        c = self._bins
        if c is not None and c[0] == self.n and c[1] == n_bins:
            return list(c[2])
        out = self._compute_bins(n_bins)
        self._bins = (self.n, n_bins, out)
        return list(out)

    def _compute_bins(self, n_bins: int) -> list[tuple[float, float, int]]:
        mn, mx = self.mn, self.mx
        if mx <= 0.0:
            return [(mn, mx, self.n)]
        # Drawn from the groups (2**_SHIFT buckets, ~3% wide), each placed by its centre: plenty
        # for a terminal, and n_bins binary searches over the cached cumulative counts.
        keys, cum = self._cumulative()
        lo = mn if mn > 0.0 else min(mx, self.representative(keys[0] << _SHIFT))
        if mx <= lo * (1.0 + 1e-12):
            return [(mn, mx, self.n)]
        centre = ((_GROUP - 1) / 2) * self._ln_g + _log(self._rep_factor)
        g_ln = _GROUP * self._ln_g
        step = _log(mx / lo) / n_bins
        ln_lo = _log(lo)
        below = [cum[bisect_left(keys, _ceil((ln_lo + m * step - centre) / g_ln))] for m in range(1, n_bins)]
        below.append(self.n)
        counts = [below[0]] + [below[m] - below[m - 1] for m in range(1, n_bins)]
        ratio = mx / lo
        edges = [lo * ratio ** (k / n_bins) for k in range(n_bins + 1)]
        edges[0] = min(lo, mn)
        edges[-1] = mx
        return [(edges[k], edges[k + 1], counts[k]) for k in range(n_bins)]

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Compact, JSON-serialisable: ``{"g", "b": [[idx, count], ...], "z", "n", "s", "mn", "mx"}``."""
        return {
            "g": self._gamma,
            "b": [[i, c] for i, c in sorted(self.b.items())],
            "z": self.zero,
            "n": self.n,
            "s": self.s,
            "mn": self.mn if self.n else 0.0,
            "mx": self.mx if self.n else 0.0,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LogHistogram:
        h = cls(gamma=float(d["g"]))
        h.b = {int(i): int(c) for i, c in d.get("b", ())}
        for i, c in h.b.items():
            h.sb[i >> _SHIFT] = h.sb.get(i >> _SHIFT, 0) + c
        h.zero = int(d.get("z", 0))
        h.n = int(d.get("n", sum(h.b.values()) + h.zero))
        h.s = float(d.get("s", 0.0))
        if h.n:
            h.mn = float(d["mn"])
            h.mx = float(d["mx"])
        return h

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogHistogram):
            return NotImplemented
        return (
            self._gamma == other._gamma
            and self.b == other.b
            and self.zero == other.zero
            and self.n == other.n
            and self.min == other.min
            and self.max == other.max
            and math.isclose(self.s, other.s, rel_tol=1e-9, abs_tol=1e-9)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by content

    def __repr__(self) -> str:
        return f"LogHistogram(n={self.n}, buckets={self.bucket_count()}, min={self.min}, max={self.max})"


def record_into(hists: Sequence[LogHistogram], v: float) -> None:
    """``h.record(v)`` for each of ``hists`` (all with the same gamma), computing the bucket once.

    The collector files every latency in several histograms (run, model, phase, rolling window);
    this saves a log and a method call for each but the first.
    """
    if v > 0.0:
        try:
            i = _ceil(_log(v) * hists[0]._inv_ln_g)
        except OverflowError:  # +inf
            return
        j = i >> _SHIFT
        for h in hists:
            b = h.b
            b[i] = b.get(i, 0) + 1
            sb = h.sb
            sb[j] = sb.get(j, 0) + 1
            h.n += 1
            h.s += v
            if v < h.mn:
                h.mn = v
            if v > h.mx:
                h.mx = v
    elif v <= 0.0 and v != -_INF:
        for h in hists:
            h.record(v)
