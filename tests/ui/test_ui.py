"""Console behaviour without an engine: cadence, layout, stop/detach, themes, palette, tuned files.

A `StaticSource` stands in for the run (its snapshot is set by hand), so these tests are fast and
exact; `test_ui_engine.py` drives the same keys against a real engine. The app's own timer is set
to its slowest (one tick in 5 s) where cadence matters, and the test calls `tick()` itself: what
a tick does is checked, not how punctual a timer is on a busy machine.
"""

from __future__ import annotations

import dataclasses
import filecmp
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.theme import Theme
from textual.widgets import Label

import oxconsole.ui.app as app_module
from oxconsole.engine.commands import Command, EnableModel, SetConcurrency, SetRate, Stop
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.reports.tuned import save_tuned, tuned_path
from oxconsole.ui.app import ConsoleApp, MainScreen
from oxconsole.ui.charts import bar_chart, sparkline
from oxconsole.ui.keysteps import PENDING_S, Pending, concurrency_step, rate_step
from oxconsole.ui.lines import Line, Palette, join_lines
from oxconsole.ui.numbers import fmt_change, round_sig
from oxconsole.ui.panels.errors import ErrorsPanel
from oxconsole.ui.panels.header import HeaderPanel, header_lines
from oxconsole.ui.panels.in_flight import bottleneck, in_flight_lines
from oxconsole.ui.panels.latency import LatencyPanel, latency_lines
from oxconsole.ui.panels.throughput import throughput_lines
from oxconsole.ui.screens import KEYS, EnabledBox, HelpScreen, RoutingEditor
from oxconsole.ui.theming import PACKAGE_THEMES, load_theme_file, load_themes
from oxconsole.workload import WorkloadError, load_workload
from tests.support import until
from tests.support.ui import StaticSource, fixed_snapshot, open_routing

ROOT = Path(__file__).resolve().parents[2]
SNAP = fixed_snapshot()


def with_gauges(s: Snapshot, **kw: object) -> Snapshot:
    return dataclasses.replace(s, gauges=dataclasses.replace(s.gauges, **kw))  # type: ignore[arg-type]


def app_for(src: StaticSource, **kw: object) -> ConsoleApp:
    """The app over `src`, its pending values on a clock that stands still: two presses in a test
    are always "quick" (PENDING_S of wall clock passed between them on a loaded machine)."""
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False, **kw)  # type: ignore[arg-type]
    app.pending = Pending(clock=lambda: 0.0)
    return app


SLOWEST = 0.2
"""The lowest refresh the app takes (Hz): its timer stays out of the way while the test ticks."""


async def tick(app: ConsoleApp, pilot: Pilot[Any], n: int = 1) -> None:
    """What the refresh timer does, n times, then let the app draw."""
    for _ in range(n):
        app.tick()
    await pilot.pause()


# -- cadence and layout --------------------------------------------------------------------------


async def test_renders_only_when_the_snapshot_changes() -> None:
    src = StaticSource(SNAP)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test(size=(160, 48)) as pilot:
        await tick(app, pilot, 5)
        assert app.ticks >= 6  # the one on mount, and these
        assert app.renders == 1  # the same snapshot object: nothing re-rendered
        src.snapshot = with_gauges(SNAP, in_flight=3)
        await tick(app, pilot)
        assert app.renders == 2
        assert src.started


async def test_the_refresh_timer_ticks() -> None:
    app = app_for(StaticSource(SNAP), refresh=50.0)
    async with app.run_test(size=(80, 24)):
        ticks = app.ticks
        await until(lambda: app.ticks >= ticks + 3, timeout=30, what="three timer ticks")


