"""A run without a console: the engine with a progress line on stderr, run on this thread's loop
behind its control socket, and the end of a run (warnings, summary table, --summary-json).

Why this module exists: `oxconsole WORKLOAD.toml --headless` and the engine process a console
starts (`oxconsole.host`) run a workload the very same way and end it the very same way; this is
that one way. It never imports Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from oxconsole.runprep import EXIT_NOT_SAVED, PreparedRun, end_notes, resume_command, write_json

if TYPE_CHECKING:
    from oxconsole.engine.runner import RunEngine, RunOutcome
    from oxconsole.metrics import Snapshot

__all__ = ["engine_with_progress", "report_outcome", "run_headless"]


def engine_with_progress(prep: PreparedRun, progress_interval: float) -> RunEngine:
    """The engine for a prepared run (several processes when run.workers > 1), printing a
    progress line to stderr every interval."""
    from oxconsole.engine.pool import make_engine
    from oxconsole.metrics.format import progress_line

    shown = 0

    def tick(s: Snapshot) -> None:
        # Warnings found as the run starts (open-files limit, TLS off, resume notes) are shown with
        # the first progress line, not only beside the summary at the end.
        nonlocal shown
        for warning in engine.warnings[shown:]:
            print(f"oxconsole: warning: {warning}", file=sys.stderr)
        shown = len(engine.warnings)
        print(progress_line(s), file=sys.stderr, flush=True)

    engine = make_engine(
        prep.workload,
        results_path=prep.results_path,
        skip_ids=prep.skip,
        total_expected=prep.total,
        on_tick=tick,
        tick_interval=progress_interval,
    )
    return engine


def run_headless(
    prep: PreparedRun,
    interval: float,
    *,
    before_end: Callable[[RunOutcome], None] | None = None,
) -> RunOutcome:
    """Run on this thread's own loop with a control socket (so `attach` and `ps` see the run).

    SIGINT/SIGTERM stop gracefully (in-flight requests get `run.grace`); a second one cancels.
    """
    import asyncio
    import signal

    from oxconsole.aio import run_loop
    from oxconsole.control import RunInfo, serve_run

    w = prep.workload
    engine = engine_with_progress(prep, interval)
    info = RunInfo(
        name=w.name,
        workload_path=str(Path(w.path).resolve()),
        overrides=prep.overrides,
        results_path=str(prep.results_path.resolve()),
    )

    async def go() -> RunOutcome:
        loop = asyncio.get_running_loop()
        hits = 0

        def on_signal() -> None:
            nonlocal hits
            hits += 1
            if hits == 1:
                print(
                    f"\noxconsole: stopping: waiting up to {w.run.grace:g}s for requests in flight "
                    "(Ctrl-C again to cancel them now)",
                    file=sys.stderr,
                )
            engine.request_stop(cancel=hits > 1, interrupted=True)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return await serve_run(engine, info, before_end=before_end)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    outcome: RunOutcome = run_loop(go())
    return outcome


def report_outcome(outcome: RunOutcome, summary_json: str | None, prep: PreparedRun | None = None) -> int:
    """The end of a run: its warnings on stderr, the summary table on stdout, the summary JSON
    written to `summary_json` when given, then (stderr) results that could not be saved and how to
    send what was not sent (`prep`: the run's flags); the run's exit code."""
    from oxconsole.report import render_summary

    for warning in outcome.warnings:
        print(f"oxconsole: warning: {warning}", file=sys.stderr)
    print(render_summary(outcome.summary), flush=True)
    code = outcome.exit_code
    if summary_json:
        try:
            write_json(Path(summary_json), outcome.summary, in_place=True)
        except OSError as e:
            print(
                f"oxconsole: error: could not write the summary to {summary_json}: {e.strerror or e}",
                file=sys.stderr,
            )
            code = EXIT_NOT_SAVED
    for note in end_notes(outcome.summary, lambda: _resume(prep)):
        print(f"oxconsole: {note}", file=sys.stderr, flush=True)
    return code


def _resume(prep: PreparedRun | None) -> str:
    if prep is None:
        return "oxconsole WORKLOAD.toml --resume"
    return resume_command(str(prep.workload.path), prep.overrides, prep.results_path)
