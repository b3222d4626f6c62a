"""Opening the console on a run: load the UI, show the run (or how it ended, when it ended before
the console could connect), and after the console closes, the end of the run or how to come back.

Why this module exists: it is the one place that starts the UI. The console is imported only
when a session opens, so everything below this module stays free of Textual.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

from oxconsole.base.aio import run_loop
from oxconsole.base.exits import EXIT_BAD_INPUT
from oxconsole.cli.runend import RunEnd, ended_summary, finish_run
from oxconsole.control import SocketSource, list_runs
from oxconsole.control.registry import answers
from oxconsole.engine.commands import Command
from oxconsole.metrics import Snapshot

__all__ = ["ConsoleFn", "EndedEarly", "console_session", "load_console"]

ConsoleFn = Callable[..., str]


def load_console() -> tuple[ConsoleFn | None, str]:
    """`oxconsole.ui.app.run_console`, or None and why it cannot be loaded. From here until the
    console is up, keys typed are held unechoed for it (`oxconsole.ui.typeahead`)."""
    from oxconsole.ui.typeahead import hold, take

    hold()
    try:
        from oxconsole.ui.app import run_console  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        take()  # no console: the terminal as it was
        return None, f"the live console is not available in this build ({e})"
    fn: ConsoleFn = run_console
    return fn, ""


def console_session(
    source: SocketSource,
    run_console: ConsoleFn,
    *,
    theme: str | None,
    refresh: float,
    wait_exit: Callable[[float], object] | None = None,
    ended: RunEnd | None = None,
    attached: bool = False,
) -> int:
    """Open the console on a run; after `q` print its summary and where its files are, after `d`
    how to come back. A run already over (with its summary written) opens on how it ended.
    `attached`: the console of `oxconsole attach`, where `q` closes the console and leaves the run
    going (`Q` stops it after a confirmation)."""
    if not answers(source.path) and run_loop(ended_summary(source)) is None:
        print(
            f"oxconsole: run {source.name} (pid {source.pid}) does not answer on {source.path}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    shown = EndedEarly(source)
    try:
        result = run_console(shown, theme=theme, refresh=refresh, attached=attached)
    except Exception:
        import traceback

        traceback.print_exc()
        print(f"oxconsole: the console failed; {_goes_on(source)}", file=sys.stderr)
        return 1
    if result == "detach" and not source.ended and shown.final is None:
        print(_goes_on(source))
        return 0
    code = finish_run(source, ended)
    if wait_exit is not None:
        with contextlib.suppress(Exception):
            rc = wait_exit(10.0)
            if not source.ended and isinstance(rc, int) and rc >= 0:
                code = rc  # the end message was missed: the engine process's own exit code
    return code


class EndedEarly:
    """A run's `SocketSource`; when the run ended before the console could connect (every request
    failed within a second, say), its summary as one final snapshot instead, so the console shows
    how it ended and why (the errors and their details) rather than failing to start."""

    def __init__(self, source: SocketSource) -> None:
        self.source = source
        self.name = source.name
        self.workload_path = source.workload_path
        self.overrides = source.overrides
        self.final: Snapshot | None = None

    @property
    def pid(self) -> int | None:
        """The run's engine process."""
        return self.source.pid

    def latest(self) -> Snapshot | None:
        return self.final or self.source.latest()

    def send(self, cmd: Command) -> None:
        if self.final is None:
            self.source.send(cmd)

    def take_error(self) -> str | None:
        """What the run answered to a command it refused (the console says it), once."""
        return self.source.take_error()

    async def start(self) -> None:
        try:
            await self.source.start()
        except OSError:
            summary = await ended_summary(self.source)
            if summary is None:
                raise
            self.final = Snapshot.from_summary(summary)
        self.name, self.workload_path = self.source.name, self.source.workload_path
        self.overrides = self.source.overrides

    async def close(self) -> None:
        await self.source.close()

    @property
    def finished(self) -> bool:
        return self.final is not None or self.source.finished

    @property
    def connected(self) -> bool:
        return self.final is not None or self.source.connected


def _goes_on(source: SocketSource) -> str:
    key = source.name
    if sum(1 for e in list_runs(clean=False) if e.name == source.name) > 1:
        key = f"{source.name}-{source.pid}"
    return f"run {source.name} goes on (pid {source.pid}); re-attach with: oxconsole attach {key}"
