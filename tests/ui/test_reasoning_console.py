"""Reasoning and cached prompts live: the snapshot carries TTFOT, the reasoning share of output and
the cache hit rate (also across the control socket's JSON and from a finished run's summary), and
the latency panel shows them in one line that fits at 80x24.

Snapshots are built as the console gets them: a Collector fed records on a fixed clock.
"""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import TabbedContent

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import Snapshot
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import Gauges
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.latency import LatencyPanel
from oxconsole.ui.panels.reasoning import reasoning_line
from tests.support.ui import StaticSource, fixed_snapshot

P = Palette(primary="blue", success="green", error="red", muted="grey50")
N = 40


def record(i: int) -> RequestRecord:
    return RequestRecord(
        id=f"p{i}", model="m", endpoint="e", status="ok", attempts=1, t_scheduled=1.0, t_sent=1.0,
        queue_ms=1.0, latency_ms=300.0, ttft_ms=50.0 + i, itl_ms=5.0, input_tokens=100,
        output_tokens=30, ttfot_ms=150.0 + i, reasoning_tokens=20, cached_tokens=64 if i else 0,
        tool_calls=1 if i % 4 == 0 else None,
    )  # fmt: skip


def reasoning_snapshot() -> Snapshot:
    now = [0.0]
    col = Collector(["m"], started_at=1_700_000_000.0, clock=lambda: now[0])
    for i in range(N):
        now[0] = 10.0 * i / N
        col.record(record(i))
    now[0] = 10.0
    return col.snapshot(Gauges("running", 10.0, 100, N, 0, 0, 0, 0, 8, 0.0, 0.0, 0.0))


def test_snapshot_carries_the_figures_and_crosses_json() -> None:
    s = reasoning_snapshot()
    r = s.reasoning
    assert r is not None
    recs = [record(i) for i in range(N)]
    h = LogHistogram()
    for x in recs:
        assert x.ttfot_ms is not None
        h.record(x.ttfot_ms)
    want_share = round(sum(x.reasoning_tokens or 0 for x in recs) / sum(x.output_tokens for x in recs), 4)
    want_rate = round(sum(x.cached_tokens or 0 for x in recs) / sum(x.input_tokens for x in recs), 4)
    calls = sum(x.tool_calls or 0 for x in recs)
    got = (r.ttfot_p50, r.ttfot_p99, r.reasoning_share, r.cache_hit_rate, r.tool_calls)
    assert got == (h.summary()["p50"], h.summary()["p99"], want_share, want_rate, calls), got
    assert Snapshot.from_dict(s.to_dict()) == s
    assert fixed_snapshot().reasoning is None  # a run without these keys has no line
    assert Snapshot.from_dict(fixed_snapshot().to_dict()).reasoning is None


def test_a_finished_runs_summary_gives_the_same_line() -> None:
    now = [0.0]
    col = Collector(["m"], started_at=1_700_000_000.0, clock=lambda: now[0])
    for i in range(N):
        col.record(record(i))
    ended = Snapshot.from_summary(col.summary("x", 10.0)).reasoning
    live = reasoning_snapshot().reasoning
    assert ended == live, (ended, live)


@pytest.mark.parametrize("width", [80, 60, 38, 30])
def test_the_line_fits_its_width_or_shortens(width: int) -> None:
    line = reasoning_line(reasoning_snapshot(), P, width)
    assert line is not None
    text = line.plain
    assert "TTFOT" in text and "…" not in text, text
    if width >= 80:
        assert "reasoning 67%" in text and "cached 62%" in text and "tool calls 10" in text, text
    assert len(text) <= width, (width, text)  # the short form, parts left out from the end
    assert reasoning_line(fixed_snapshot(), P, width) is None


async def test_console_at_80x24_shows_the_line_unclipped() -> None:
    src = StaticSource(reasoning_snapshot())
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        for k in range(2 * LatencyPanel.EVERY):  # panels take every EVERY-th new snapshot
            assert src.snapshot is not None
            src.snapshot = dataclasses.replace(src.snapshot, elapsed_s=10.0 + k)
            await pilot.pause()
            app.tick()
        await pilot.pause()
        app.main.query_one(TabbedContent).active = "tab-latency"  # 80x24 is the compact layout
        await pilot.pause()
        panel = app.main.query_one("#latency-tab", LatencyPanel)
        lines = [line.plain for line in panel._lines]
        shown = [t for t in lines if "TTFOT" in t]
        assert shown, lines
        assert ("…" not in shown[0] and "cache" in shown[0] and "think" in shown[0]) or "reasoning" in shown[
            0
        ], shown
        assert len(shown[0]) <= panel.content_region.width, (shown[0], panel.content_region.width)