async def test_window_panels_take_every_other_snapshot_but_always_the_last() -> None:
    """Histograms, per-model rows and the phase redraw at half the refresh rate (console CPU);
    the header and in-flight figures at every tick; the final snapshot reaches every panel."""
    from oxconsole.ui.panels.in_flight import InFlightPanel
    from oxconsole.ui.panels.models import ModelsPanel

    src = StaticSource(SNAP)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        main = pilot.app.screen
        inflight, latency, models = (main.query_one(c) for c in (InFlightPanel, LatencyPanel, ModelsPanel))
        took = {"inflight": 0, "latency": 0, "models": 0}

        async def show(snap: Snapshot) -> None:
            before = app.renders
            src.snapshot = snap
            await tick(app, pilot)
            assert app.renders == before + 1

        for n in range(1, 7):
            snap = with_gauges(SNAP, in_flight=n)
            await show(snap)
            took["inflight"] += inflight.snapshot is snap
            took["latency"] += latency.snapshot is snap
            took["models"] += models.snapshot is snap
        assert took["inflight"] == 6
        assert took["latency"] == took["models"] == 3
        done = with_gauges(SNAP, in_flight=0, state="done")
        await show(done)
        assert inflight.snapshot is done and latency.snapshot is done and models.snapshot is done


async def test_layout_wide_and_compact() -> None:
    async with app_for(StaticSource(SNAP)).run_test(size=(160, 48)) as pilot:
        main = pilot.app.screen
        assert isinstance(main, MainScreen) and not main.compact
        assert main.query_one("#wide").display and not main.query_one("#tabs").display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert main.compact
        assert main.query_one("#tabs").display and not main.query_one("#wide").display
        # t cycles tabs; h shows the latency tab, then cycles the metric
        await pilot.press("t")
        assert main.query_one("#tabs").active == "tab-latency"
        await pilot.press("h")
        assert main.query_one("#latency-tab", LatencyPanel).metric == "itl_ms"
        await pilot.press("r")
        assert main.query_one("#latency-tab", LatencyPanel).scope == "run"


@pytest.mark.slow
async def test_every_contract_key_is_bound_and_in_the_help_and_the_palette() -> None:
    app = app_for(StaticSource(SNAP))
    async with app.run_test(size=(120, 40)) as pilot:
        keys = {b.key_display or b.key for b in MainScreen.BINDINGS if not isinstance(b, tuple)}
        for k in ("+", "-", "]", "[", "0", "w", "space", "s", "d", "q", "?"):
            assert k in keys
            assert any(k in row[0] for row in KEYS), [row for row in KEYS][:5]
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for word in ("Concurrency up", "Concurrency down", "Rate up", "Rate down", "unlimited", "Routing",
                     "Pause", "Save tuned", "Detach", "Stop", "Keys"):  # fmt: skip
            assert any(word in t for t in titles), word
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("w")
        assert isinstance(app.screen, RoutingEditor)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_concurrency_steps_and_floor() -> None:
    src = StaticSource(with_gauges(SNAP, concurrency=2))
    async with app_for(src).run_test() as pilot:
        await pilot.press("minus", "minus", "minus")
        assert [c for c in src.sent if isinstance(c, SetConcurrency)] == [SetConcurrency(1)]
        await pilot.press("plus")
        assert src.sent[-1] == SetConcurrency(2)


async def test_rate_from_unlimited_uses_achieved_rate() -> None:
    src = StaticSource(with_gauges(SNAP, rate=0.0, achieved_rate=40.0))
    async with app_for(src).run_test() as pilot:
        await pilot.press("right_square_bracket")
        assert src.sent[-1] == SetRate(44.0)
        await pilot.press("0")  # 44 -> unlimited, remembered
        assert src.sent[-1] == SetRate(0.0)
        await pilot.press("0")
        assert src.sent[-1] == SetRate(44.0)


async def test_routing_editor_refuses_no_live_model() -> None:
    src = StaticSource(SNAP)
    async with app_for(src).run_test(size=(100, 30)) as pilot:
        editor = await open_routing(pilot)
        for i in range(3):
            editor.query_one(f"#weight-{i}").value = "0"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        assert isinstance(pilot.app.screen, RoutingEditor)  # still open, with the reason
        assert "at least one model" in str(editor.query_one("#routing-error").render())
        assert src.sent == []


async def test_stop_drains_then_quits_and_second_q_cancels() -> None:
    src = StaticSource(SNAP)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test() as pilot:
        await pilot.press("q")
        assert src.sent == [Stop()]
        await tick(app, pilot, 3)
        assert app.return_value is None  # draining: still there
        assert app._status[0] == "draining"
        await pilot.press("q")
        assert src.sent == [Stop(), Stop(cancel=True)]
        src.is_finished = True
        await tick(app, pilot)
    assert app.return_value == "quit"
    assert src.closed


