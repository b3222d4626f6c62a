"""Settled or settling, beside the phase at 80x24: in the status line (always on screen) and at the
head of the phase tab; against a real engine, a change starts its phase settling and the phase
then settles. And how it looks (a snapshot of the phase tab, settled)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.commands import SetConcurrency
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.panels.header import HeaderPanel
from oxconsole.ui.panels.phase import PhasePanel
from tests.support import until
from tests.support.ui import EngineSource, StaticSource, fixed_snapshot, quick_idle, write_sim_workload

SETTLING = fixed_snapshot(seconds=95)
"""Phase 2 is 25 s old: its requests/s is known to ±13%."""
SETTLED = fixed_snapshot(seconds=150)
"""Phase 2 is 80 s old: every judged figure within ±5%."""


def status(app: ConsoleApp) -> str:
    return app.main.query_one(HeaderPanel)._lines[2].plain


def phase_head(app: ConsoleApp) -> str:
    return app.main.query_one("#phase-tab", PhasePanel)._lines[0].plain


async def test_the_status_line_and_the_phase_tab_say_it_at_80x24() -> None:
    src = StaticSource(SETTLING)
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t", "t", "t")  # models -> latency -> errors -> phase
        await until(lambda: "settling ±13%" in phase_head(app), what="the phase tab to say settling")
        line = status(app)
        assert re.match(r" phase 2 settling ±13% since 1:10: ", line) and len(line) <= 80, line
        assert line.rstrip().endswith("tok/s"), line  # the rates stay; the settings give way
        src.snapshot = SETTLED
        await until(lambda: "settled ±" in status(app), what="the status line to say settled")
        assert re.match(r" phase 2 settled ±[1-5]% since 1:10", status(app)), status(app)
        await until(lambda: "settled ±" in phase_head(app), what="the phase tab to say settled")
        assert phase_head(app).startswith("phase 2 settled ±"), phase_head(app)


async def test_an_older_engine_says_nothing() -> None:
    import dataclasses

    app = ConsoleApp(
        StaticSource(dataclasses.replace(SETTLING, settle=None)), theme_dirs=[], cursor_blink=False
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await until(lambda: "phase 2" in status(app), what="the status line")
        assert "settl" not in status(app), status(app)


def test_phase_tab_settled_80x24(snap_compare: Any) -> None:
    app = ConsoleApp(StaticSource(SETTLED), theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(80, 24), press=["t", "t", "t"])


@pytest.fixture
def engine_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineSource]:
    quick_idle(monkeypatch)
    # ±20%: a loaded machine's own hiccups move a client's throughput by more than ±5% a second
    src = EngineSource(
        write_sim_workload(tmp_path, concurrency=8, repeat=4000), ("run.settle_tolerance=0.2",)
    )
    yield src
    src.shutdown()


@pytest.mark.slow
async def test_a_change_starts_its_phase_settling_and_it_settles(engine_source: EngineSource) -> None:
    """Real engine and simulator: the first phase settles (10 s at least: ten one-second batches of
    its requests/s), `-` starts phase 1 settling, and phase 1 settles in turn."""
    src = engine_source
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: "phase 0 settled ±" in status(app), timeout=90, what="phase 0 to settle")
        await pilot.press("minus")
        assert isinstance(src.sent[-1], SetConcurrency), src.sent
        await until(lambda: "phase 1 settling" in status(app), timeout=30, what="phase 1 to start settling")
        await until(lambda: "phase 1 settled ±" in status(app), timeout=90, what="phase 1 to settle")
        s = src.latest()
        assert s is not None and s.settle is not None, s
        assert s.settle["phase"]["settled_at_s"] >= 10.0, s.settle  # ten whole seconds of batches
