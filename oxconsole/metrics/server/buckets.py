"""Percentiles of the observations a Prometheus histogram made between two scrapes.

Why this module exists: an engine's TTFT and queue-time histograms are cumulative since it
started; what a run wants is the distribution of the requests served while it ran. The growth
of each bucket between two scrapes is exactly the histogram of the observations made in between,
and its percentiles are read as Prometheus' `histogram_quantile` reads them (linear inside the
bucket that holds the rank). Pure functions on tuples, no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence

__all__ = ["Buckets", "growth", "merge", "quantile"]

Buckets = tuple[tuple[float, float], ...]
"""(upper bound, cumulative count) by increasing bound; the last bound is +Inf when the engine
wrote one (every engine does)."""


def growth(before: Buckets | None, now: Buckets) -> Buckets:
    """The observations made between `before` and `now`. A histogram whose count went down, or
    whose bounds changed, was restarted: everything it holds now is new."""
    if before is None or len(before) != len(now):
        return now
    out: list[tuple[float, float]] = []
    for (b0, c0), (b1, c1) in zip(before, now, strict=True):
        if b0 != b1 or c1 < c0:
            return now
        out.append((b1, c1 - c0))
    return tuple(out)


def merge(parts: Iterable[Buckets]) -> Buckets:
    """Several histograms of one quantity (replicas, engine ranks) as one: the sum of their
    cumulative counts at every bound any of them has (each read at its own largest bound not
    above it, which is exact when they share bounds, as an engine's series do)."""
    parts = [p for p in parts if p]
    if len(parts) == 1:
        return parts[0]
    first = [b for b, _ in parts[0]]
    if all(len(p) == len(first) and all(b == f for (b, _), f in zip(p, first, strict=True)) for p in parts):
        return tuple((b, math.fsum(p[i][1] for p in parts)) for i, b in enumerate(first))
    bounds = sorted({b for p in parts for b, _ in p})
    cum = [0.0] * len(bounds)
    for p in parts:
        own = [b for b, _ in p]
        counts = [c for _, c in p]
        for i, b in enumerate(bounds):
            j = bisect_right(own, b) - 1
            if j >= 0:
                cum[i] += counts[j]
    return tuple(zip(bounds, cum, strict=True))


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile (0 < q < 1) of a cumulative histogram, as Prometheus' `histogram_quantile`:
    linear between the bounds of the bucket holding the rank (from 0 for the first bucket); in
    the +Inf bucket, the largest finite bound. None when it holds no observation."""
    if not buckets:
        return None
    total = buckets[-1][1]
    if not total > 0:
        return None
    rank = q * total
    lower = 0.0
    below = 0.0
    top = 0.0  # running maximum: a cumulative count never goes down
    for bound, count in buckets:
        top = max(top, count)
        if top >= rank:
            if math.isinf(bound):
                return lower
            if bound <= 0:
                return bound
            inside = top - below
            if inside <= 0:
                return bound
            return lower + (bound - lower) * (rank - below) / inside
        lower, below = bound, top
    return lower
