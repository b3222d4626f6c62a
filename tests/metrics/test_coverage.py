"""Coverage: each interval holds the true value in >= 90 of 100 seeded runs (nominal 95).

The truths are known: quantiles in closed form (or by bisection on a closed-form CDF), a Poisson
process's rate, a closed loop's long-run rate ``C / E[service]``, a bursty process's rate. Seeds
are fixed, so a pass is reproducible, and a regression that costs a few points of coverage shows.
(`bench/bench_coverage.py` does the same for whole runs on the simulator.)
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from oxconsole.metrics.ci import BatchMeans, quantile_interval, rate_interval
from oxconsole.metrics.histogram import LogHistogram
from tests.support.sims import DISTS, Dist, bursty_counts, closed_loop_counts, poisson_counts

pytestmark = pytest.mark.slow
SEEDS = 100
NEED = 90


def _hist(d: Dist, n: int, seed: int) -> LogHistogram:
    rnd = random.Random(seed * 7919 + n)
    h = LogHistogram()
    h.record_many(d.sample(rnd) for _ in range(n))
    return h


@pytest.mark.parametrize("n", [50, 200, 2000])
@pytest.mark.parametrize("d", DISTS, ids=lambda d: d.name)
@pytest.mark.parametrize("q", [50.0, 90.0, 99.0])
def test_quantile_interval_covers(d: Dist, n: int, q: float) -> None:
    truth = d.quantile(q / 100)
    hits = tried = 0
    for seed in range(SEEDS):
        iv = quantile_interval(_hist(d, n, seed), q)
        if iv is None:  # p99 under 476 samples: no 95% interval exists
            continue
        tried += 1
        hits += iv.low <= truth <= iv.high
    if q == 99.0 and n < 476:
        assert tried == 0, tried
        return
    assert tried == SEEDS, tried
    assert hits >= NEED, f"{d.name} n={n} p{q:.0f}: {hits}/{SEEDS}"


def _service(median: float, sigma: float) -> Callable[[random.Random], float]:
    mu = math.log(median)
    return lambda r: r.lognormvariate(mu, sigma)


RATES: list[tuple[str, float, float, Callable[[int, random.Random], list[int]]]] = [
    ("poisson 20/s", 20.0, 2.0, lambda t, r: poisson_counts(20.0, t, r)),
    ("bursts of ~4, 5/s", 20.0, 2.0, lambda t, r: bursty_counts(5.0, 4.0, t, r)),
    (
        "closed C=16 LN(1 s, 0.5)",
        16 / math.exp(0.125),
        math.exp(0.125),
        lambda t, r: closed_loop_counts(16, _service(1.0, 0.5), 100.0, t, r),
    ),
    (
        "closed C=50 LN(2 s, 0.1)",
        50 / (2.0 * math.exp(0.005)),
        2.0 * math.exp(0.005),
        lambda t, r: closed_loop_counts(50, _service(2.0, 0.1), 200.0, t, r),
    ),
]


@pytest.mark.parametrize("seconds", [30, 60, 120])
@pytest.mark.parametrize("case", RATES, ids=lambda c: c[0])
def test_rate_interval_covers(
    case: tuple[str, float, float, Callable[[int, random.Random], list[int]]], seconds: int
) -> None:
    name, truth, mean_latency_s, gen = case
    hits = 0
    for seed in range(SEEDS):
        counts = gen(seconds, random.Random(seed))
        b = BatchMeans()
        for c in counts:
            b.add(c)
        iv = rate_interval(sum(counts) / seconds, b, min_batch_s=mean_latency_s)
        assert iv is not None, (name, seconds, seed)
        hits += iv.low <= truth <= iv.high
    assert hits >= NEED, f"{name} over {seconds} s: {hits}/{SEEDS}"
