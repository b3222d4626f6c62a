"""The end of a run a console was showing: stop it (Ctrl-C once cancels the requests in flight),
wait for its end message, print its summary (a sweep's table) and where its files are.

Why this module exists: the console that started a run, `oxconsole attach` and a console whose
run ended before it could connect all end the same way, with the headless run's words; none of
it needs the UI.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.aio import run_loop
from oxconsole.base.exits import EXIT_INTERRUPTED, EXIT_NOT_SAVED
from oxconsole.cli.headless import print_summary, tell_where
from oxconsole.cli.prepare import LOG_NAME, SUMMARY_NAME
from oxconsole.cli.sweep import show_sweep_end
from oxconsole.control import SocketSource, pid_alive
from oxconsole.engine.commands import Stop
from oxconsole.reports.hints import end_notes, resume_command
from oxconsole.reports.outputs import beside_journal, summary_stream

__all__ = ["RunEnd", "ended_summary", "finish_run", "show_end"]


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
        req = summary.get("requests") or {}
        code = (
            EXIT_NOT_SAVED
            if summary.get("saved") is False
            else EXIT_INTERRUPTED
            if req.get("cancelled")
            else 1
            if req.get("error")
            else 0
        )
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
            run_loop(_stop_and_wait(source, cancel))
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


async def ended_summary(source: SocketSource, wait: float = 5.0) -> dict[str, Any] | None:
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