async def test_a_lost_connection_is_shown_and_q_leaves_at_once() -> None:
    src = StaticSource(SNAP)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        src.is_connected = False
        await tick(app, pilot)
        header = app.main.query_one(HeaderPanel)
        assert app._status[:2] == (
            "disconnected",
            "lost the connection to the run: q or d leaves the console",
        )
        assert "disconnected" in header._lines[0].plain + header._lines[2].plain
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == "quit"
    assert src.sent == []  # no Stop into a dead socket, no draining wait


class BrokenSource(StaticSource):
    """A source whose socket is gone: every send raises."""

    def send(self, cmd: Command) -> None:
        raise BrokenPipeError(32, "Broken pipe")


async def test_a_failed_send_is_a_toast_not_a_crash() -> None:
    src = BrokenSource(with_gauges(SNAP, concurrency=50))
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("minus", "minus")
        await pilot.pause()
        toasts = [n for n in app._notifications if "could not send" in n.message]
        assert len(toasts) == 1  # one toast of its kind, replaced, not stacked
        assert "SetConcurrency" in toasts[0].message and "Broken pipe" in toasts[0].message
        assert toasts[0].severity == "error"
        # a send that failed changed nothing: the next press steps from the run's own value again
        assert app.is_running and app.sent == [SetConcurrency(45), SetConcurrency(45)]


async def test_detach_returns_detach_without_stopping() -> None:
    src = StaticSource(SNAP)
    app = app_for(src)
    async with app.run_test() as pilot:
        await pilot.press("d")
        await pilot.pause()
    assert app.return_value == "detach"
    assert src.sent == []


async def test_save_without_a_workload_path_says_so() -> None:
    src = StaticSource(SNAP, workload_path=None)
    app = app_for(src)
    async with app.run_test() as pilot:
        await pilot.press("s")
        # the toast's own record (a busy machine may pass its 4 s on screen before this line)
        assert "not known" in app._toasts["save"].message


@pytest.mark.slow
async def test_confirmations_replace_each_other_in_the_status_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("oxconsole.ui.app.FLASH_S", 1.0)
    src = StaticSource(with_gauges(SNAP, concurrency=50))
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("minus", "minus")
        header = app.main.query_one(HeaderPanel)
        assert app.flash == ("concurrency 45 → 40", "info")
        assert header.flash == "concurrency 45 → 40"
        assert "concurrency 45 → 40" in header._lines[2].plain
        assert len(app._notifications) == 0  # nothing over the panels
        await until(lambda: app.flash == ("", ""), timeout=30, what="the flash to end")  # FLASH_S
        await pilot.pause()
        assert header.flash == ""
        assert "concurrency" not in header._lines[2].plain


async def test_keys_before_the_first_snapshot_give_one_toast() -> None:
    src = StaticSource(None)
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("minus", "minus", "plus", "w", "s")
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["no figures from the run yet"]
        assert src.sent == []


async def test_toasts_of_a_kind_replace_each_other() -> None:
    app = app_for(StaticSource(SNAP))
    async with app.run_test(size=(80, 24)) as pilot:
        app.toast("first", kind="save", severity="error")
        app.toast("second", kind="save", severity="error")
        app.toast("other")
        await pilot.pause()
        assert sorted(n.message for n in app._notifications) == ["other", "second"]


def many_models(n: int) -> Snapshot:
    gauge = SNAP.gauges.models["deepseek-v4-flash"]
    models = {
        f"model-{i:02d}": dataclasses.replace(gauge, weight=float(i % 3), enabled=i != 4) for i in range(n)
    }
    return with_gauges(SNAP, models=models)


