"""Every kind of model live: the snapshot carries images and audio per second and the real-time
factor (across the control socket's JSON too, and from a finished run's summary), and the
models panel shows the kinds present in one line under its table that fits at 80x24 (Pilot and a
screenshot).

Snapshots are built as the console gets them: a Collector fed records on a fixed clock.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import Snapshot
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import Gauges
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.media import media_line
from oxconsole.ui.panels.models import ModelsPanel
from tests.support.ui import StaticSource, fixed_snapshot

P = Palette(primary="blue", success="green", error="red", muted="grey50")
N = 40
SECONDS = 10.0


def record(i: int) -> RequestRecord:
    base: dict[str, Any] = {
        "id": f"p{i}", "endpoint": "e", "status": "ok", "attempts": 1, "t_scheduled": 1.0,
        "t_sent": 1.0, "queue_ms": 1.0, "latency_ms": 300.0 + i,
    }  # fmt: skip
    kind = i % 4
    if kind == 0:
        return RequestRecord(model="vision", images_in=2, image_pixels=2 * 512 * 512, **base)
    if kind == 1:
        return RequestRecord(model="stt", api="transcriptions", audio_in_s=10.0, rtf=0.03 + i / 1000, **base)
    if kind == 2:
        return RequestRecord(model="tts", api="speech", audio_out_s=4.0, rtf=0.075 + i / 1000, **base)
    return RequestRecord(model="rr", api="rerank", documents=20, **base)


def media_snapshot() -> Snapshot:
    now = [0.0]
    col = Collector(["vision", "stt", "tts", "rr"], started_at=1_700_000_000.0, clock=lambda: now[0])
    for i in range(N):
        now[0] = SECONDS * i / N
        col.record(record(i))
    now[0] = SECONDS
    return col.snapshot(Gauges("running", SECONDS, 100, N, 0, 0, 0, 0, 8, 0.0, 0.0, 0.0))


def test_the_snapshot_carries_the_rates_and_crosses_json() -> None:
    s = media_snapshot()
    m = s.media
    assert m is not None
    recs = [record(i) for i in range(N)]
    h = LogHistogram()
    for r in recs:
        if r.rtf is not None:
            h.record(r.rtf)
    want = (
        sum(r.images_in or 0 for r in recs) / SECONDS,
        sum(r.audio_in_s or 0 for r in recs) / SECONDS,
        sum(r.audio_out_s or 0 for r in recs) / SECONDS,
        sum(r.documents or 0 for r in recs) / SECONDS,
        h.summary()["p50"],
        h.summary()["p99"],
    )
    got = (m.images_in_per_s, m.audio_in_per_s, m.audio_out_per_s, m.documents_per_s, m.rtf_p50, m.rtf_p99)
    assert got == pytest.approx(want), got
    assert Snapshot.from_dict(s.to_dict()) == s
    assert fixed_snapshot().media is None and Snapshot.from_dict(fixed_snapshot().to_dict()).media is None


def test_a_finished_runs_summary_gives_the_same_figures() -> None:
    now = [0.0]
    col = Collector(["vision", "stt", "tts", "rr"], started_at=1_700_000_000.0, clock=lambda: now[0])
    for i in range(N):
        col.record(record(i))
    ended = Snapshot.from_summary(col.summary("x", SECONDS)).media
    assert ended == media_snapshot().media, ended


@pytest.mark.parametrize("width", [100, 80, 60, 40, 24])
def test_the_line_fits_its_width_or_shortens(width: int) -> None:
    line = media_line(media_snapshot(), P, width)
    assert line is not None
    text = line.plain
    assert len(text) <= width or width < 24, (width, text)
    assert "…" not in text and "RTF" in text, text
    if width >= 100:  # 20 images, 100 s heard, 40 s spoken, 200 documents in 10 s
        want = "images in 2.00/s · audio in 10.0 s/s · audio out 4.00 s/s · documents 20.0/s · RTF p50/p99 0."
        assert text.startswith(want), text
    elif width >= 67:
        assert text.startswith("img 2.00/s heard 10.0 s/s spoken 4.00 s/s docs 20.0/s RTF 0."), text
    assert media_line(fixed_snapshot(), P, width) is None


def test_only_the_kinds_present_are_shown() -> None:
    s = media_snapshot()
    assert s.media is not None
    only = dataclasses.replace(s, media=dataclasses.replace(s.media, audio_in_per_s=0.0, documents_per_s=0.0))
    line = media_line(only, P, 120)
    assert line is not None
    assert "audio in" not in line.plain and "documents" not in line.plain, line.plain


async def test_console_at_80x24_shows_the_line_unclipped() -> None:
    src = StaticSource(media_snapshot())
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        panel = app.main.query_one("#models-tab", ModelsPanel)  # 80x24 is the compact layout
        lines = [line.plain for line in panel._lines]
        shown = [t for t in lines if "RTF" in t]
        assert shown and "img" in shown[0] and "docs" in shown[0], lines
        assert len(shown[0]) <= panel.content_region.width, (shown[0], panel.content_region.width)


def test_media_80x24(snap_compare: Any) -> None:
    app = ConsoleApp(StaticSource(media_snapshot()), theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(80, 24))
