"""metrics/ci.py: the ranks' exact binomial coverage, intervals read off the histogram, batch
means, Student's t (checked against numerical integration of its density, not against itself)."""

from __future__ import annotations

import math
import random

import pytest

from oxconsole.metrics.ci import (
    MAX_BATCHES,
    MIN_BATCHES,
    BatchMeans,
    Interval,
    quantile_interval,
    quantile_ranks,
    rate_interval,
    t_critical,
)
from oxconsole.metrics.histogram import LogHistogram, nearest_rank


def _binom_cdf(n: int, p: float) -> list[float]:
    out, acc = [], 0.0
    for k in range(n + 1):
        acc += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(k + 1)
            - math.lgamma(n - k + 1)
            + k * math.log(p)
            + (n - k) * math.log1p(-p)
        )
        out.append(acc)
    return out


@pytest.mark.parametrize("q", [50.0, 90.0, 99.0])
def test_ranks_have_exact_coverage_of_at_least_95_percent(q: float) -> None:
    """P(X(l) <= x_q <= X(u)) = P(l <= B <= u-1), B ~ Bin(n, q): >= 0.95 wherever ranks exist."""
    ns = [*range(6, 600), *range(600, 5001, 37)]
    checked = 0
    for n in ns:
        r = quantile_ranks(n, q)
        if r is None:
            continue
        lo, hi = r
        cdf = _binom_cdf(n, q / 100)
        cover = cdf[hi - 1] - cdf[lo - 1]
        assert cover >= 0.95 - 1e-12, f"n={n} p{q:.0f}: ranks {lo}..{hi} cover {cover:.5f}"
        checked += 1
    assert checked > 100, checked


@pytest.mark.parametrize(("q", "least"), [(50.0, 6), (90.0, 45), (99.0, 476)])
def test_too_few_samples_give_no_interval(q: float, least: int) -> None:
    assert quantile_ranks(least - 1, q) is None, least - 1
    assert quantile_ranks(least, q) is not None, least
    assert quantile_ranks(0, q) is None


def test_ranks_bracket_the_nearest_rank_estimate() -> None:
    for n in range(6, 3000):
        r = quantile_ranks(n, 50.0)
        assert r is not None and r[0] <= nearest_rank(50.0, n) <= r[1], (n, r)


def test_interval_holds_the_true_order_statistics_of_the_samples() -> None:
    """Read off the histogram and widened by its resolution: never narrower than the samples'."""
    rnd = random.Random(5)
    for n in (10, 57, 400, 3000):
        xs = [rnd.lognormvariate(5.0, 1.2) for _ in range(n)]
        h = LogHistogram()
        h.record_many(xs)
        xs.sort()
        for q in (50.0, 90.0, 99.0):
            iv = quantile_interval(h, q)
            r = quantile_ranks(n, q)
            if r is None:
                assert iv is None, (n, q, iv)
                continue
            assert iv is not None
            assert iv.low <= xs[r[0] - 1] and xs[r[1] - 1] <= iv.high, (n, q, iv, xs[r[0] - 1], xs[r[1] - 1])
            assert iv.low <= iv.value <= iv.high, iv
            assert iv.value == h.percentile(q), (iv, h.percentile(q))


def test_identical_values_give_a_point_interval() -> None:
    h = LogHistogram()
    h.record_many([120.0] * 40)
    iv = quantile_interval(h, 50.0)
    assert iv is not None and iv.low == iv.high == iv.value == 120.0 and iv.spread == 0.0, iv


def test_coarse_histogram_widens_by_its_alpha() -> None:
    h = LogHistogram(alpha=0.05)
    xs = list(range(100, 300))
    h.record_many(float(v) for v in xs)
    iv = quantile_interval(h, 50.0)
    lo, hi = quantile_ranks(200, 50.0) or (0, 0)
    assert iv is not None and iv.low <= xs[lo - 1] and xs[hi - 1] <= iv.high, (iv, xs[lo - 1], xs[hi - 1])


