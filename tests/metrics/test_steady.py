"""metrics/steady.py: in flight per second from requests, the longest span, the window's rates;
the peak read as the plateau, and why (the smoothed highest second fails an open loop)."""

from __future__ import annotations

import math
import random

import pytest

from oxconsole.metrics.steady import (
    MAX_SECONDS,
    Steady,
    Timeline,
    longest_span,
    moving_average,
    plateau,
    steady_window,
)
from tests.support.sims import Req, closed_loop_run, open_loop_run, staged_run


def _lognormal(median: float, sigma: float) -> object:
    return lambda r: r.lognormvariate(math.log(median), sigma)


def test_in_flight_is_the_time_average_per_second() -> None:
    tl = Timeline()
    tl.add(0.5, 2.25, True, 10)
    tl.add(1.0, 1.5, False)
    assert tl.in_flight() == pytest.approx([0.5, 1.5, 0.25]), tl.in_flight()
    assert tl.ok[:3] == [0.0, 0.0, 1.0] and tl.tokens[2] == 10.0, (tl.ok[:3], tl.tokens[:3])


def test_a_time_far_ahead_is_left_out() -> None:
    tl = Timeline()
    tl.add(1.0, 2.0, True)
    tl.add(1.0, MAX_SECONDS + 5.0, True)
    tl.add(float("nan"), float("inf"), True)
    assert tl.seconds() == 3 and len(tl.ok) < 1000, (tl.seconds(), len(tl.ok))


def test_longest_span() -> None:
    v = [0, 5, 5, 0, 5, 5, 5, 0, 5]
    assert longest_span(v, 5) == (4, 7)
    assert longest_span(v, 5, max_gap=1) == (1, 9)
    assert longest_span([5, 5, 0, 5, 5], 5) == (0, 2)  # the earliest of equal spans
    assert longest_span([1, 2], 3) is None
    assert longest_span([], 1) is None


def test_moving_average_and_plateau() -> None:
    assert moving_average([0, 3, 6, 3, 0], 3) == pytest.approx([1.5, 3, 4, 3, 1.5])
    assert moving_average([1, 2], 1) == [1, 2]
    assert plateau([0, 1, 50, 50, 50, 60, 10], 60) == pytest.approx(50, rel=1e-3)


def test_the_contracts_rule_on_a_clean_series() -> None:
    in_flight = [0, 5, 10, 10, 10, 9, 10, 4, 0]
    ok = [0, 1, 2, 3, 3, 3, 3, 2, 1]
    s = steady_window(in_flight, ok, [64 * x for x in ok], level="peak", smooth_s=1, max_gap_s=0)
    assert s == Steady(2.0, 7.0, 14 / 5, 64 * 14 / 5), s
    assert steady_window([0, 0], [0, 0], [0, 0]) is None


def _tl(reqs: list[Req]) -> Timeline:
    tl = Timeline()
    for r in reqs:
        tl.add(r.t_sent, r.t_end, True, r.output_tokens)
    return tl


def test_closed_loop_window_is_the_plateau() -> None:
    reqs = closed_loop_run(32, 1500, _lognormal(2.0, 0.5), random.Random(1))  # type: ignore[arg-type]
    tl = _tl(reqs)
    s = steady_window(tl.in_flight(), tl.ok, tl.tokens)
    last_send = max(r.t_sent for r in reqs)
    assert s is not None and s.from_s == 0.0 and abs(s.to_s - last_send) <= 3, (s, last_send)
    true_rate = 32 / (2 * math.exp(0.125))
    whole = len(reqs) / max(r.t_end for r in reqs)
    assert abs(s.requests_per_s / true_rate - 1) < abs(whole / true_rate - 1), (s, whole, true_rate)
    assert s.output_tokens_per_s == pytest.approx(64 * s.requests_per_s)


def test_stages_pick_the_longest_high_stage() -> None:
    stages = [(30, 10), (60, 50), (30, 10), (90, 50)]
    tl = _tl(staged_run(stages, _lognormal(2.0, 0.5), random.Random(2)))  # type: ignore[arg-type]
    s = steady_window(tl.in_flight(), tl.ok, tl.tokens)
    assert s is not None and 118 <= s.from_s <= 124 and 206 <= s.to_s <= 212, s


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_open_loop_plateau_where_the_peak_fails(seed: int) -> None:
    """An open loop at ~45 in flight: the plateau spans the run; the highest second (the contract
    to the letter) and the highest 5 s average both find a short window around a spike."""
    tl = _tl(open_loop_run(20.0, 300.0, _lognormal(2.0, 0.5), random.Random(seed)))  # type: ignore[arg-type]
    s = steady_window(tl.in_flight(), tl.ok, tl.tokens)
    assert s is not None and s.from_s <= 10 and s.to_s >= 290, s
    assert s.requests_per_s == pytest.approx(20.0, rel=0.05), s
    letter = steady_window(tl.in_flight(), tl.ok, tl.tokens, level="peak", smooth_s=1, max_gap_s=0)
    smoothed = steady_window(tl.in_flight(), tl.ok, tl.tokens, level="peak")
    assert letter is not None and letter.to_s - letter.from_s < 30, letter
    assert smoothed is not None and smoothed.to_s - smoothed.from_s < 150, smoothed


def test_linear_in_the_run_length() -> None:
    """A day of seconds (86,400) is one pass: the same answer as a hand-built series says."""
    series = [100.0] * 86_400
    series[:100] = [float(k) for k in range(100)]  # a ramp
    s = steady_window(series, series, series)
    assert s is not None and 88 <= s.from_s <= 92 and s.to_s == 86_400.0, s
