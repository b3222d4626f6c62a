"""Histogram growth, merging and quantiles."""

from __future__ import annotations

import math

import pytest

from oxconsole.metrics.server.buckets import growth, merge, quantile

INF = math.inf


def test_quantile_interpolates_inside_the_bucket() -> None:
    b = ((1.0, 10.0), (2.0, 30.0), (INF, 40.0))
    # rank 20 of 40 lies halfway through (1, 2], which holds ranks 10..30
    assert quantile(0.5, b) == pytest.approx(1.5)
    # rank 4 of 40 lies 40% into the first bucket, from 0
    assert quantile(0.1, b) == pytest.approx(0.4)


def test_quantile_in_the_inf_bucket_is_the_largest_finite_bound() -> None:
    assert quantile(0.99, ((1.0, 10.0), (2.0, 10.0), (INF, 100.0))) == 2.0


def test_quantile_of_nothing_is_none() -> None:
    assert quantile(0.5, ()) is None
    assert quantile(0.5, ((1.0, 0.0), (INF, 0.0))) is None


def test_quantile_of_a_zero_bound() -> None:
    assert quantile(0.5, ((0.0, 10.0), (1.0, 10.0), (INF, 10.0))) == 0.0


def test_growth_is_per_bucket() -> None:
    assert growth(((1.0, 2.0), (INF, 5.0)), ((1.0, 3.0), (INF, 9.0))) == ((1.0, 1.0), (INF, 4.0))


def test_growth_after_a_restart_or_new_bounds_is_everything_now() -> None:
    now = ((1.0, 1.0), (INF, 1.0))
    assert growth(((1.0, 5.0), (INF, 6.0)), now) == now
    assert growth(((0.5, 0.0), (INF, 0.0)), now) == now
    assert growth(None, now) == now


def test_merge_sums_shared_bounds() -> None:
    a = ((1.0, 1.0), (INF, 2.0))
    b = ((1.0, 3.0), (INF, 5.0))
    assert merge([a, b]) == ((1.0, 4.0), (INF, 7.0))


def test_merge_of_different_bounds_reads_each_as_a_step() -> None:
    a = ((1.0, 1.0), (INF, 2.0))
    b = ((0.5, 3.0), (INF, 4.0))
    assert merge([a, b]) == ((0.5, 3.0), (1.0, 4.0), (INF, 6.0))
