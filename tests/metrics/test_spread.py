"""metrics/spread.py: figures over N trials, and whether two runs differ."""

from __future__ import annotations

import math

import pytest

from oxconsole.metrics.spread import TRIAL_FIGURES, overlap, trial_stats, trials_block


def test_mean_stddev_cv_ci() -> None:
    st = trial_stats([10.0, 12.0, 11.0])
    assert st is not None
    assert st.mean == 11.0 and st.stddev == pytest.approx(1.0) and st.cv == pytest.approx(1 / 11)
    half = 4.302652729911275 / math.sqrt(3)
    assert st.ci == pytest.approx((11.0 - half, 11.0 + half))
    assert st.to_dict() == {"mean": 11.0, "stddev": 1.0, "cv": 0.0909, "ci": [8.516, 13.484]}


def test_interval_from_the_definition() -> None:
    """mean ± t(5) · sd / sqrt(6), t(5) at 97.5% from a printed table."""
    vals = [41.2, 39.8, 40.5, 42.0, 40.9, 41.7]
    st = trial_stats(vals)
    mean = sum(vals) / 6
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / 5)
    half = 2.570581835636314 * sd / math.sqrt(6)
    assert st is not None and st.ci == pytest.approx((mean - half, mean + half), rel=1e-9), st


def test_one_trial_and_none() -> None:
    assert trial_stats([]) is None
    st = trial_stats([5.0])
    assert st is not None and st.to_dict() == {"mean": 5.0, "stddev": None, "cv": None, "ci": None}
    z = trial_stats([0.0, 0.0])
    assert z is not None and z.cv is None


def test_trials_block_reads_each_trials_summary() -> None:
    summaries = [
        {
            "throughput": {"requests_per_s": r},
            "ttft_ms": {"p50": t, "p99": 3 * t},
            "latency_ms": {"p50": 900.0},
        }
        for r, t in ((40.0, 200.0), (42.0, 210.0), (41.0, 190.0))
    ]
    block = trials_block(summaries)
    assert block["n"] == 3
    assert set(block) == {"n", *TRIAL_FIGURES} - {"latency_ms.p99"}
    assert block["throughput.requests_per_s"]["mean"] == 41.0
    assert block["latency_ms.p50"]["stddev"] == 0.0


def test_overlap_in_words() -> None:
    v, s = overlap((38.0, 40.1), (41.2, 43.0), figure="requests/s", names=("main", "pr"))
    assert v == "higher" and s.startswith("requests/s: pr is higher than main by about 7.8%")
    v, s = overlap((38.0, 40.1), (39.5, 41.0))
    assert v == "overlap" and "no difference shown at 95%" in s
    v, _ = overlap((38.0, 40.1), (30.0, 37.9))
    assert v == "lower"
    v, s = overlap(None, (1.0, 2.0))
    assert v == "unknown" and "no interval for A" in s