def test_zero_values_and_empty() -> None:
    assert quantile_interval(LogHistogram(), 50.0) is None
    h = LogHistogram()
    h.record_many([0.0] * 30 + [5.0] * 30)
    iv = quantile_interval(h, 50.0)
    assert iv is not None and iv.low == 0.0 and iv.value == 0.0 and iv.high == pytest.approx(5.0), iv
    assert math.isinf(iv.spread)


def test_interval_spread_and_outward_rounding() -> None:
    assert Interval(100.0, 97.0, 104.0).spread == pytest.approx(0.04)
    assert Interval(1.0, 0.12345, 1.00001).as_list() == [0.123, 1.001]


def test_batch_means_merges_pairs_and_keeps_the_total() -> None:
    b = BatchMeans()
    for k in range(100):
        b.add(float(k % 7))
    assert b.seconds == 100 and b.total == sum(float(k % 7) for k in range(100)), (b.seconds, b.total)
    assert MAX_BATCHES // 2 <= len(b.sums) < MAX_BATCHES, b.sums
    assert b.size == 4, b.size  # 1 -> 2 at 32 s, 2 -> 4 at 64 s
    assert math.fsum(b.sums) == sum(float(k % 7) for k in range(len(b.sums) * b.size))


def test_batch_means_needs_ten_batches_and_counts() -> None:
    b = BatchMeans()
    for _ in range(MIN_BATCHES - 1):
        b.add(20.0)
    assert b.relative_half_width() is None
    b.add(20.0)
    assert b.relative_half_width() == 0.0  # perfectly regular completions
    z = BatchMeans()
    for _ in range(20):
        z.add(0.0)
    assert z.relative_half_width() is None
    assert rate_interval(0.0, b) is None


def test_batch_means_long_batches_for_long_latencies() -> None:
    b = BatchMeans()
    rnd = random.Random(3)
    for _ in range(30):
        b.add(float(rnd.randrange(10, 30)))
    assert b.relative_half_width() is not None
    assert b.relative_half_width(min_batch_s=2.0) is not None  # 15 batches of 2 s
    assert b.relative_half_width(min_batch_s=4.0) is None  # 7 batches of 4 s: too few


def test_batch_means_half_width_is_the_t_interval_of_the_batch_sums() -> None:
    """Computed here from the definition (12 one-second batches), not through the module."""
    counts = [10.0, 12.0, 9.0, 11.0, 13.0, 8.0, 10.0, 12.0, 11.0, 9.0, 10.0, 13.0]
    b = BatchMeans()
    for c in counts:
        b.add(c)
    k = len(counts)
    mean = sum(counts) / k
    sd = math.sqrt(sum((c - mean) ** 2 for c in counts) / (k - 1))
    want = 2.200985160082949 * sd / math.sqrt(k) / mean  # t(11), 97.5%: a printed table's value
    assert b.relative_half_width() == pytest.approx(want, rel=1e-9), (b.relative_half_width(), want)


def test_rate_interval_is_relative_around_the_value() -> None:
    b = BatchMeans()
    for k in range(40):
        b.add(10.0 + (k % 3))
    iv = rate_interval(10.5, b)
    assert iv is not None and iv.value == 10.5 and iv.low < 10.5 < iv.high, iv
    assert (iv.high - 10.5) == pytest.approx(10.5 - iv.low)


@pytest.mark.parametrize(
    ("df", "want"), [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (1000, 1.9623)]
)
def test_t_critical_table(df: int, want: float) -> None:
    assert t_critical(df) == pytest.approx(want, abs=1e-4), (df, t_critical(df))


def _t_mass(t: float, df: int, steps: int = 4000) -> float:
    """P(|T| < t) by Simpson's rule on Student's density: another way than the module's series."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    h = t / steps
    f = [c * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    return float(2 * h / 3 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2])))


@pytest.mark.parametrize("df", [1, 2, 3, 5, 8, 13, 30, 120, 399, 400, 401, 900])
@pytest.mark.parametrize("conf", [0.9, 0.95, 0.99])
def test_t_critical_against_the_integrated_density(df: int, conf: float) -> None:
    t = t_critical(df, conf)
    assert _t_mass(t, df) == pytest.approx(conf, abs=2e-7), (df, conf, t, _t_mass(t, df))


def test_t_critical_refuses_no_degrees_of_freedom() -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_critical(0)
