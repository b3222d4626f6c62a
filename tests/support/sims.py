"""Seeded synthetic data for the statistics' tests: latency distributions with known quantiles, and
completion processes with known rates.

Why this module exists: coverage ("the interval holds the true value in >= 95% of runs") can only
be checked against a truth, so each generator here comes with its true quantiles (closed form, or
bisection on the closed-form CDF) or its true long-run rate.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

Sampler = Callable[[random.Random], float]


@dataclass(frozen=True)
class Dist:
    name: str
    sample: Sampler
    cdf: Callable[[float], float]

    def quantile(self, p: float) -> float:
        """By bisection on the CDF (in log space: every distribution here is positive)."""
        lo, hi = 1e-6, 1e9
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if self.cdf(mid) < p:
                lo = mid
            else:
                hi = mid
        return math.sqrt(lo * hi)


def _ln_cdf(mu: float, sigma: float) -> Callable[[float], float]:
    return lambda x: 0.5 * (1.0 + math.erf((math.log(x) - mu) / (sigma * math.sqrt(2.0)))) if x > 0 else 0.0


LOGNORMAL = Dist("lognormal", lambda r: r.lognormvariate(math.log(200.0), 0.6), _ln_cdf(math.log(200.0), 0.6))
"""TTFT-like: median 200 ms, sigma 0.6 (p99 ~ 810 ms)."""
EXPONENTIAL = Dist("exponential", lambda r: r.expovariate(1 / 300.0), lambda x: 1.0 - math.exp(-x / 300.0))
"""Mean 300 ms: median 208 ms; heavy relative spread at the median."""
_A, _B = _ln_cdf(math.log(150.0), 0.25), _ln_cdf(math.log(900.0), 0.3)
BIMODAL = Dist(
    "bimodal",
    lambda r: (
        r.lognormvariate(math.log(150.0), 0.25)
        if r.random() < 0.7
        else r.lognormvariate(math.log(900.0), 0.3)
    ),
    lambda x: 0.7 * _A(x) + 0.3 * _B(x),
)
"""Cache hits and misses: 70% around 150 ms, 30% around 900 ms; the median is in the first mode's
upper flank, p90 in the second mode."""

DISTS = (LOGNORMAL, EXPONENTIAL, BIMODAL)


def poisson_counts(rate: float, seconds: int, rnd: random.Random) -> list[int]:
    """Per-second counts of a Poisson process."""
    counts = [0] * seconds
    t = rnd.expovariate(rate)
    while t < seconds:
        counts[int(t)] += 1
        t += rnd.expovariate(rate)
    return counts


def bursty_counts(group_rate: float, mean_group: float, seconds: int, rnd: random.Random) -> list[int]:
    """Completions in groups (a batch finishing together): groups Poisson at ``group_rate``, sizes
    geometric with mean ``mean_group``. Rate ``group_rate * mean_group``; over-dispersed."""
    counts = [0] * seconds
    p = 1.0 / mean_group
    t = rnd.expovariate(group_rate)
    while t < seconds:
        size = 1
        while rnd.random() > p:
            size += 1
        counts[int(t)] += size
        t += rnd.expovariate(group_rate)
    return counts


def closed_loop_counts(
    concurrency: int, service: Sampler, warmup: float, seconds: int, rnd: random.Random
) -> list[int]:
    """Per-second completions over ``[warmup, warmup + seconds)`` of a closed loop: each of
    ``concurrency`` slots sends its next request the moment the last one ends (no think time).
    Long-run rate ``concurrency / E[service]``."""
    counts = [0] * seconds
    end = warmup + seconds
    heap = [service(rnd) for _ in range(concurrency)]
    heapq.heapify(heap)
    while heap[0] < end:
        t = heapq.heappop(heap)
        if t >= warmup:
            counts[int(t - warmup)] += 1
        heapq.heappush(heap, t + service(rnd))
    return counts


@dataclass(frozen=True)
class Req:
    t_sent: float
    t_end: float
    output_tokens: int


def closed_loop_run(concurrency: int, total: int, service: Sampler, rnd: random.Random) -> list[Req]:
    """A whole closed-loop run of ``total`` requests: ramp-up (all slots start at 0), plateau,
    drain (the last requests finish with nothing sent after them). 64 output tokens each."""
    out: list[Req] = []
    heap = [0.0] * concurrency
    for _ in range(total):
        t = heapq.heappop(heap)
        s = service(rnd)
        out.append(Req(t, t + s, 64))
        heapq.heappush(heap, t + s)
    return out


def open_loop_run(rate: float, seconds: float, service: Sampler, rnd: random.Random) -> list[Req]:
    """Poisson arrivals at ``rate`` for ``seconds``, each served at once (no queue) for ``service``."""
    out: list[Req] = []
    t = rnd.expovariate(rate)
    while t < seconds:
        out.append(Req(t, t + service(rnd), 64))
        t += rnd.expovariate(rate)
    return out


def staged_run(stages: list[tuple[float, int]], service: Sampler, rnd: random.Random) -> list[Req]:
    """A closed loop whose concurrency changes by stage ``(duration_s, concurrency)``: a slot
    above the stage's concurrency sends nothing until a later stage needs it."""
    out: list[Req] = []
    t0 = 0.0
    free = [0.0] * max(c for _, c in stages)  # each slot's next free time
    for duration, conc in stages:
        end = t0 + duration
        for k in range(conc):
            t = max(free[k], t0)
            while t < end:
                s = service(rnd)
                out.append(Req(t, t + s, 64))
                t += s
            free[k] = t
        t0 = end
    return out
