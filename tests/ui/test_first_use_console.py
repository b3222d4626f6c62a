"""What a new user hit first, in the console (issue 10, points 2, 9 and the small ones of 10).

Driven with Textual's Pilot: a run that fails fast stays on screen with the errors tab showing why
(against a real engine and the simulator without /v1, and on a run already over before the console
connected); keys typed while the console started are applied once; keys that would change a run
that has ended say so; `s` says what it saved; the palette lists "Keys" once; a run bounded by
time alone shows its time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.cli.console import EndedEarly, console_session
from oxconsole.control import SocketSource
from oxconsole.engine.commands import SetConcurrency
from oxconsole.metrics import Collector, Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.panels.errors import ErrorsPanel
from oxconsole.ui.panels.header import HeaderPanel
from oxconsole.ui.screens import RoutingEditor
from tests.support.firstuse import HINT, no_v1, rec
from tests.support.ui import EngineSource, StaticSource, fixed_snapshot

ROOT = Path(__file__).resolve().parents[2]
SNAP = fixed_snapshot()


def app_for(src: object, **kw: object) -> ConsoleApp:
    return ConsoleApp(src, theme_dirs=[], cursor_blink=False, **kw)  # type: ignore[arg-type]


async def wait_for(pred: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def shown(app: ConsoleApp, panel_id: str) -> str:
    """A panel's lines as one string of words (wrapped lines joined)."""
    return " ".join(" ".join(x.plain for x in app.main.query_one(f"#{panel_id}", ErrorsPanel)._lines).split())


# -- point 2: a run that fails fast shows why -------------------------------------------------------


async def test_console_stays_on_a_run_that_failed_fast_with_the_errors_showing_why(
    tmp_path: Path, sim_url: str
) -> None:
    w = no_v1(tmp_path, tmp_path / "results.jsonl", sim_url[: -len("/v1")])
    src = EngineSource(w)
    app = app_for(src, refresh=20.0)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(lambda: src.finished and app.last is not None and app.last.gauges.state == "done")
            await pilot.pause(0.3)
            assert app.return_value is None  # still showing the run, not gone to the summary
            assert app.main.query_one("#tabs").active == "tab-errors"  # type: ignore[attr-defined]
            header = app.main.query_one(HeaderPanel)
            assert header.state == "done"
            assert "every request failed" in header._lines[2].plain and "q exits" in header._lines[2].plain
            errors = shown(app, "errors-tab")
            assert "http_404 12" in errors and HINT in errors
            assert not any(
                x.plain.endswith("…") for x in app.main.query_one("#errors-tab", ErrorsPanel)._lines
            )
            await pilot.press("q")
            await pilot.pause(0.2)
        assert app.return_value == "quit"
    finally:
        src.shutdown()


def _ended_run(folder: Path) -> Path:
    """A journal and, written after it, the summary of a run whose every request got a 404."""
    c = Collector(["m"], started_at=1000.0, clock=lambda: 0.4)
    detail = f"HTTP 404: Error code: 404 (is base_url 'http://127.0.0.1:9' {HINT})"
    for i in range(12):
        c.record(rec(i, "http_404", detail))
    results = folder / "results.jsonl"
    results.write_bytes(orjson.dumps(rec(0, "http_404", detail).to_json_dict()) + b"\n")
    time.sleep(0.01)
    (folder / "summary.json").write_bytes(orjson.dumps(c.summary("bad", 0.4)))
    return results


async def test_console_on_a_run_over_before_it_connected_shows_how_it_ended(tmp_path: Path) -> None:
    results = _ended_run(tmp_path)
    gone = SocketSource(tmp_path / "gone.sock", name="bad", results_path=str(results))
    app = app_for(EndedEarly(gone))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert app.main.query_one("#tabs").active == "tab-errors"  # type: ignore[attr-defined]
        header = app.main.query_one(HeaderPanel)
        assert header.state == "done" and "every request failed" in header._lines[2].plain
        assert "err 12 (100%)" in header._lines[0].plain
        assert HINT in shown(app, "errors-tab")
        await pilot.press("plus")
        assert "the run has ended" in app.flash[0]
        await pilot.press("s")
        assert any("never reached this console" in n.message for n in app._notifications), [
            n for n in app._notifications
        ][:5]
        await pilot.press("q")
        await pilot.pause(0.1)
    assert app.return_value == "quit"


async def test_console_on_a_run_gone_without_a_summary_says_so_and_q_leaves(tmp_path: Path) -> None:
    gone = SocketSource(tmp_path / "gone.sock", name="bad", results_path=str(tmp_path / "results.jsonl"))
    app = app_for(EndedEarly(gone))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.1)
        assert any("did not answer" in n.message for n in app._notifications), [
            n for n in app._notifications
        ][:5]
        await pilot.press("q")
        await pilot.pause(0.1)
    assert app.return_value == "quit"


