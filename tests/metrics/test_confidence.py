"""metrics/confidence.py: seconds completed by the requests themselves, a phase's whole seconds,
settled evaluated once a second, the "still moving" check over the last 10 s, a phase's block."""

from __future__ import annotations

import random

import pytest

from oxconsole.metrics.aggregate import RunStats
from oxconsole.metrics.confidence import RECENT_S, Confidence, Span
from oxconsole.metrics.histogram import LogHistogram


class Stats:
    """What a span reads: ok requests and two histograms."""

    def __init__(self) -> None:
        self.ok = 0
        self.ttft = LogHistogram()
        self.latency = LogHistogram()

    def add(self, ttft: float | None, latency: float) -> None:
        self.ok += 1
        if ttft is not None:
            self.ttft.record(ttft)
        self.latency.record(latency)


def _feed(
    conf: Confidence, stats: list[Stats], end: float, ttft: float | None, latency: float = 1000.0
) -> None:
    conf.record(end, True)
    for st in stats:
        st.add(ttft, latency)


def test_seconds_are_completed_by_later_requests() -> None:
    st = Stats()
    conf = Confidence(st)
    for k in range(5):
        _feed(conf, [st], 0.1 + 0.2 * k, 100.0)  # five requests in second 0
    assert conf.run.batches.seconds == 0
    _feed(conf, [st], 3.5, 100.0)  # second 3: seconds 0, 1 and 2 are complete
    assert conf.run.batches.seconds == 3 and conf.run.batches.total == 5.0, conf.run.batches.total
    _feed(conf, [st], 2.9, 100.0)  # journaled late: counted in the second being filled (3)
    _feed(conf, [st], 4.0, 100.0)
    assert conf.run.batches.total == 7.0, conf.run.batches.total


def test_settles_on_a_steady_stream_and_says_when() -> None:
    rnd = random.Random(1)
    st = Stats()
    conf = Confidence(st)
    t = 0.0
    while t < 60.0:
        t += rnd.expovariate(50.0)
        _feed(conf, [st], t, rnd.uniform(90.0, 110.0), 50.0)
    v = conf.run.view
    assert v.state == "settled" and v.settled_at_s is not None and 10 <= v.settled_at_s <= 60, v
    assert v.settled_at_s == float(int(v.settled_at_s)), v  # judged at whole seconds only
    assert set(conf.run.intervals) == {"ttft_ms.p50", "latency_ms.p50", "throughput.requests_per_s"}


def test_a_phase_has_its_whole_seconds_only_and_its_own_settling() -> None:
    rnd = random.Random(2)
    run, ph = Stats(), Stats()
    conf = Confidence(run)
    t = 0.0
    while t < 30.0:
        t += rnd.expovariate(100.0)
        _feed(conf, [run], t, rnd.uniform(90, 110), 50.0)
    assert conf.run.view.state == "settled", conf.run.view
    span = conf.new_phase(ph, 30.4)
    assert span.first == 31
    while (t := t + rnd.expovariate(100.0)) < 34.0:  # seconds up to 33 complete: 31 and 32 whole
        _feed(conf, [run, ph], t, rnd.uniform(180, 220), 50.0)
    assert span.batches.seconds == 2, span.batches.seconds  # 30 is split with phase 0
    assert span.view.state == "settling" and span.view.settled_at_s is None, span.view
    block = span.block(34.0)
    assert block["settled_at_s"] is None and block["ci"]["throughput.requests_per_s"] is None, block
    lo, hi = block["ci"]["ttft_ms.p50"]
    assert lo <= ph.ttft.percentile(50) <= hi, (lo, hi)


def test_a_figure_that_moved_unsettles_the_run() -> None:
    """TTFT steps from 100 to 130 ms: the run's p50 over every request lags, its last 10 s do not."""
    rnd = random.Random(3)
    st = Stats()
    conf = Confidence(st)
    t = 0.0
    while t < 40.0:
        t += rnd.expovariate(100.0)
        _feed(conf, [st], t, rnd.uniform(95, 105), 50.0)
    assert conf.run.view.state == "settled", conf.run.view
    seen = []
    while t < 50.0:
        t += rnd.expovariate(100.0)
        _feed(conf, [st], t, rnd.uniform(125, 135), 50.0)
        seen.append(conf.run.view.state)
    assert "settling" in seen and conf.run.view.worst == "ttft_ms.p50", (conf.run.view, seen[-5:])


def test_the_recent_figure_needs_a_window_of_history() -> None:
    st = Stats()
    span = Span(st, 0.0)
    for sec in range(1, RECENT_S + 2):
        for _ in range(20):
            st.add(100.0, 50.0)
        recent = span._recent(sec, "ttft_ms.p50", st.ttft)
        assert (recent is None) == (sec < 1 + RECENT_S), (sec, recent)  # a mark 10 s before
    assert recent is not None and recent.value == pytest.approx(100.0, rel=1e-3), recent


def test_latency_stands_in_without_ttft() -> None:
    rnd = random.Random(4)
    st = Stats()
    conf = Confidence(st)
    t = 0.0
    while t < 40.0:
        t += rnd.expovariate(50.0)
        _feed(conf, [st], t, None, rnd.uniform(95, 105))
    assert conf.run.view.state == "settled" and "ttft_ms.p50" not in conf.run.intervals, conf.run.view
    assert conf.run.block(40.0)["ci"]["ttft_ms.p50"] is None


def test_reads_run_stats() -> None:
    """`RunStats` is what the collector and the report hand it."""
    st = RunStats()
    Span(st, 0.0).evaluate(1)