@pytest.mark.slow
async def test_routing_editor_rows_are_one_line_and_scroll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "FLASH_S", 60.0)  # the confirmation must outlast a loaded machine
    src = StaticSource(many_models(20))
    app = app_for(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("w")
        editor = app.screen
        assert isinstance(editor, RoutingEditor)
        await until(
            lambda: editor.query("#route-19") and editor.query_one("#route-0").outer_size.height > 0,
            what="the editor's rows laid out",
        )
        assert app.focused is editor.query_one("#weight-0")
        rows = [editor.query_one(f"#route-{i}") for i in range(20)]
        assert {r.outer_size.height for r in rows} == {1}
        screen_h = 24
        for button in editor.query("Button"):
            assert 0 <= button.region.y < screen_h and button.region.height == 1
        # tab goes weight, switch, next row's weight ...
        await pilot.press("tab")
        assert app.focused is editor.query_one("#enabled-0")
        await pilot.press("tab")
        assert app.focused is editor.query_one("#weight-1")
        # ... to the last row, off screen at first: focusing it scrolls the rows to keep it in view
        editor.query_one("#weight-19").focus()
        await pilot.press("tab")
        await pilot.pause()
        last = editor.query_one("#enabled-19", EnabledBox)
        assert app.focused is last
        assert 0 <= last.region.y < screen_h and last.region.height == 1
        await pilot.press("space")  # model-19 off
        assert str(last.label) == "off"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(app.screen, RoutingEditor)
        assert src.sent == [EnableModel("model-19", False)]
        assert app.flash[0] == "routing: model-19 off"


@pytest.mark.slow
async def test_routing_editor_shows_shares_and_keeps_one_live_model() -> None:
    src = StaticSource(SNAP)
    async with app_for(src).run_test(size=(80, 24)) as pilot:
        editor = await open_routing(pilot)
        share = [str(editor.query_one(f"#share-{i}", Label).render()) for i in range(3)]
        assert share == ["60%", "40%", "0%"]  # deepseek-v3.2 is off in the fixture
        await pilot.press("1")  # weight 3 -> 1 (the input selects its text on focus)
        await pilot.pause()
        assert str(editor.query_one("#share-0", Label).render()) == "33%"
        await pilot.press("tab", "space", "tab", "tab", "space")  # both live models off
        await pilot.press("ctrl+s")
        assert isinstance(pilot.app.screen, RoutingEditor)
        assert "at least one model" in str(editor.query_one("#routing-error").render())
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, MainScreen)
        assert src.sent == []


async def test_a_panel_whose_figures_did_not_change_is_not_drawn() -> None:
    src = StaticSource(SNAP)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        errors = app.main.query_one("#errors", ErrorsPanel)
        header = app.main.query_one("#header", HeaderPanel)
        draws, header_draws, paints, renders = errors.draws, header.draws, errors.paints, app.renders
        src.snapshot = with_gauges(SNAP, in_flight=3)  # errors unchanged
        await tick(app, pilot, 2)
        assert app.renders == renders + 1
        assert errors.snapshot is src.snapshot  # it was given the new snapshot ...
        assert errors.draws == draws and errors.paints == paints  # ... and drew nothing
        assert header.draws > header_draws


# -- themes --------------------------------------------------------------------------------------


def test_root_themes_are_the_packaged_themes() -> None:
    names = sorted(p.name for p in (ROOT / "themes").glob("*.toml"))
    assert names == sorted(p.name for p in PACKAGE_THEMES.glob("*.toml"))
    assert {"dark.toml", "light.toml", "high-contrast.toml"} <= set(names)
    _match, mismatch, errors = filecmp.cmpfiles(ROOT / "themes", PACKAGE_THEMES, names, shallow=False)
    assert not mismatch and not errors, "copy themes/*.toml to oxconsole/ui/themes/"


def test_shipped_themes_load() -> None:
    themes, problems = load_themes([])
    assert problems == []
    by_name = {t.name: t for t in themes}
    assert {"dark", "light", "high-contrast"} <= set(by_name)
    assert isinstance(by_name["dark"], Theme) and by_name["dark"].dark
    assert not by_name["light"].dark


def test_user_themes_and_bad_files(tmp_path: Path) -> None:
    shutil.copy(PACKAGE_THEMES / "dark.toml", tmp_path / "mine.toml")
    text = (tmp_path / "mine.toml").read_text().replace('name = "dark"', 'name = "mine"')
    (tmp_path / "mine.toml").write_text(text)
    (tmp_path / "broken.toml").write_text('name = "broken"\nprimary = "not-a-colour"\n')
    (tmp_path / "syntax.toml").write_text("name = \n")
    themes, problems = load_themes([tmp_path])
    assert "mine" in {t.name for t in themes}
    assert "broken" not in {t.name for t in themes}
    assert sorted(p.path.name for p in problems) == ["broken.toml", "syntax.toml"]
    assert "primary" in next(p.message for p in problems if p.path.name == "broken.toml")
    with pytest.raises(ValueError, match="unknown key"):
        (tmp_path / "extra.toml").write_text('name = "x"\nprimary = "#000000"\nprimery = "#fff"\n')
        load_theme_file(tmp_path / "extra.toml")