def test_a_session_on_a_run_already_over_opens_the_console_then_prints_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = SocketSource(tmp_path / "gone.sock", name="bad", results_path=str(_ended_run(tmp_path)))
    opened: list[object] = []

    def console(src: object, **kw: object) -> str:
        opened.append(src)
        return "quit"

    assert console_session(gone, console, theme=None, refresh=4.0) == 1  # every request failed
    assert len(opened) == 1 and isinstance(opened[0], EndedEarly)  # not "does not answer"
    assert HINT in " ".join(capsys.readouterr().out.split())


def test_snapshot_from_a_summary_carries_counts_models_and_errors(tmp_path: Path) -> None:
    summary = orjson.loads((_ended_run(tmp_path).parent / "summary.json").read_bytes())
    s = Snapshot.from_summary(summary)
    assert (s.gauges.state, s.counts.total, s.counts.error) == ("done", 12, 12)
    assert s.errors["http_404"].count == 12 and HINT in s.error_details["http_404"]
    assert [m.name for m in s.models] == ["m"] and s.models[0].gauge is None
    assert s.gauges.concurrency == 0 and not s.gauges.models  # the live settings are not known


# -- point 10: keys typed while starting, keys after the end, the palette, time progress ----------


async def test_keys_typed_while_the_console_started_are_applied_once_and_said() -> None:
    src = StaticSource(SNAP)  # concurrency 48
    app = app_for(src, typeahead="++x")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert src.sent == [SetConcurrency(53), SetConcurrency(58)]
        text, level = app.flash
        assert text.startswith("typed while starting: + + (1 other key ignored)")
        assert text.endswith("concurrency 53 → 58") and level == "info"
        await pilot.pause(0.3)
        assert src.sent == [SetConcurrency(53), SetConcurrency(58)]  # once


async def test_keys_that_change_a_run_that_has_ended_say_so_and_send_nothing() -> None:
    src = StaticSource(SNAP)
    src.is_finished = True
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        for key in ("plus", "minus", "right_square_bracket", "0", "space", "w"):
            await pilot.press(key)
            assert app.flash == (
                "the run has ended: nothing to change · q exits and prints the summary",
                "warn",
            )
        assert src.sent == []
        assert not isinstance(app.screen, RoutingEditor)


async def test_the_palette_lists_keys_once() -> None:
    app = app_for(StaticSource(SNAP))
    async with app.run_test(size=(80, 24)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert [t for t in titles if "Keys" in t] == ["Keys and help (?)"]


async def test_a_run_bounded_by_time_alone_shows_its_time(tmp_path: Path) -> None:
    w = no_v1(tmp_path, tmp_path / "r.jsonl", "sim", {"run.duration": "190s"})
    snap = dataclasses.replace(SNAP, gauges=dataclasses.replace(SNAP.gauges, total_expected=None))
    app = app_for(StaticSource(snap, workload_path=str(w)))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.1)
        line = app.main.query_one(HeaderPanel)._lines[1].plain
        assert "1:35 of 3:10" in line and "finished" in line


# -- point 9: `s` says what it saved ------------------------------------------------------------------


async def test_save_says_which_keys_changed_and_which_overrides_were_baked_in(tmp_path: Path) -> None:
    for name in ("demo.toml", "prompts.jsonl"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    src = StaticSource(SNAP, workload_path=str(tmp_path / "demo.toml"))
    src.overrides = ("prompts.repeat=3",)
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("s")
        assert app.flash[0].endswith("demo.tuned.toml: 4 changes · --set baked in (1)")
        [note] = [n for n in app._notifications if n.title.startswith("saved")]
        assert note.message.splitlines() == [
            "run.concurrency 32 → 48",
            "models.2.weight 1 → 0 (deepseek-v3.2 off)",
            'routing.rules.0.fallback ["deepseek-v3.2"] → [] (tag classify)',
            'routing.rules.1.models ["deepseek-v4-flash", "deepseek-v3.2"] → ["deepseek-v4-flash"]'
            " (tag summarize)",
            "baked in: --set prompts.repeat=3",
        ]


# -- how it looks -----------------------------------------------------------------------------------


def test_failed_run_80x24(snap_compare: Any, tmp_path: Path) -> None:
    """A run whose every request got a 404, over before the console connected: the errors tab with
    the hint, the status line saying what to press."""
    gone = SocketSource(tmp_path / "gone.sock", name="bad", results_path=str(_ended_run(tmp_path)))
    assert snap_compare(app_for(EndedEarly(gone)), terminal_size=(80, 24))
