"""Pure-logic tests for oxconsole.metrics: histogram accuracy, windows, phases, collector figures."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import statistics

import orjson
import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import (
    Collector,
    LogHistogram,
    RollingHistogram,
    SecondSeries,
    Snapshot,
)
from oxconsole.metrics.histogram import record_into
from tests.support.metrics import FakeClock, assert_summary_close, exact, exact_summary, gauges, make_records

QS = (0, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 100)


def rel_err(got: float, want: float) -> float:
    if want == 0:
        return abs(got)
    return abs(got - want) / abs(want)


def distributions() -> dict[str, list[float]]:
    rnd = random.Random(7)
    return {
        "uniform": [rnd.uniform(1, 1000) for _ in range(20_000)],
        "lognormal_heavy": [rnd.lognormvariate(5, 2.0) for _ in range(20_000)],
        "constant": [123.456] * 1000,
        "tiny": [rnd.uniform(1e-9, 5e-9) for _ in range(5000)],
        "six_decades": [10 ** rnd.uniform(-2, 4) for _ in range(20_000)],
        "small_n": [3.0, 1.0, 2.0],
    }


# -- histogram --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(distributions()))
def test_percentiles_within_relative_error(name: str) -> None:
    values = distributions()[name]
    h = LogHistogram()
    for v in values:
        h.record(v)
    s = sorted(values)
    for q in QS:
        assert rel_err(h.percentile(q), exact(s, q)) <= 0.001, (name, q)
    assert h.count == len(values)
    assert h.min == min(values) and h.max == max(values)
    assert math.isclose(h.mean, statistics.fmean(values), rel_tol=1e-9)
    summ = h.summary()
    assert set(summ) == {"mean", "p50", "p90", "p95", "p99", "max"}
    assert summ["max"] == round(max(values), 3)


def test_memory_is_buckets_not_samples() -> None:
    h = LogHistogram()
    rnd = random.Random(1)
    for _ in range(200_000):
        h.record(rnd.uniform(100, 200))
    # ln(2) / ln(gamma) ~ 347 buckets for a factor of 2 at 0.1%
    assert h.bucket_count() < 400


def test_nearest_rank_definition() -> None:
    h = LogHistogram()
    for v in range(1, 101):  # 1..100
        h.record(float(v))
    assert h.percentile(50) == pytest.approx(50, rel=1e-3)
    assert h.percentile(99) == pytest.approx(99, rel=1e-3)  # rank 99, not 100
    assert h.percentile(99.5) == pytest.approx(100, rel=1e-3)
    assert h.percentile(0) == 1.0  # clamped to min
    assert h.percentile(100) == 100.0  # clamped to max
    with pytest.raises(ValueError):
        h.percentile(101)


def test_zero_negative_nan_inf() -> None:
    h = LogHistogram()
    for v in (0.0, 0.0, -5.0, 10.0, float("nan"), float("inf"), float("-inf")):
        h.record(v)
    assert h.count == 4
    assert h.min == -5.0 and h.max == 10.0
    assert h.percentile(50) == 0.0  # rank 2 of [-5, 0, 0, 10] is in the zero bucket
    assert h.percentile(100) == 10.0
    assert h.total == 5.0


def test_empty() -> None:
    h = LogHistogram()
    assert h.summary() == {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    assert h.percentile(50) == 0.0
    assert h.bins(10) == []
    assert LogHistogram.from_dict(orjson.loads(orjson.dumps(h.to_dict()))) == h


def test_merge_equals_recording_all() -> None:
    rnd = random.Random(3)
    a_vals = [rnd.lognormvariate(4, 1) for _ in range(5000)]
    b_vals = [rnd.lognormvariate(6, 0.5) for _ in range(5000)] + [0.0]
    a, b, both = LogHistogram(), LogHistogram(), LogHistogram()
    a.record_many(a_vals)
    b.record_many(b_vals)
    both.record_many(a_vals + b_vals)
    merged = a.copy()
    merged.merge(b)
    assert merged == both
    assert [merged.percentile(q) for q in QS] == [both.percentile(q) for q in QS]
    assert a.count == 5000  # the copy was merged, not a
    with pytest.raises(ValueError):
        a.merge(LogHistogram(alpha=0.01))


def test_record_into_equals_record() -> None:
    rnd = random.Random(4)
    hs = [LogHistogram() for _ in range(3)]
    ref = LogHistogram()
    for _ in range(2000):
        v = rnd.choice([0.0, rnd.lognormvariate(3, 2)])
        record_into(hs, v)
        ref.record(v)
    assert all(h == ref for h in hs), [h for h in hs if h != ref][:5]


def test_dict_round_trip_is_compact_json() -> None:
    h = LogHistogram()
    h.record_many([1.5, 2.5, 2.5, 1000.0, 0.0])
    d = h.to_dict()
    assert set(d) >= {"g", "b", "n", "s", "mn", "mx"}
    back = LogHistogram.from_dict(orjson.loads(orjson.dumps(d)))
    assert back == h
    assert back.summary() == h.summary()
    back.record(3.0)  # still usable after loading
    assert back.count == 6


def test_bins_cover_all_samples_log_spaced() -> None:
    h = LogHistogram()
    rnd = random.Random(5)
    values = [10 ** rnd.uniform(0, 3) for _ in range(10_000)] + [0.0] * 10
    h.record_many(values)
    bins = h.bins(12)
    assert len(bins) == 12
    assert sum(c for _, _, c in bins) == len(values)
    assert bins[0][0] <= min(values) and bins[-1][1] == max(values)
    for (_, hi, _), (lo2, _, _) in itertools.pairwise(bins):
        assert hi == lo2
    # roughly uniform in log space: each bin holds ~1/12 of the positive samples
    for _, _, c in bins[1:-1]:
        assert 600 < c < 1100
    single = LogHistogram()
    single.record_many([5.0, 5.0])
    assert single.bins(10) == [(5.0, 5.0, 2)]


# -- windows ----------------------------------------------------------------------------------


def test_second_series_ring() -> None:
    s = SecondSeries(size=5)
    s.add(0, 1)
    s.add(0, 2)
    s.add(3, 4)
    assert s.series(4, 5) == [3, 0, 0, 4, 0]
    s.add(7, 1)  # the ring now covers seconds 3..7
    assert s.series(7, 5) == [4.0, 0.0, 0.0, 0.0, 1.0]
    assert s.total(3, 7) == 5.0
    assert s.total(0, 7) == 5.0  # clipped to the ring
    s.add(1, 100)  # older than the ring: dropped
    assert s.get(1) == 0.0
    assert s.total(0, 7) == 5.0


def test_second_series_completed_cache_matches_series() -> None:
    s = SecondSeries(size=50)
    rnd = random.Random(6)
    for now in range(1, 120):
        for _ in range(rnd.randrange(3)):
            s.add(now, rnd.random())
        n = min(30, now)
        assert s.completed(now, n) == s.series(now - 1, n)


def test_rolling_histogram_rolls() -> None:
    r = RollingHistogram(window_s=3)
    r.record(0, 100.0)
    r.record(1, 200.0)
    r.record(2, 300.0)
    assert r.view(2).count == 3
    assert r.view(3).count == 2  # second 0 left the window
    assert r.view(3).min == 200.0 and r.view(3).max == 300.0
    r.record(4, 50.0)  # second 1 leaves
    h = r.histogram(4)
    assert h.count == 2 and h.min == 50.0 and h.max == 300.0
    assert h.percentile(100) == 300.0
    assert r.view(100).count == 0  # long silence empties it
    assert r.view(100).summary()["p99"] == 0.0


def test_rolling_histogram_equals_exact_window() -> None:
    rnd = random.Random(8)
    r = RollingHistogram(window_s=10)
    seen: list[tuple[int, float]] = []
    for step in range(3000):
        sec = step // 37
        v = rnd.lognormvariate(5, 1)
        r.record(sec, v)
        seen.append((sec, v))
        if step % 250 == 0:
            window = sorted(v for s, v in seen if s > sec - 10)
            h = r.view(sec)
            assert h.count == len(window)
            assert h.min == window[0] and h.max == window[-1]
            for q in (50, 99):
                assert rel_err(h.percentile(q), exact(window, q)) <= 0.001


# -- collector --------------------------------------------------------------------------------


def test_collector_summary_matches_exact_stats() -> None:
    recs = make_records(4000)
    clock = FakeClock()
    c = Collector(["alpha", "beta", "unused"], started_at=1_700_000_000.0, clock=clock)
    for i, r in enumerate(recs):
        clock.t = 1000.0 + i * 0.01
        c.record(r)
    s = c.summary("t", 40.0)
    ok = [r for r in recs if r.status == "ok"]
    assert s["name"] == "t"
    assert s["started_at"].startswith("2023-11-14T22:13:20")
    assert s["requests"] == {
        "total": len(recs),
        "ok": len(ok),
        "error": len(recs) - len(ok),
        "cancelled": 0,
        "retried": sum(r.attempts > 1 for r in recs),
        "fallbacks": 0,
        "sessions": 1,
    }
    assert s["throughput"]["requests_per_s"] == round(len(ok) / 40.0, 3)
    assert s["throughput"]["output_tokens_per_s"] == round(sum(r.output_tokens for r in ok) / 40.0, 3)
    for key in ("latency_ms", "ttft_ms", "itl_ms", "queue_ms"):
        assert_summary_close(s[key], exact_summary([getattr(r, key) for r in ok]))
    assert s["tokens"] == {
        "input": sum(r.input_tokens for r in recs),
        "output": sum(r.output_tokens for r in recs),
    }
    assert s["tokens_source"]["estimate"] == sum(r.tokens_source == "estimate" for r in recs)
    assert s["cost"]["total"] == pytest.approx(sum(r.cost for r in recs))
    errs: dict[str, int] = {}
    for r in recs:
        if r.error:
            errs[r.error] = errs.get(r.error, 0) + 1
    assert s["errors"] == errs
    assert s["attempt_errors"] == {"http_429": sum(1 for r in recs if r.attempt_errors)}
    assert set(s["models"]) == {"alpha", "beta"}  # "unused" finished nothing
    for m in ("alpha", "beta"):
        mine = [r for r in recs if r.model == m]
        block = s["models"][m]
        assert block["requests"]["total"] == len(mine)
        assert block["requests"]["ok"] == sum(r.status == "ok" for r in mine)
        assert_summary_close(
            block["latency_ms"], exact_summary([r.latency_ms or 0 for r in mine if r.status == "ok"])
        )
        assert set(block) >= {"requests", "throughput", "latency_ms", "ttft_ms", "itl_ms", "cost", "tokens"}
    assert s["changes"] == []
    whole = {k: v for k, v in s["requests"].items() if k != "sessions"}  # a phase is within a session
    assert len(s["phases"]) == 1 and s["phases"][0]["requests"] == whole
    orjson.dumps(s)  # JSON-serialisable


def test_phases_split_by_change() -> None:
    clock = FakeClock()
    c = Collector(["alpha"], started_at=0.0, clock=clock)

    def rec(i: int, lat: float) -> RequestRecord:
        return RequestRecord(f"{i}", "alpha", "e", "ok", 1, 0.0, 0.0, 0.0, lat, ttft_ms=lat / 10)

    for i in range(100):
        c.record(rec(i, 100.0))
    c.change(10.0, "concurrency", 10, 50)
    snap = c.snapshot(gauges())
    assert snap.phase_index == 1 and snap.phase_counts.total == 0
    for i in range(50):
        c.record(rec(1000 + i, 400.0))
    c.change(20.0, "weight", 1, 2, model="alpha")
    c.change(20.5, "enabled", True, False, model="alpha")  # no request finished since: same phase
    for i in range(10):
        c.record(rec(2000 + i, 900.0))
    snap = c.snapshot(gauges())
    assert snap.phase["latency_ms"]["p50"] == pytest.approx(900.0, rel=1e-3)
    assert snap.run["latency_ms"]["max"] == 900.0
    s = c.summary("p", 30.0)
    assert s["changes"] == [
        {"t": 10.0, "what": "concurrency", "from": 10, "to": 50, "by": "command"},
        {"t": 20.0, "what": "weight", "from": 1, "to": 2, "model": "alpha", "by": "command"},
        {"t": 20.5, "what": "enabled", "from": True, "to": False, "model": "alpha", "by": "command"},
    ]
    phases = s["phases"]
    assert [(p["t_start"], p["t_end"]) for p in phases] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)]
    assert [p["requests"]["ok"] for p in phases] == [100, 50, 10]
    assert [p["latency_ms"]["p50"] for p in phases] == pytest.approx([100.0, 400.0, 900.0], rel=1e-3)
    assert phases[1]["throughput"]["requests_per_s"] == 5.0
    assert phases[0]["settings"] == []
    assert [c["what"] for c in phases[2]["settings"]] == ["weight", "enabled"]


def test_snapshot_windows_and_series_with_clock() -> None:
    clock = FakeClock()
    c = Collector(["alpha", "beta"], started_at=0.0, clock=clock)
    # 20 s at 10 ok/s for alpha (latency 100), then 5 s at 4 ok/s for beta (latency 500)
    for sec in range(20):
        for k in range(10):
            clock.t = 1000.0 + sec + k / 10
            c.record(RequestRecord(f"a{sec}-{k}", "alpha", "e", "ok", 1, 0, 0, 1.0, 100.0, output_tokens=5))
    for sec in range(20, 25):
        for k in range(4):
            clock.t = 1000.0 + sec + k / 4
            c.record(RequestRecord(f"b{sec}-{k}", "beta", "e", "ok", 1, 0, 0, 1.0, 500.0, output_tokens=5))
        clock.t = 1000.0 + sec + 0.5
        c.record(
            RequestRecord(
                f"e{sec}", "beta", "e", "error", 1, 0, 0, 1.0, None, error="http_500", error_detail=f"d{sec}"
            )
        )
    clock.t = 1025.0  # seconds 0..24 complete
    snap = c.snapshot(gauges(total_expected=1000))
    assert snap.elapsed_s == 25.0
    assert snap.series.start_s == 0
    assert list(snap.series.req_per_s) == [10.0] * 20 + [4.0] * 5
    assert list(snap.series.errors_per_s) == [0.0] * 20 + [1.0] * 5
    assert snap.series.output_tokens_per_s[0] == 50.0
    # the window is seconds 16..25 (25 just begun): 4 s of alpha (40), 5 s of beta (20) in 9 s
    assert snap.window["latency_ms"]["p50"] == pytest.approx(100.0, rel=1e-3)
    assert snap.window["latency_ms"]["max"] == 500.0
    assert snap.req_per_s_10s == pytest.approx(60 / 9.0, rel=1e-3)
    assert snap.errors_per_s_10s == pytest.approx(5 / 9.0, rel=1e-3)
    models = {m.name: m for m in snap.models}
    assert models["alpha"].ok_10s == 40 and models["beta"].ok_10s == 20 and models["beta"].error_10s == 5
    assert models["beta"].counts.error == 5
    assert models["alpha"].share == pytest.approx(200 / 225, abs=1e-4)
    assert models["beta"].latency_p99 == 500.0
    # the first detail of a class is kept (it says why; later ones repeat it)
    assert snap.errors["http_500"].count == 5 and snap.errors["http_500"].detail == "d20"
    assert snap.counts.total == 225 and snap.counts.ok == 220
    # later: the window empties, the series moves on
    clock.t = 1100.0
    later = c.snapshot(gauges())
    assert later.window["latency_ms"]["p50"] == 0.0 and later.req_per_s_10s == 0.0
    assert len(later.series.req_per_s) == 100 and later.series.req_per_s[-1] == 0.0


def test_snapshot_round_trips_through_json() -> None:
    clock = FakeClock()
    c = Collector(["alpha", "beta"], started_at=0.0, prices={"beta": (0.01, 1.0, 2.0)}, clock=clock)
    for i, r in enumerate(make_records(300)):
        clock.t = 1000.0 + i * 0.05
        c.record(r)
    c.change(5.0, "rate", 0, 20.0)
    snap = c.snapshot(gauges(total_expected=600))
    d = snap.to_dict()
    back = Snapshot.from_dict(orjson.loads(orjson.dumps(d)))
    assert back == snap
    assert back.to_dict() == d
    with pytest.raises(AttributeError):
        snap.cost = 1.0  # type: ignore[misc]


def test_projected_cost() -> None:
    clock = FakeClock()
    c = Collector(["alpha", "beta"], started_at=0.0, prices={"beta": (0.5, 0.0, 0.0)}, clock=clock)
    for i in range(10):
        c.record(RequestRecord(f"{i}", "alpha", "e", "ok", 1, 0, 0, 0, 10.0, cost=0.1))
    # alpha costs 0.1 so far; beta has no requests yet: its price says 0.5; weights 3:1
    g = gauges(total_expected=110)
    snap = c.snapshot(g)
    assert snap.projected_cost == pytest.approx(1.0 + 100 * (3 * 0.1 + 1 * 0.5) / 4)
    assert c.snapshot(gauges(total_expected=None)).projected_cost is None


def test_attempt_errors_live_then_final_not_double_counted() -> None:
    c = Collector(["alpha"], started_at=0.0, clock=FakeClock())
    c.record_attempt_error("alpha", "http_429", "slow down")
    c.record_attempt_error("alpha", "http_429", "slow down")
    assert c.snapshot(gauges()).attempt_errors == {"http_429": 2}
    c.record(RequestRecord("x", "alpha", "e", "ok", 3, 0, 0, 0, 10.0, attempt_errors={"http_429": 2}))
    assert c.snapshot(gauges()).attempt_errors == {"http_429": 2}
    # a record whose attempts were never reported live still counts
    c.record(RequestRecord("y", "alpha", "e", "ok", 2, 0, 0, 0, 10.0, attempt_errors={"timeout": 1}))
    assert c.summary("n", 1.0)["attempt_errors"] == {"http_429": 2, "timeout": 1}


def test_progress_line() -> None:
    """The headless progress line: done of total, the 10 s rates, the window's TTFT and ITL p50 and
    latency p50/p99, errors, in flight of the limit, what bounds the run, the ETA at the 10 s rate;
    PAUSED while paused; no total, no ETA."""
    from oxconsole.reports.progress import progress_line
    from tests.support.ui import fixed_snapshot

    s = fixed_snapshot()  # 95.5 s in, 2,040 of 4,000 done, 34 errors, 45 of 48 in flight
    parts = progress_line(s).split(" | ")
    eta = (4000 - 2040) / s.req_per_s_10s  # 87.8 s
    assert parts == [
        "[ 1m35s] 2040/4000  51.0%",
        f"{s.req_per_s_10s:.1f} req/s",
        f"{s.output_tokens_per_s_10s:.0f} tok/s",
        f"TTFT {s.window['ttft_ms']['p50']:.0f}ms",
        f"ITL {s.window['itl_ms']['p50']:.1f}ms",
        "p50 1704ms p99 3718ms",  # the last 10 s window's latency
        "err 34",
        "in flight 45/48",
        "bound: concurrency",  # 12 wait for a slot
        f"ETA {int(eta // 60)}m{int(eta % 60):02d}s",
    ]
    g = dataclasses.replace(s.gauges, state="paused", total_expected=None)
    parts = progress_line(dataclasses.replace(s, gauges=g)).split(" | ")
    assert parts[0] == "[ 1m35s] 2040 done" and parts[-1] == "PAUSED"
    assert not any(p.startswith("ETA") for p in parts)