async def test_unknown_theme_and_bad_theme_file_notify_once(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('name = "broken"\n')
    app = ConsoleApp(StaticSource(SNAP), theme="nope", theme_dirs=[tmp_path], cursor_blink=False)
    async with app.run_test() as pilot:
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert app.theme == "dark"
        assert sum("unknown theme 'nope'" in m for m in messages) == 1
        assert sum("broken.toml" in m for m in messages) == 1


async def test_theme_flag_selects_a_theme() -> None:
    app = ConsoleApp(StaticSource(SNAP), theme="high-contrast", theme_dirs=[], cursor_blink=False)
    async with app.run_test():
        assert app.theme == "high-contrast"


def test_css_uses_theme_variables_only() -> None:
    import re

    for path in (ROOT / "oxconsole" / "ui").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"#[0-9a-fA-F]{3,8}\b(?![\w-])\s*;", text), path


# -- tuned workloads -----------------------------------------------------------------------------


def demo_copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "examples" / "demo.toml", tmp_path / "demo.toml")
    shutil.copy(ROOT / "examples" / "prompts.jsonl", tmp_path / "prompts.jsonl")
    return tmp_path / "demo.toml"


def test_save_tuned_writes_live_values_and_keeps_key_order(tmp_path: Path) -> None:
    path = demo_copy(tmp_path)
    snap = with_gauges(SNAP, concurrency=57, rate=12.5)
    out = save_tuned(path, ["run.grace=3"], snap)
    assert out == tmp_path / "demo.tuned.toml" == tuned_path(path)
    w = load_workload(out)
    assert w.run.concurrency == 57
    assert w.run.rate == 12.5
    assert w.run.grace == 3  # the run's --set overrides are kept
    assert {m.name: m.weight for m in w.models} == {
        "deepseek-v4-flash": 3,
        "qwen-3-32b": 2,
        "deepseek-v3.2": 0,
    }
    with path.open("rb") as f:
        orig = tomllib.load(f)
    with out.open("rb") as f:
        new = tomllib.load(f)
    assert list(new) == list(orig)
    assert list(new["run"]) == list(orig["run"])
    assert [list(m) for m in new["models"]] == [list(m) for m in orig["models"]]
    assert "api_key" not in out.read_text()


def test_save_tuned_open_loop_unlimited_becomes_closed(tmp_path: Path) -> None:
    src = ROOT / "examples" / "synthetic.toml"
    shutil.copy(src, tmp_path / "synthetic.toml")
    snap = with_gauges(SNAP, rate=0.0, models={"synthetic-7b": SNAP.gauges.models["deepseek-v4-flash"]})
    out = save_tuned(tmp_path / "synthetic.toml", [], snap)
    w = load_workload(out)
    assert w.run.arrival == "closed" and w.run.rate == 0


def test_save_tuned_refuses_a_file_that_would_not_load(tmp_path: Path) -> None:
    path = demo_copy(tmp_path)
    off = {k: dataclasses.replace(v, enabled=False) for k, v in SNAP.gauges.models.items()}
    with pytest.raises(WorkloadError):
        save_tuned(path, [], with_gauges(SNAP, models=off))
    assert not (tmp_path / "demo.tuned.toml").exists()
    assert not list(tmp_path.glob("*.tmp"))


# -- pure rendering ------------------------------------------------------------------------------


def test_charts() -> None:
    assert sparkline([0, 1, 2, 4], 6) == "  " + " ▂▄█"
    rows = bar_chart([1, 2], 3, 2)
    assert rows == ["  █", " ██"]
    assert round_sig(21.9615) == 22.0
    assert fmt_change({"what": "rate", "from": 0, "to": 20}) == "rate ∞→20.0/s"
    assert fmt_change({"what": "enabled", "from": True, "to": False, "model": "m"}) == "m off"


