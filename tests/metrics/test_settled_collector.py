"""The collector's settled flag on a run that changes: phase 0 settles, the change starts phase 1
settling, phase 1 settles at its own figures; the summary keeps each phase's `settled_at_s` and
`ci` frozen at its change; `oxconsole report` rebuilds them from the journal (run: equal; phases:
as close as `assert_confidence_close` says). A closed loop simulated on virtual time, fed to the
collector as the engine feeds it."""

from __future__ import annotations

import heapq
import math
import random
from pathlib import Path
from typing import Any

import orjson

from oxconsole.journal.manifest import store_run_sections
from oxconsole.journal.records import RequestRecord
from oxconsole.journal.sessions import SessionLog
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.settle import SettleView
from oxconsole.reports.summary import summary_from_journal
from tests.support.metrics import assert_confidence_close, gauges

START = 1_700_000_000.0
CHANGE_S = 40.0
END_S = 90.0


def closed_loop(seed: int = 7, slots: int = 50) -> list[RequestRecord]:
    """`slots` requests in flight, each sent as the last ended; TTFT median 200 ms before the change,
    300 ms after (lognormal, sigma 0.2), 600 ms of decode; by end time."""
    rnd = random.Random(seed)
    heap: list[float] = [0.0] * slots
    out: list[RequestRecord] = []
    while True:
        sent = heapq.heappop(heap)
        if sent >= END_S:
            break
        median = 200.0 if sent < CHANGE_S else 300.0
        ttft = round(rnd.lognormvariate(math.log(median), 0.2), 3)
        latency = round(ttft + 600.0, 3)
        out.append(
            RequestRecord(
                id=f"r{len(out)}", model="m", endpoint="default", status="ok", attempts=1,
                t_scheduled=round(START + sent, 6), t_sent=round(START + sent, 6), queue_ms=0.0,
                latency_ms=latency, ttft_ms=ttft, output_tokens=16,
            )
        )  # fmt: skip
        heapq.heappush(heap, sent + latency / 1000.0)
    out.sort(key=lambda r: r.t_sent + (r.latency_ms or 0.0) / 1000.0)
    return out


class EndClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def run_collector(recs: list[RequestRecord]) -> tuple[Collector, list[tuple[float, dict[str, Any]]]]:
    """Feed each record at its end time, the change at `CHANGE_S`; the phase's view each second."""
    clock = EndClock()
    c = Collector(["m"], started_at=START, clock=clock)
    views: list[tuple[float, dict[str, Any]]] = []
    changed = False
    for r in recs:
        end = r.t_sent + (r.latency_ms or 0.0) / 1000.0 - START
        if not changed and end >= CHANGE_S:
            clock.t = CHANGE_S
            c.change(CHANGE_S, "concurrency", 50, 80)
            changed = True
        clock.t = end
        c.record(r)
        if not views or end - views[-1][0] >= 1.0:
            settle = c.snapshot(gauges()).settle
            assert settle is not None
            views.append((end, dict(settle["phase"])))
    return c, views


def test_a_changed_run_settles_twice() -> None:
    c, views = run_collector(closed_loop())
    before = [v for t, v in views if t < CHANGE_S]
    after = [v for t, v in views if t >= CHANGE_S]
    assert any(v["state"] == "settled" for v in before), before[-3:]
    assert after[0]["state"] == "settling" and after[0]["settled_at_s"] is None, after[0]
    assert after[-1]["state"] == "settled", after[-3:]
    label = SettleView.from_dict(after[-1])
    assert label is not None and label.label().startswith("settled ±"), after[-1]

    s = c.summary("t", END_S + 2.0)
    p0, p1 = s["phases"]
    assert p0["settled_at_s"] is not None and p0["settled_at_s"] <= CHANGE_S, p0
    assert p1["settled_at_s"] is not None and p1["settled_at_s"] <= END_S - CHANGE_S, p1
    lo0, hi0 = p0["ci"]["ttft_ms.p50"]
    lo1, hi1 = p1["ci"]["ttft_ms.p50"]
    assert lo0 <= 200.0 * 1.02 and hi0 >= 200.0 * 0.98 and hi0 < lo1, (p0["ci"], p1["ci"])
    assert lo1 <= 300.0 * 1.02 and hi1 >= 300.0 * 0.98, p1["ci"]
    rate = p1["ci"]["throughput.requests_per_s"]
    assert rate is not None and rate[0] <= p1["throughput"]["requests_per_s"] <= rate[1], p1
    assert set(s["ci"]) == {"ttft_ms.p50", "latency_ms.p50", "throughput.requests_per_s"}, s["ci"]
    steady = s["steady"]
    assert steady is not None and steady["from_s"] == 0.0 and steady["to_s"] >= END_S - 2, steady


def test_phase_intervals_are_frozen_at_the_change() -> None:
    recs = closed_loop()
    c, _ = run_collector([r for r in recs if r.t_sent + (r.latency_ms or 0) / 1000 - START < 60.0])
    frozen = c.summary("t", 60.0)["phases"][0]
    c2, _ = run_collector(recs)
    assert c2.summary("t", END_S + 2.0)["phases"][0] == frozen


def test_report_rebuilds_the_same_from_the_journal(tmp_path: Path) -> None:
    recs = closed_loop(seed=8)
    c, _ = run_collector(recs)
    live = c.summary("t", END_S + 2.0)
    journal = tmp_path / "results.jsonl"
    journal.write_bytes(b"".join(orjson.dumps(r.to_json_dict()) + b"\n" for r in recs))
    log = SessionLog(journal, [])
    log.begin(START)
    log.end(END_S + 2.0)
    store_run_sections(journal, live)
    rep = summary_from_journal(journal)
    assert_confidence_close(rep, live)
    assert rep["settled_at_s"] == live["settled_at_s"], (rep["settled_at_s"], live["settled_at_s"])
    assert rep["steady"] == live["steady"], (rep["steady"], live["steady"])
    assert len(rep["phases"]) == 2
    for i, (a, b) in enumerate(zip(rep["phases"], live["phases"], strict=True)):
        assert_confidence_close(a, b, f"phase {i}")
