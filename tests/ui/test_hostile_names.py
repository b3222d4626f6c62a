"""A workload whose model names carry terminal commands (an OSC 52 clipboard write, a clear
screen) and Textual markup: the live console shows them as text. Nothing it draws holds a
control character, `[bold]` shows as written (in the tables, the routing editor, a change's
words and a refusal's toast), over a real engine on the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Label

from oxconsole.engine.commands import SetWeight
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.screens import RoutingEditor
from tests.support import until
from tests.support.ui import EngineSource, open_routing, quick_idle
from tests.support.workloads import write_workload

EVIL = "evil\x1b]52;c;SGVsbG8=\x07\x1b[2J[bold]m[/bold]"
SHOWN = "evil\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J[bold]m[/bold]"

WORKLOAD = {
    "name": "hostile",
    "run.concurrency": 4,
    "output.save_text": False,
    "models": [{"name": EVIL}, {"name": "plain"}],
    "prompts": {"synthetic": {"count": 50, "input_tokens": 8, "output_tokens": 4}, "repeat": 400},
    "sim.models": {EVIL: {"ttft": "30ms", "tokens_per_s": 0, "error_rate": 0.3}},
    "sim.models.plain": {"ttft": "30ms", "tokens_per_s": 0},
}
"""tests/workloads/minimal.toml with a model named EVIL (30% errors) and a plain one: 20,000 prompts."""


@pytest.fixture(autouse=True)
def _quick_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_idle(monkeypatch)


def drawn(app: ConsoleApp) -> list[str]:
    """Every segment's text on screen (modal screens and toasts included), row by row."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def controls(rows: list[str]) -> list[str]:
    return [r for r in rows if any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in r)]


@pytest.mark.slow
async def test_the_console_shows_hostile_model_names_as_text(tmp_path: Path) -> None:
    path = write_workload("minimal", tmp_path, WORKLOAD, file="w.toml")
    src = EngineSource(path)
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await until(lambda: (s := src.latest()) is not None and s.counts.error > 0, 30, what="errors")
            await until(lambda: any(SHOWN in r for r in drawn(app)), 10, what="the name in the tables")
            rows = drawn(app)
            assert controls(rows) == [], controls(rows)

            editor = await open_routing(pilot)  # the editor's label: text, not markup
            assert isinstance(editor, RoutingEditor)
            rows = drawn(app)
            assert any(SHOWN[:20] in r for r in rows) and controls(rows) == [], rows  # cut to fit
            label = editor.query_one("#route-0 Label", Label)
            assert str(label.render()) == SHOWN, label.render()  # `[bold]` as written, not bold
            weight = editor.query_one("#weight-0", Input)
            weight.value = "2"
            await pilot.press("ctrl+s")
            await until(lambda: not isinstance(app.screen, RoutingEditor), 10, what="the editor to close")
            assert SetWeight(EVIL, 2.0) in src.sent, src.sent
            await until(
                lambda: any("weight" in c.get("what", "") for c in src.latest().changes),  # type: ignore[union-attr]
                10,
                what="the change",
            )
            app.send(SetWeight(EVIL, 1e12))  # refused: its toast names the model
            await until(lambda: any(SHOWN in n.message for n in app._notifications), 10, what="the toast")
            await pilot.pause(0.3)
            rows = drawn(app)
            assert controls(rows) == [], controls(rows)
            assert any("weight" in r and SHOWN[:20] in r for r in rows), rows  # the change's words
    finally:
        src.shutdown()
