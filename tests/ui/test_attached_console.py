"""A console opened with `oxconsole attach` is a viewer: `q` and ctrl+c close it and leave the run
going (as `d` does); `Q` stops the run from any console, once `y` confirms it. In the console that
started the run, `q` stops it as before.

The run is a real engine process (`oxconsole W.toml --headless`, its control socket registered in
the test's own run folders); the console is the real app, under Textual's Pilot over a
`SocketSource`, and `oxconsole attach` itself in a tmux pane of 80x24 driven by send-keys.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oxconsole.control import SocketSource, list_runs
from oxconsole.control.registry import RunEntry
from oxconsole.engine.commands import Stop
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.screens import ConfirmStop
from tests.support import until, wait_until
from tests.support.ui import StaticSource, fixed_snapshot
from tests.support.workloads import write_workload

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]


def long_run(tmp_path: Path, name: str) -> Path:
    """A closed loop that would take hours: 4 in flight, 200 ms each, 100,000 requests."""
    sets = {
        "name": name,
        "run.concurrency": 4,
        "run.requests": 100_000,
        "prompts.synthetic.count": 100_000,
        "output.results": str(tmp_path / name / "results.jsonl"),
    }
    return write_workload("sim_exact", tmp_path, sets, file=f"{name}.toml")


@pytest.fixture
def headless_run(run_dirs: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], RunEntry]]:
    """`oxconsole W.toml --headless` going, with its registry entry."""
    path = long_run(tmp_path, "viewed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(path), "--headless", "--set", "run.grace=1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: any(e.state == "running" for e in list_runs()), timeout=90, what="the run")
        [entry] = list_runs()
        yield proc, entry
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def journal_lines(tmp_path: Path) -> int:
    path = tmp_path / "viewed" / "results.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


async def journal_grows(tmp_path: Path, what: str) -> None:
    before = journal_lines(tmp_path)
    await until(lambda: journal_lines(tmp_path) > before + 4, 30, what=what)


async def press_once(entry: RunEntry, key: str) -> ConsoleApp:
    """An attached console on the run, `key` pressed once its figures show, until it leaves."""
    app = ConsoleApp(
        SocketSource.from_entry(entry, hz=10.0), theme_dirs=[], cursor_blink=False, attached=True
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.last is not None, 30, what="the first figures")
        await pilot.press(key)
        await until(lambda: app.return_value is not None, 30, what=f"{key} to close the console")
    return app


async def test_q_and_ctrl_c_close_an_attached_console_and_Q_stops_after_y(
    headless_run: tuple[subprocess.Popen[bytes], RunEntry], tmp_path: Path
) -> None:
    proc, entry = headless_run
    for key in ("q", "ctrl+c", "ctrl+q"):
        app = await press_once(entry, key)
        assert app.return_value == "detach", (key, app.return_value)
        assert not any(isinstance(c, Stop) for c in app.sent), (key, app.sent)
        await journal_grows(tmp_path, f"the run to go on after {key}")
        assert proc.poll() is None, f"{key} in an attached console ended the run ({proc.returncode})"

    src = SocketSource.from_entry(entry, hz=10.0)
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False, attached=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: "help" in screen_rows(app)[-1], 30, what="the footer")
        footer = screen_rows(app)[-1]
        assert "q close" in footer and "Q stop" in footer and "? help" in footer, footer
        await pilot.press("Q")
        await until(lambda: isinstance(app.screen, ConfirmStop), 10, what="the question")
        assert "stop the run?" in " ".join(screen_rows(app)), screen_rows(app)
        await pilot.press("n")  # anything but y: the run goes on
        await until(lambda: not isinstance(app.screen, ConfirmStop), 10, what="the question to close")
        assert app.sent == [] and app.return_value is None, (app.sent, app.return_value)
        assert app.flash[0] == "not stopped: the run goes on", app.flash
        await pilot.press("Q")
        await until(lambda: isinstance(app.screen, ConfirmStop), 10, what="the question again")
        await pilot.press("y")
        assert app.sent == [Stop()], app.sent
        await until(lambda: app.return_value is not None, 60, what="the run to stop and the console to leave")
    assert app.return_value == "quit"
    assert proc.wait(60) == 130  # stopped before every request was sent


async def test_Q_asks_first_in_the_starting_console_too_and_q_still_stops() -> None:
    src = StaticSource(fixed_snapshot())
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: "help" in screen_rows(app)[-1], 10, what="the footer")
        assert "q stop" in screen_rows(app)[-1], screen_rows(app)[-1]
        await pilot.press("Q")
        await until(lambda: isinstance(app.screen, ConfirmStop), 10, what="the question")
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, ConfirmStop), 10, what="the question to close")
        assert src.sent == [], src.sent
        await pilot.press("q")
        assert src.sent == [Stop()], src.sent


def screen_rows(app: ConsoleApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


# --- oxconsole attach in a real terminal: tmux at 80x24 --------------------------------------------


class Tmux:
    """A tmux server of the test's own (its socket in `folder`), one pane of 80x24."""

    def __init__(self, folder: Path) -> None:
        self.sock = str(folder / "tmux.sock")

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-S", self.sock, "-f", os.devnull, *args], capture_output=True, text=True, timeout=30
        )
        assert out.returncode == 0, (args, out.stderr)
        return out.stdout

    def start(self, command: str) -> None:
        self("new-session", "-d", "-x", "80", "-y", "24", command)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "0")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed; the pane:\n{shown}")

    def stop(self) -> None:
        subprocess.run(["tmux", "-S", self.sock, "kill-server"], capture_output=True, timeout=30)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_oxconsole_attach_in_tmux_q_leaves_the_run_going_and_Q_y_stops_it(
    headless_run: tuple[subprocess.Popen[bytes], RunEntry], tmp_path: Path, run_dirs: Path
) -> None:
    proc, _entry = headless_run
    names = ("XDG_RUNTIME_DIR", "XDG_STATE_HOME", "PATH", "PYTHONPATH")
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in names if k in os.environ)
    attach = f"env {env} TERM=xterm-256color {shlex.quote(sys.executable)} -m oxconsole attach viewed"
    tmux = Tmux(run_dirs)
    try:
        tmux.start(f"{attach}; echo exit=$?; {attach}; echo exit=$?; sleep 600")
        shown = tmux.wait_for("q close")
        assert "Q stop" in shown and "? help" in shown, shown
        tmux("send-keys", "-t", "0", "q")
        shown = tmux.wait_for("exit=")
        assert "exit=0" in shown and "run viewed goes on" in shown, shown
        assert proc.poll() is None, f"q in oxconsole attach ended the run ({proc.returncode})"

        tmux.wait_for("q close")  # the second attach
        tmux("send-keys", "-t", "0", "Q")
        tmux.wait_for("stop the run?")
        assert proc.poll() is None
        tmux("send-keys", "-t", "0", "y")
        shown = tmux.wait_for("exit=130", timeout=90)
        assert "requests" in shown, shown  # the summary, printed by the console that stopped it
        assert proc.wait(60) == 130
    finally:
        tmux.stop()
