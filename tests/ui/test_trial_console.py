"""What a new user met in the console at 80x24: `/` filters the models and errors tables by a
part of a name and escape clears it; `:` opens the command palette, where every action is found
by name, the tabs too; the header keeps the cost once goodput shows."""

from __future__ import annotations

import dataclasses

import pytest
from textual.command import CommandPalette
from textual.widgets import Input, TabbedContent

from oxconsole.metrics.goodput import Goodput
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.screens import FilterPrompt
from tests.support import until
from tests.support.ui import StaticSource, fixed_snapshot, quick_idle


@pytest.fixture(autouse=True)
def _quick_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_idle(monkeypatch)


def rows(app: ConsoleApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def drawn_snapshot(app: ConsoleApp, panel: str) -> Snapshot:
    """The snapshot a panel was last given to draw."""
    snap = getattr(app.main.query_one(f"#{panel}"), "snapshot", None)
    assert isinstance(snap, Snapshot), snap
    return snap


def model_rows(app: ConsoleApp) -> list[str]:
    """The models tab's rows (compact layout), each model's name first."""
    names = {m.name for m in fixed_snapshot().models}
    return [r.strip() for r in rows(app) if r.strip().split(" ")[0] in names]


async def test_slash_filters_models_and_errors_and_escape_clears_it() -> None:
    snap = fixed_snapshot()
    assert len(snap.models) == 3 and len(snap.errors) >= 2, (snap.models, snap.errors)
    app = ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: len(model_rows(app)) == 3, 10, what="the models tab")
        await pilot.press("slash")
        await until(lambda: isinstance(app.focused, Input), 10, what="the filter line")
        for key in "QWEN":  # any case
            await pilot.press(key)
        await until(lambda: [m.name for m in drawn_snapshot(app, "models-tab").models] == ["qwen-3-32b"], 10)
        await pilot.press("enter")  # keeps the filter
        await until(lambda: not isinstance(app.screen, FilterPrompt), 10, what="the line to close")
        await until(lambda: len(model_rows(app)) == 1, 10, what="the models filtered")
        assert model_rows(app)[0].startswith("qwen-3-32b"), model_rows(app)
        tabs = app.main.query_one(TabbedContent)
        assert str(tabs.get_tab("tab-models").label) == "models /QWEN", tabs.get_tab("tab-models").label
        assert drawn_snapshot(app, "errors-tab").errors == {}, "no error class holds qwen"
        await pilot.press("escape")  # clears it
        await until(lambda: len(model_rows(app)) == 3, 10, what="every model again")
        assert app.flash[0] == "filter cleared" and str(tabs.get_tab("tab-models").label) == "models"

        await pilot.press("slash")  # an error class by a part of its name
        await until(lambda: isinstance(app.focused, Input), 10, what="the filter line")
        app.screen.query_one(Input).value = "time"
        await pilot.press("enter")
        await until(lambda: not isinstance(app.screen, FilterPrompt), 10, what="the line to close")
        errors = drawn_snapshot(app, "errors-tab").errors
        assert set(errors) == {c for c in snap.errors if "time" in c} and errors, (set(errors), snap.errors)


async def test_colon_opens_the_palette_and_every_tab_is_found_by_name() -> None:
    app = ConsoleApp(StaticSource(fixed_snapshot()), theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.last is not None, 10, what="the first figures")
        await pilot.press("colon")
        await until(lambda: isinstance(app.screen, CommandPalette), 10, what="the palette")
        for key in "tab: errors":
            await pilot.press("space" if key == " " else key)
        await until(lambda: "Tab: errors" in " ".join(rows(app)), 10, what="the tab's action")
        await pilot.press("enter")
        await until(lambda: app.main.query_one(TabbedContent).active == "tab-errors", 10, what="errors")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for name in ("models", "latency", "errors", "phase", "cost", "points", "cascade"):
            assert f"Tab: {name}" in titles, titles
        assert {"Filter models and errors (/)", "Next tab (t)"} <= titles, titles
        await app.run_action("app.show_tab('cost')")  # no plans in this run: said, not shown
        assert app.flash == ("this run has no cost view", "warn"), app.flash


async def test_the_header_keeps_the_cost_beside_goodput_at_80_columns() -> None:
    snap = dataclasses.replace(fixed_snapshot(), goodput=Goodput(0.9, 1890, 2000, 20.0, 21.0))
    app = ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)):
        await until(lambda: "good" in rows(app)[0], 10, what="the header")
        title = rows(app)[0]
        assert "good 94.5%" in title and "cost 0.4562" in title, title
        assert "…" not in title, title
