"""Opening the console on a run, and what follows it: `oxconsole attach`, `oxconsole ps`, and the
end of a console session (the summary after `q`, how to come back after `d`).

Why this module exists: it is the one place that starts the UI. The console is imported only
when a session opens, so `ps` and everything below this module stay free of Textual.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from oxconsole.control import RunEntry, SocketSource, list_runs, pid_alive, run_dirs
from oxconsole.control.registry import answers
from oxconsole.engine.commands import Command, Stop
from oxconsole.headless import print_summary, tell_where
from oxconsole.metrics import Snapshot
from oxconsole.outputs import beside_journal, summary_stream
from oxconsole.runprep import (
    EXIT_BAD_INPUT,
    EXIT_NOT_SAVED,
    LOG_NAME,
    SUMMARY_NAME,
    Parser,
    end_notes,
    resume_command,
)
from oxconsole.sweep.command import show_sweep_end

__all__ = [
    "NO_RUN",
    "EndedEarly",
    "RunEnd",
    "attach_main",
    "console_session",
    "finish_run",
    "load_console",
    "ps_main",
    "render_ps",
    "show_end",
]

NO_RUN = "no run is going; start one with oxconsole WORKLOAD.toml"
ConsoleFn = Callable[..., str]
T = TypeVar("T")


# --- opening a console on a run -----------------------------------------------------------------
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


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    from oxconsole.aio import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def console_session(
    source: SocketSource,
    run_console: ConsoleFn,
    *,
    theme: str | None,
    refresh: float,
    wait_exit: Callable[[float], object] | None = None,
    ended: RunEnd | None = None,
) -> int:
    """Open the console on a run; after `q` print its summary and where its files are, after `d`
    how to come back. A run already over (with its summary written) opens on how it ended."""
    if not answers(source.path) and _run_async(_ended_summary(source)) is None:
        print(
            f"oxconsole: run {source.name} (pid {source.pid}) does not answer on {source.path}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    shown = EndedEarly(source)
    try:
        result = run_console(shown, theme=theme, refresh=refresh)
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

    async def start(self) -> None:
        try:
            await self.source.start()
        except OSError:
            summary = await _ended_summary(self.source)
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


async def _ended_summary(source: SocketSource, wait: float = 5.0) -> dict[str, Any] | None:
    """The summary a run that is gone wrote beside its journal (once its process has exited, up to
    ``wait`` seconds); None if it wrote none, or only an older run's (older than the journal)."""
    deadline = time.monotonic() + wait
    while source.pid is not None and pid_alive(source.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    summary = _summary_file(source)
    journal = Path(source.results_path or "")
    try:
        if summary is None or _summary_path(source).stat().st_mtime < journal.stat().st_mtime - 1.0:
            return None
    except OSError:
        return None
    return summary


def _goes_on(source: SocketSource) -> str:
    key = source.name
    if sum(1 for e in list_runs(clean=False) if e.name == source.name) > 1:
        key = f"{source.name}-{source.pid}"
    return f"run {source.name} goes on (pid {source.pid}); re-attach with: oxconsole attach {key}"


# --- the end of a session: stop the run, print its summary and where its files are -------------
@dataclass(frozen=True)
class RunEnd:
    """What the console that started a run knows of its outputs beyond what the run tells."""

    summary_json: str | None = None
    """--summary-json: a file the engine process wrote, or `-`/a stream this console writes."""
    kept_aside: Path | None = None
    """Where the journal of an earlier run was moved when this one started."""
    log: Path | None = None
    """The engine process's log (else the one beside the journal, if the run has written it)."""


def finish_run(source: SocketSource, ended: RunEnd | None = None) -> int:
    """Make sure the run stops, wait for its end message, print the summary and where the run's
    files are; its exit code."""
    if not source.ended:
        _stop(source)
    summary = source.final_summary
    code = source.exit_code
    if _is_sweep(source):
        return _sweep_end(source, ended)
    if summary is None:
        summary = _summary_file(source)
        if summary is None:
            print(
                f"oxconsole: run {source.name} (pid {source.pid}) ended without a summary; see "
                f"{_log_path(source) or f'its {LOG_NAME}'}",
                file=sys.stderr,
            )
            return 1
        errors = (summary.get("requests") or {}).get("error") or 0
        code = EXIT_NOT_SAVED if summary.get("saved") is False else 1 if errors else 0
    for w in source.warnings:
        print(f"oxconsole: warning: {w}", file=sys.stderr)
    if source.results_path:
        show_end(summary, Path(source.results_path), ended or RunEnd(), since=source.started_at)
    else:
        print_summary(summary, None)
    for note in end_notes(summary, lambda: _resume(source)):
        print(f"oxconsole: {note}", file=sys.stderr, flush=True)
    return 0 if code is None else code


def _is_sweep(source: SocketSource) -> bool:
    snap = source.latest()
    return snap is not None and snap.sweep is not None


def _sweep_end(source: SocketSource, ended: RunEnd | None) -> int:
    """A sweep's end as its headless run printed it (the table, the JSON, where the journal is,
    the resume hint); its exit code."""
    if not show_sweep_end(source.final_summary):
        print(
            f"oxconsole: sweep {source.name} ended without a word; see {_log_path(source)}", file=sys.stderr
        )
        return 1
    if ended is not None and ended.kept_aside is not None:
        print(f"oxconsole: the previous journal was kept as {ended.kept_aside}", file=sys.stderr)
    return 0 if source.exit_code is None else source.exit_code


def _resume(source: SocketSource) -> str:
    if source.workload_path is None:
        return "oxconsole WORKLOAD.toml --resume"
    return resume_command(source.workload_path, source.overrides, source.results_path)


def show_end(summary: dict[str, Any], results: Path, ended: RunEnd, *, since: float) -> None:
    """The summary table (and the summary JSON when it goes to a stream), then where the journal,
    the summaries and the engine log of the run that started at `since` are."""
    target = ended.summary_json
    stream = target if target and summary_stream(target) else None
    print_summary(summary, stream)
    written = [
        str(p)
        for p in (beside_journal(results, SUMMARY_NAME), Path(target) if target and not stream else None)
        if p is not None and _written_since(p, since)
    ]
    log = ended.log or beside_journal(results, LOG_NAME)
    summaries = written + ([stream] if stream else [])
    tell_where(results, summaries, log if ended.log or _written_since(log, since) else None, ended.kept_aside)


def _written_since(p: Path, since: float) -> bool:
    """`p` exists and was written by the run that started at `since` (not left by an earlier one)."""
    try:
        return p.stat().st_mtime >= since - 1.0
    except OSError:
        return False


def _stop(source: SocketSource) -> None:
    """Stop the run and wait for its end; Ctrl-C once cancels the requests in flight."""
    cancel = False
    while True:
        try:
            _run_async(_stop_and_wait(source, cancel))
            return
        except KeyboardInterrupt:
            if cancel:
                raise
            cancel = True
            print("\noxconsole: cancelling the requests in flight", file=sys.stderr, flush=True)


async def _stop_and_wait(source: SocketSource, cancel: bool) -> None:
    """A fresh connection (the console's loop is gone): send stop, wait for the end message."""
    fresh = SocketSource(source.path, name=source.name, pid=source.pid, hz=1.0)
    try:
        await fresh.start()
    except (OSError, TimeoutError):
        if source.pid is not None:  # it already ended: give it time to write summary.json
            deadline = time.monotonic() + 15.0
            while pid_alive(source.pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        return
    try:
        fresh.send(Stop(cancel=cancel))
        await fresh.wait_end()
    finally:
        await fresh.close()
    if fresh.ended:
        source.final_summary = fresh.final_summary
        source.exit_code = fresh.exit_code
        source.warnings = fresh.warnings
        source.results_path = fresh.results_path or source.results_path


def _summary_path(source: SocketSource) -> Path:
    if not source.results_path:
        return Path(SUMMARY_NAME)
    return beside_journal(Path(source.results_path), SUMMARY_NAME)


def _summary_file(source: SocketSource) -> dict[str, Any] | None:
    if not source.results_path:
        return None
    p = _summary_path(source)
    try:
        d = orjson.loads(p.read_bytes())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _log_path(source: SocketSource) -> str | None:
    return str(beside_journal(Path(source.results_path), LOG_NAME)) if source.results_path else None


# --- ps -----------------------------------------------------------------------------------------
def _fmt_elapsed(s: float) -> str:
    from oxconsole.metrics.format import fmt_duration

    return fmt_duration(s)


def _progress(e: RunEntry) -> str:
    if e.total:
        return f"{e.done}/{e.total} {100.0 * e.done / e.total:.0f}%"
    return f"{e.done}"


def render_ps(entries: list[RunEntry], now: float | None = None) -> str:
    now = time.time() if now is None else now
    head = ("NAME", "PID", "STATE", "PROGRESS", "REQ/S", "ERR", "ELAPSED")
    rows = [
        (
            e.name,
            str(e.pid),
            e.state,
            _progress(e),
            f"{e.req_per_s:.1f}",
            str(e.errors),
            _fmt_elapsed(now - e.started_at),
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = {1, 3, 4, 5, 6}

    def line(r: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join(line(r) for r in [head, *rows])


def say_run_dirs(prog: str) -> None:
    """On stderr: why a folder where runs are usually found is not looked in, and where instead."""
    dirs, notes = run_dirs()
    instead = f"looking in {dirs[0]}" if dirs else "no folder left to look in"
    for note in notes:
        print(f"{prog}: {note}; {instead}", file=sys.stderr)


def ps_main(argv: list[str]) -> int:
    p = Parser(prog="oxconsole ps", description="List the runs going on this machine for this user.")
    p.add_argument("--json", action="store_true", help="print a JSON array of registry entries")
    ns = p.parse_args(argv)
    say_run_dirs("oxconsole ps")
    entries = list_runs()
    if ns.json:
        print(orjson.dumps([e.to_dict() for e in entries], option=orjson.OPT_INDENT_2).decode())
        return 0
    if not entries:
        print(NO_RUN)
        return 0
    print(render_ps(entries))
    return 0


# --- attach -------------------------------------------------------------------------------------
def _attach_parser() -> Parser:
    p = Parser(
        prog="oxconsole attach",
        description="Open the console on a run already going (started headless, or detached with d).",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the run's name, or NAME-PID (see oxconsole ps)")
    p.add_argument("--theme", metavar="NAME", help="console theme")
    p.add_argument(
        "--refresh", type=float, default=4.0, metavar="HZ", help="console refresh rate (default 4)"
    )
    return p


def _match(entries: list[RunEntry], name: str) -> Iterator[RunEntry]:
    exact = [e for e in entries if e.key == name]
    yield from exact or [e for e in entries if e.name == name]


def _pick(entries: list[RunEntry], name: str | None) -> RunEntry | None:
    """The one run `name` means among those going; None, having said why, if not exactly one."""
    if name is None:
        if len(entries) == 1:
            return entries[0]
        why = "several runs are going; name one (NAME or NAME-PID):\n" + render_ps(entries)
    else:
        found = list(_match(entries, name))
        if len(found) == 1:
            return found[0]
        if not found:
            why = f"no run named {name!r} is going; the runs going are:\n" + render_ps(entries)
        else:
            why = f"several runs are named {name!r}; name one as NAME-PID:\n" + render_ps(found)
    print(f"oxconsole attach: {why}", file=sys.stderr)
    return None


def attach_main(argv: list[str]) -> int:
    ns = _attach_parser().parse_args(argv)
    if ns.refresh <= 0 or not math.isfinite(ns.refresh):
        print(
            f"oxconsole attach: --refresh: expected a number of updates per second > 0, got {ns.refresh}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    say_run_dirs("oxconsole attach")
    entries = list_runs()
    if not entries:
        print(f"oxconsole attach: {NO_RUN}", file=sys.stderr)
        return EXIT_BAD_INPUT
    entry = _pick(entries, ns.name)
    if entry is None:
        return EXIT_BAD_INPUT
    run_console, why = load_console()
    if run_console is None:
        print(f"oxconsole attach: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console_session(source, run_console, theme=ns.theme, refresh=ns.refresh)
