"""metrics/settle.py: when a phase settles, stays settled, and settles again; which figures it judges."""

from __future__ import annotations

from oxconsole.metrics.ci import BatchMeans, Interval
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.settle import (
    MIN_SAMPLES,
    Settle,
    SettleView,
    ci_block,
    judged,
    moved,
    phase_intervals,
)


def _ivs(*spreads: float) -> dict[str, Interval | None]:
    return {f"f{i}": Interval(100.0, 100.0 * (1 - s), 100.0 * (1 + s)) for i, s in enumerate(spreads)}


def test_settles_when_every_figure_is_within_tolerance() -> None:
    st = Settle()
    assert st.update(1.0, _ivs(0.02, 0.07), 500).state == "settling"
    v = st.update(2.0, _ivs(0.02, 0.049), 500)
    assert v.state == "settled" and v.settled_at_s == 2.0 and v.worst == "f1", v
    assert v.label() == "settled ±5%"


def test_tolerance_is_the_workloads() -> None:
    assert Settle(0.1).update(1.0, _ivs(0.08), 500).state == "settled"
    assert Settle(0.05).update(1.0, _ivs(0.08), 500).state == "settling"


def test_minimum_samples() -> None:
    st = Settle()
    assert st.update(1.0, _ivs(0.0, 0.0), MIN_SAMPLES - 1).state == "settling"
    assert st.update(1.5, _ivs(0.0, 0.0), MIN_SAMPLES).state == "settled"


def test_a_figure_without_interval_keeps_it_settling() -> None:
    st = Settle()
    ivs = _ivs(0.01)
    ivs["throughput.requests_per_s"] = None
    v = st.update(3.0, ivs, 1000)
    assert v == SettleView("settling", None, "throughput.requests_per_s", None), v
    assert v.label() == "settling"


def test_hysteresis_and_first_time_kept() -> None:
    st = Settle(0.05)
    st.update(10.0, _ivs(0.04), 1000)
    assert st.update(11.0, _ivs(0.07), 1000).state == "settled"  # within 1.5 x tolerance
    v = st.update(12.0, _ivs(0.08), 1000)
    assert v.state == "settling" and v.settled_at_s == 10.0 and v.label() == "settling ±8%", v
    assert st.update(13.0, _ivs(0.06), 1000).state == "settling"  # must come back within 5%
    v = st.update(14.0, _ivs(0.03), 1000)
    assert v.state == "settled" and v.settled_at_s == 10.0, v


def _hists() -> tuple[LogHistogram, LogHistogram, BatchMeans]:
    lat, ttft = LogHistogram(), LogHistogram()
    lat.record_many(500.0 + k for k in range(100))
    ttft.record_many(100.0 + k / 100 for k in range(100))
    b = BatchMeans()
    for _ in range(12):
        b.add(8.0)
    return ttft, lat, b


def test_phase_intervals_leave_out_ttft_when_not_streaming() -> None:
    ttft, lat, b = _hists()
    assert set(phase_intervals(None, lat, 8.0, b)) == {"latency_ms.p50", "throughput.requests_per_s"}
    assert set(phase_intervals(LogHistogram(), lat, 8.0, b)) == {
        "latency_ms.p50",
        "throughput.requests_per_s",
    }
    got = phase_intervals(ttft, lat, 8.0, b)
    assert set(got) == {"ttft_ms.p50", "latency_ms.p50", "throughput.requests_per_s"}, got
    assert all(v is not None for v in got.values()), got


def test_judged_are_ttft_and_rate_with_latency_standing_in() -> None:
    ttft, lat, b = _hists()
    streamed = phase_intervals(ttft, lat, 8.0, b)
    assert set(judged(streamed)) == {"ttft_ms.p50", "throughput.requests_per_s"}
    plain = phase_intervals(None, lat, 8.0, b)
    assert set(judged(plain)) == {"latency_ms.p50", "throughput.requests_per_s"}
    # a wide latency interval does not hold back a streamed phase: it is not judged
    wide = dict(streamed, **{"latency_ms.p50": Interval(100.0, 50.0, 200.0)})
    assert Settle().update(20.0, judged(wide), 100).state == "settled"


