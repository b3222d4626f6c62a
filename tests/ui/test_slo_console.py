"""Goodput live: the snapshot carries it (also across the control socket's JSON), the header and the
throughput panel show it beside the rates at 80x24, coloured by the target, and the progress line
of a headless run says it.

Snapshots are built the honest way, a Collector fed fixed records on a fixed clock; one test runs
the real engine against the simulator and checks its last snapshot against its summary.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import Snapshot
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.goodput import Goodput
from oxconsole.metrics.snapshot import Gauges
from oxconsole.reports.progress import progress_line
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Line, Palette
from oxconsole.ui.panels.header import HeaderPanel, header_lines
from oxconsole.ui.panels.throughput import ThroughputPanel, throughput_lines
from oxconsole.workload import SloConfig
from tests.support import engine_for, run
from tests.support.ui import StaticSource, fixed_snapshot

P = Palette(primary="blue", success="green", error="red", muted="grey50")
SLO = SloConfig(ttft=0.2, target=0.9)


def judged_snapshot(good: int, bad: int, target: float = 0.9) -> Snapshot:
    """Ten seconds of a run: `good` requests within the SLO, `bad` over it, judged as the engine does."""
    now = [0.0]
    col = Collector(["m"], started_at=1_700_000_000.0, clock=lambda: now[0], slo_target=target)
    for i in range(good + bad):
        now[0] = 10.0 * i / (good + bad)
        r = RequestRecord(
            id=f"p{i}", model="m", endpoint="e", status="ok", attempts=1, t_scheduled=1.0, t_sent=1.0,
            queue_ms=1.0, latency_ms=300.0, ttft_ms=100.0 if i < good else 400.0, itl_ms=5.0,
        )  # fmt: skip
        r.slo_ok = SLO.good(r)
        col.record(r)
    now[0] = 10.0
    g = Gauges("running", 10.0, 100, good + bad, 0, 0, 0, 0, 8, 0.0, 0.0, 0.0)
    return col.snapshot(g)


def styled(line: Line, text: str) -> str:
    """The style of the run holding `text` in a Line."""
    return next(st for t, st in line.runs if text in t)


def test_snapshot_carries_goodput_and_crosses_json() -> None:
    s = judged_snapshot(good=45, bad=5)
    g = s.goodput
    assert g is not None
    assert (g.good, g.judged, g.target, g.fraction, g.met) == (45, 50, 0.9, 0.9, True)
    assert g.req_per_s == 4.5
    # the window is seconds 1-10 (9 s so far): the 45 good ones less the 5 of second 0
    assert g.req_per_s_10s == round(40 / 9, 3) and s.req_per_s_10s == round(45 / 9, 3)
    assert (g.phase_good, g.phase_judged) == (45, 50)  # no change yet: the phase is the run
    assert Snapshot.from_dict(s.to_dict()) == s
    assert fixed_snapshot().goodput is None  # no [slo], no goodput
    assert Snapshot.from_dict(fixed_snapshot().to_dict()).goodput is None


def test_header_and_throughput_show_goodput_coloured_by_the_target() -> None:
    """The share beside the counts (always on screen, also once a note takes the status line),
    the rate beside the rates; the throughput panel has both where it has room."""
    below = judged_snapshot(good=40, bad=10)  # 80% < 90%
    title, _, status = header_lines(below, P, 78, name="slo", state="running")
    assert "ok 50  err 0   good 80.0% < 90%   cost" in title.plain
    assert "red" in styled(title, "80.0%")
    assert status.plain.endswith("5.00 req/s  0.00 tok/s  good 3.89/s")
    title, _, status = header_lines(below, P, 78, name="slo", state="done", note="run finished")
    assert "good 80.0% < 90%" in title.plain and "good" not in status.plain
    met = judged_snapshot(good=50, bad=0)
    title = header_lines(met, P, 78, name="slo", state="running")[0]
    assert "good 100%   cost" in title.plain and "green" in styled(title, "100%")
    panel = throughput_lines(below, P, 70, 5)
    assert "good 3.89/s 80.0% < 90%" in panel[0].plain
    assert all(len(line) <= 36 for line in throughput_lines(below, P, 36, 5)), [
        line for line in throughput_lines(below, P, 36, 5) if not (len(line) <= 36)
    ][:5]  # left out when it does not fit
    plain = [line.plain for line in header_lines(fixed_snapshot(), P, 78, name="x", state="running")]
    assert not any("good" in line for line in plain)


def test_long_phase_text_gives_way_to_the_rates() -> None:
    s = judged_snapshot(good=40, bad=10)
    changes = tuple({"t": 1.0, "what": "weight", "from": 1, "to": 2, "model": f"model-{i}"} for i in range(6))
    s = dataclasses.replace(s, phase_settings=changes, phase_index=1)
    status = header_lines(s, P, 80, name="slo", state="running")[2]
    assert len(status) <= 80 and status.plain.endswith("good 3.89/s") and "…" in status.plain


def test_progress_line_says_goodput() -> None:
    assert "good 3.9/s 80.0% < 90%" in progress_line(judged_snapshot(good=40, bad=10))
    assert "good 5.0/s 100%" in progress_line(judged_snapshot(good=50, bad=0))
    assert "good" not in progress_line(fixed_snapshot())


@pytest.mark.asyncio
async def test_console_at_80x24_shows_goodput_beside_throughput() -> None:
    src = StaticSource(judged_snapshot(good=40, bad=10))
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        header = app.main.query_one(HeaderPanel)
        title, status = header._lines[0], header._lines[2]
        assert "good 80.0% < 90%" in title.plain and status.plain.endswith("good 3.89/s")
        assert max(len(line) for line in header._lines) <= 80
        assert app.main.query_one(ThroughputPanel).snapshot is src.snapshot
        palette = header.palette
        assert palette.error and palette.error in styled(title, "80.0%")
        assert src.snapshot is not None
        src.snapshot = dataclasses.replace(src.snapshot, goodput=Goodput(0.9, 50, 50, 5.0, 5.0))
        app.tick()
        await pilot.pause()
        title = header._lines[0]
        assert "good 100%" in title.plain and palette.success in styled(title, "100%")


@pytest.mark.asyncio
async def test_engine_snapshot_agrees_with_its_summary(tmp_path: Path) -> None:
    from oxconsole.workload import load_workload
    from tests.support.workloads import fast_slow

    w = load_workload(fast_slow(tmp_path, 0.9, 0))
    engine = engine_for(w)
    out = await run(w, engine)
    g = out.summary["goodput"]
    live = engine.latest.goodput if engine.latest is not None else None  # published at the end
    assert live is not None
    assert (live.good, live.judged, live.fraction, live.met) == (6, 12, g["fraction"], g["met"])
    assert g["fraction"] == 0.5 and g["met"] is False
    ended = Snapshot.from_summary(out.summary).goodput  # a console opening on a run already over
    assert ended is not None and (ended.fraction, ended.met) == (0.5, False)


def test_phase_table_compares_the_phase_with_the_run() -> None:
    from oxconsole.ui.panels.phase import phase_lines

    now = [0.0]
    col = Collector(["m"], started_at=1.0, clock=lambda: now[0], slo_target=0.9)
    for i in range(20):
        now[0] = i * 0.5
        if i == 10:
            col.change(5.0, "concurrency", 8, 16)  # the second half: every other request too slow
        r = RequestRecord(
            id=f"p{i}", model="m", endpoint="e", status="ok", attempts=1, t_scheduled=1.0, t_sent=1.0,
            queue_ms=1.0, latency_ms=300.0, ttft_ms=400.0 if i >= 10 and i % 2 else 100.0, itl_ms=5.0,
        )  # fmt: skip
        r.slo_ok = SLO.good(r)
        col.record(r)
    s = col.snapshot(Gauges("running", 10.0, 100, 20, 0, 0, 0, 0, 16, 0.0, 0.0, 0.0))
    assert s.goodput is not None and (s.goodput.phase_good, s.goodput.phase_judged) == (5, 10)
    row = next(line for line in phase_lines(s, P, 38, 12) if line.plain.startswith("good"))
    assert row.plain.split() == ["good", "50.0%", "75.0%", "≥90%"]
    assert "red" in styled(row, "50.0%") and "red" in styled(row, "75.0%")
    assert not any(line.plain.startswith("good") for line in phase_lines(fixed_snapshot(), P, 38, 12))
