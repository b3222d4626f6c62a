"""The console says why a run refused a command (`a` without `[slo]`, over the run's socket),
shows `[slo]` as text in the help screen and the palette, keeps `q stop` and `? help` in the
footer at 60x20, and freezes the figures once the run has ended."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from oxconsole.control import LocalSource, RunInfo, SocketSource
from oxconsole.engine.commands import Stop
from oxconsole.engine.runner import Engine
from oxconsole.ui.app import ConsoleApp
from oxconsole.workload import load_workload
from tests.support import engine_for
from tests.support.ui import StaticSource, fixed_snapshot, write_sim_workload


def app_for(src: object) -> ConsoleApp:
    return ConsoleApp(src, theme_dirs=[], cursor_blink=False)  # type: ignore[arg-type]


async def wait_for(pred: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def screen_rows(app: ConsoleApp) -> list[str]:
    """What the terminal shows, row by row."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def test_a_refused_auto_over_the_socket_says_why(tmp_path: Path) -> None:
    path = write_sim_workload(tmp_path, repeat=4000)  # no [slo]: the run cannot turn auto on

    def factory() -> Engine:
        return engine_for(load_workload(path), publish_interval=0.05)

    local = LocalSource(
        factory, serve=RunInfo(name="r", workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None and local.engine is not None
    src = SocketSource(local.server_socket, hz=10)
    app = app_for(src)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(lambda: app.last is not None, what="the first snapshot")
            await pilot.press("a")
            await wait_for(
                lambda: any("[slo]" in n.message for n in app._notifications), what="the refusal's toast"
            )
            toast = next(n for n in app._notifications if "[slo]" in n.message)
            assert toast.title == "refused" and toast.severity == "error", toast
            assert app.flash[0].startswith("refused:") and "[slo]" in app.flash[0], app.flash
            assert isinstance(local.engine, Engine) and local.engine.live.auto is False
    finally:
        local.engine.submit(Stop(cancel=True))
        await asyncio.to_thread(local.wait_done, 30)


async def test_help_and_palette_show_slo_as_text() -> None:
    app = app_for(StaticSource(fixed_snapshot()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        helps = [c.help for c in app.get_system_commands(app.screen) if c.title.startswith("Auto")]
        from textual.content import Content

        assert helps and all("[slo]" in Content.from_markup(h).plain for h in helps), helps
        await pilot.press("question_mark")
        await pilot.pause()
        text = "\n".join(screen_rows(app))
        assert "meeting [slo]" in text, text


async def test_the_footer_keeps_stop_and_help_at_60_columns() -> None:
    for size in ((60, 20), (80, 24)):
        app = app_for(StaticSource(fixed_snapshot()))
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.pause()
            footer = screen_rows(app)[-1]
            assert "q stop" in footer and "? help" in footer, (size, footer)
            if size[0] >= 80:
                assert "d detach" in footer and "s save" in footer, footer


async def test_the_figures_freeze_at_the_end() -> None:
    done = fixed_snapshot(state="done")
    src = StaticSource(done)
    app = app_for(src)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(lambda: app.last is done, what="the final snapshot")
        later = dataclasses.replace(done, req_per_s_10s=done.req_per_s_10s / 4, elapsed_s=done.elapsed_s + 5)
        src.snapshot = later
        for _ in range(3):
            app.tick()
            await pilot.pause()
        assert app.last is done, (app.last.req_per_s_10s if app.last else None, done.req_per_s_10s)


async def test_a_without_slo_is_refused_at_80x24_through_the_console_the_cli_opens(tmp_path: Path) -> None:
    """The console as `oxconsole W.toml` and `oxconsole attach` open it: the run's `SocketSource`
    inside `EndedEarly`. `a` on a run without [slo] says why at once, in the status line and a
    notification, and claims nothing (no "auto concurrency on", nothing sent); a command the run
    itself refuses (an unknown model) comes back through that wrapper and is said too."""
    from oxconsole.cli.console import EndedEarly
    from oxconsole.engine.commands import SetAuto, SetWeight

    path = write_sim_workload(tmp_path, repeat=4000)

    def factory() -> Engine:
        return engine_for(load_workload(path), publish_interval=0.05)

    local = LocalSource(
        factory, serve=RunInfo(name="r", workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None and local.engine is not None
    app = app_for(EndedEarly(SocketSource(local.server_socket, hz=10)))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(lambda: app.last is not None, what="the first snapshot")
            await pilot.press("a")
            assert app.flash[0].startswith("refused: set_auto: auto concurrency needs an [slo]"), app.flash
            assert "auto concurrency on" not in " ".join(screen_rows(app)), screen_rows(app)
            assert not any(isinstance(c, SetAuto) for c in app.sent), app.sent
            toast = next(n for n in app._notifications if "[slo]" in n.message)
            assert toast.title == "refused" and toast.severity == "error", toast
            assert "refused: set_auto" in screen_rows(app)[2], screen_rows(app)[2]  # the status line

            app.send(SetWeight("no-such-model", 2.0))  # the run refuses it: said through EndedEarly
            await wait_for(
                lambda: any("no-such-model" in n.message for n in app._notifications), what="the run's answer"
            )
            assert app.flash[0].startswith("refused:") and "no-such-model" in app.flash[0], app.flash
            assert isinstance(local.engine, Engine) and local.engine.live.auto is False
    finally:
        local.engine.submit(Stop(cancel=True))
        await asyncio.to_thread(local.wait_done, 30)
