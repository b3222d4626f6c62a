"""The console's burst figures: the last step's penalty and recovery, and the schedule's lag, in
the in-flight panel at 80x24 (Pilot and a screenshot), from snapshots that crossed JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.panels.in_flight import InFlightPanel
from tests.support.ui import StaticSource, fixed_snapshot

STEP = {
    "t": 30.0,
    "what": "concurrency",
    "from": 10,
    "to": 300,
    "by": "stage",
    "ttft_before_ms": 150.0,
    "ttft_after_ms": 1950.0,
    "penalty_ms": 1800.0,
    "recovery_s": None,
}
LAG = {"p50": 1.2, "p99": 48.0, "within_10ms": 0.82}


def burst_snapshot(step: dict[str, Any] | None = STEP, lag: dict[str, float] | None = LAG) -> Snapshot:
    snap = dataclasses.replace(fixed_snapshot(), bursts={"step": step, "lag": lag})
    return Snapshot.from_dict(snap.to_dict())  # what a console attached over the socket gets


def make_app(snap: Snapshot) -> ConsoleApp:
    return ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)


async def panel_text(app: ConsoleApp, size: tuple[int, int] = (80, 24)) -> list[str]:
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        panel = app.main.query_one(InFlightPanel)
        return [line.plain for line in panel._lines]


@pytest.mark.asyncio
async def test_the_last_step_shows_its_penalty_while_recovering_then_its_recovery() -> None:
    lines = await panel_text(make_app(burst_snapshot()))
    step = next((x for x in lines if x.startswith("step")), None)
    assert step is not None and "10→300 @30s +1.8s recovering" in step, lines
    lag = next(x for x in lines if x.startswith("sched"))
    assert "p50 1.2ms p99 48.0ms 82% on" in lag, lines
    assert lines[-1].startswith("bound"), f"the bound line gave way: {lines}"
    assert max(len(x) for x in lines) <= 80, lines
    done = await panel_text(make_app(burst_snapshot({**STEP, "recovery_s": 12.3}, None)))
    assert any("+1.8s ok in 12s" in x for x in done), done
    assert not any(x.startswith("sched") for x in done), done
    calm = await panel_text(make_app(burst_snapshot({**STEP, "penalty_ms": 3.0}, None)))
    assert any(x.startswith("step") and "no penalty" in x for x in calm), calm


@pytest.mark.asyncio
async def test_a_run_without_steps_or_schedule_shows_neither() -> None:
    lines = await panel_text(make_app(fixed_snapshot()))
    assert not any(x.startswith(("step", "sched")) for x in lines), lines


def test_burst_figures_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(burst_snapshot()), terminal_size=(80, 24))


RATE = {"what": "rate", "from": 20, "to": 80, "t": 1234.0, "penalty_ms": 12345.0}
BIG_STEP = {**STEP, "t": 50.0, "from": 120, "to": 400, "penalty_ms": 999.0, "recovery_s": 11.2}
"""The step examples/burst.toml makes: its line was clipped at 80 columns ("ok in 1…")."""


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("step", "tail"),
    [
        (BIG_STEP, "+999ms ok 11s"),
        ({**BIG_STEP, "recovery_s": None}, "+999ms recovering"),
        ({**BIG_STEP, **RATE}, "+12.3s ok 11s"),
    ],
)
async def test_a_large_steps_line_fits_the_panel_at_80x24(step: dict[str, Any], tail: str) -> None:
    app = make_app(burst_snapshot(step, None))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        panel = app.main.query_one(InFlightPanel)
        room = panel.content_region.width
        lines = [line.plain for line in panel._lines]
    line = next((x for x in lines if x.startswith("step")), None)
    assert line is not None, lines
    assert "…" not in line and line.endswith(tail), f"clipped or changed at {room} columns: {line!r}"
    assert len(line) <= room, (room, line)


def test_a_large_step_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(burst_snapshot(BIG_STEP, LAG)), terminal_size=(80, 24))