def test_ci_block_has_every_figure() -> None:
    _, lat, b = _hists()
    block = ci_block(phase_intervals(None, lat, 8.0, b))
    assert list(block) == ["ttft_ms.p50", "latency_ms.p50", "throughput.requests_per_s"], block
    assert block["ttft_ms.p50"] is None
    lo, hi = block["latency_ms.p50"] or (0.0, 0.0)
    assert lo <= lat.percentile(50) <= hi, (lo, hi)
    assert block["throughput.requests_per_s"] == [8.0, 8.0], block  # perfectly regular seconds


def test_rate_batches_span_a_latency() -> None:
    """10 s latencies: 12 one-second batches are not yet 10 batches of a latency each."""
    lat = LogHistogram()
    lat.record_many([10_000.0] * 100)
    b = BatchMeans()
    for _ in range(12):
        b.add(8.0)
    assert phase_intervals(None, lat, 8.0, b)["throughput.requests_per_s"] is None


def test_a_figure_still_moving_does_not_settle_and_unsettles() -> None:
    st = Settle(0.05)
    narrow = _ivs(0.02)
    assert st.update(10.0, narrow, 1000, {"f0": Interval(112.0, 110.0, 114.0)}).state == "settling"
    v = st.update(11.0, narrow, 1000, {"f0": Interval(104.0, 100.0, 108.0)})  # overlaps ±5%
    assert v.state == "settled" and v.settled_at_s == 11.0, v
    v = st.update(12.0, narrow, 1000, {"f0": Interval(90.0, 88.0, 94.0)})  # wholly below 95
    assert v.state == "settling" and v.worst == "f0" and v.settled_at_s == 11.0, v


def test_moved_needs_a_confident_recent_interval() -> None:
    phase = Interval(100.0, 98.0, 102.0)
    assert not moved(phase, Interval(120.0, 80.0, 160.0), 0.05)  # thin recent data: no verdict
    assert moved(phase, Interval(120.0, 110.0, 130.0), 0.05)
    assert not moved(None, Interval(120.0, 110.0, 130.0), 0.05)
    assert not moved(phase, None, 0.05)


def test_view_crosses_a_socket() -> None:
    v = SettleView("settled", 0.031, "ttft_ms.p50", 12.0)
    assert SettleView.from_dict(v.to_dict()) == v
    assert SettleView.from_dict({"state": "odd"}) is None
    assert SettleView.from_dict(None) is None
    inf = SettleView("settling", float("inf"), "ttft_ms.p50", None)
    assert inf.to_dict()["spread"] is None and inf.label() == "settling"


def test_a_finished_runs_summary_says_it_to_a_console() -> None:
    from oxconsole.metrics.settle import settle_from_summary

    summary = {
        "settled_at_s": 12.0,
        "ci": {
            "ttft_ms.p50": [95.0, 104.0],
            "latency_ms.p50": [1.0, 9.0],
            "throughput.requests_per_s": [9.8, 10.1],
        },
        "ttft_ms": {"p50": 100.0},
        "throughput": {"requests_per_s": 10.0},
        "phases": [
            {
                "settled_at_s": None,
                "ci": {
                    "ttft_ms.p50": None,
                    "latency_ms.p50": [900.0, 1200.0],
                    "throughput.requests_per_s": None,
                },
                "latency_ms": {"p50": 1000.0},
                "throughput": {"requests_per_s": 10.0},
            }
        ],
    }
    got = settle_from_summary(summary)
    assert got is not None
    run = SettleView.from_dict(got["run"])
    assert run == SettleView("settled", 0.05, "ttft_ms.p50", 12.0), run  # the latency is not judged
    phase = SettleView.from_dict(got["phase"])
    assert phase == SettleView("settling", None, "throughput.requests_per_s", None), phase  # no ttft: latency
    assert settle_from_summary({"name": "old"}) is None