def test_key_steps() -> None:
    """What + / - and ] / [ set next, and how long a value just sent is the base for the next."""
    assert [concurrency_step(c, 1) for c in (1, 9, 10, 48)] == [2, 10, 11, 53]
    assert [concurrency_step(c, -1) for c in (1, 2, 10, 48)] == [1, 1, 9, 43]
    assert rate_step(20.0, 0.0, 1) == 22.0 and rate_step(20.0, 0.0, -1) == 18.0
    assert rate_step(0.0, 23.6, 1) == 26.0  # from unlimited: around the achieved rate
    assert rate_step(0.0, 0.0, -1) == 0.9  # nothing sent yet: around 1/s
    assert rate_step(0.1, 0.0, -1) == 0.1  # the floor
    now = [0.0]
    pending = Pending(clock=lambda: now[0])
    pending.remember("rate", 5.0)
    assert pending.base("rate", 3.0) == 5.0
    now[0] = PENDING_S
    assert pending.base("rate", 3.0) == 3.0 and pending.get("rate") is None


def test_bottleneck_warns_when_the_client_is_the_limit() -> None:
    lag = with_gauges(SNAP, loop_lag_ms=120.0)
    assert bottleneck(lag)[0] == "warn" and "loop lag" in bottleneck(lag)[1]
    slow = with_gauges(SNAP, rate=100.0, achieved_rate=40.0, in_flight=3, waiting_slot=0, waiting_bucket=0)
    assert bottleneck(slow)[0] == "warn"
    ok = with_gauges(SNAP, rate=0.0, waiting_slot=5)
    assert bottleneck(ok) == ("info", "concurrency (+ raises it)")
    swept = dataclasses.replace(ok, sweep={"key": "concurrency", "locked": ["concurrency", "auto"]})
    assert bottleneck(swept) == ("info", "concurrency (the sweep's)")  # + is refused: no hint to press it
    auto = with_gauges(SNAP, rate=0.0, waiting_slot=5, auto=True)
    assert bottleneck(auto) == ("info", "concurrency (auto's limit)")  # + would turn auto off


def test_panels_fit_their_width() -> None:
    p = Palette()
    for width in (36, 50, 76, 150):
        for text in (
            join_lines(in_flight_lines(SNAP, p, width, 8)),
            join_lines(throughput_lines(SNAP, p, width, 8)),
            join_lines(latency_lines(SNAP, p, width, 12, "latency_ms", "run")),
            join_lines(header_lines(SNAP, p, width, name="demo", state="running")),
        ):
            assert max(len(line) for line in text.plain.split("\n")) <= width


def test_line_draws_as_rich_text_would() -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(width=100, color_system="truecolor")

    def cells(t: Text) -> list[tuple[str, str]]:
        return [(ch, str(seg.style)) for seg in t.render(console) for ch in seg.text]

    for width in (1, 3, 7, 12, 40):
        line = Line("ab", style="bold").append("cdé", "#ff0000").append("→fgh", "italic #00ff00")
        text = Text.assemble(("ab", ""), ("cdé", "#ff0000"), ("→fgh", "italic #00ff00"), style="bold")
        text.truncate(width, overflow="ellipsis")
        line.truncate(width)
        assert line.plain == text.plain
        assert cells(line.to_text()) == cells(text), width
    wide = Line("模型模型", style="")
    wide.truncate(5)
    assert wide.cell_len == 5 and wide.plain.endswith("…")


async def test_engine_warnings_are_shown_once() -> None:
    """A warning the engine reports (e.g. the open-files limit) shows as one toast, not per frame."""
    import dataclasses

    warned = dataclasses.replace(
        SNAP,
        gauges=dataclasses.replace(SNAP.gauges, warnings=("run.concurrency = 20000 needs 20256 open files",)),
    )
    src = StaticSource(warned)
    app = app_for(src, refresh=SLOWEST)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.renders == 1
        src.snapshot = dataclasses.replace(warned, elapsed_s=warned.elapsed_s + 1)  # a new frame
        await tick(app, pilot)
        assert app.renders == 2  # the second frame was taken (with the same warning in it)
        texts = [str(n.message) for n in app._notifications]
        assert sum("open files" in t for t in texts) == 1
