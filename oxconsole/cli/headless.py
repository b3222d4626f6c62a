"""A run without a console: the engine with a progress line on stderr, run on this thread's loop
behind its control socket, and the end of a run (warnings, summary table, --summary-json, where
the files are).

Why this module exists: `oxconsole WORKLOAD.toml --headless` and the engine process a console
starts (`oxconsole.cli.detached`) run a workload the very same way and end it the very same way; this is
that one way. It never imports Textual.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oxconsole.base.exits import EXIT_NOT_SAVED
from oxconsole.base.jsonfile import write_json
from oxconsole.cli.prepare import PreparedRun
from oxconsole.reports.hints import end_notes, resume_command
from oxconsole.reports.outputs import summary_stream, where_lines

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet

    from oxconsole.engine.runner import RunEngine, RunOutcome
    from oxconsole.metrics import Snapshot
    from oxconsole.workload import Workload

__all__ = [
    "engine_with_progress",
    "print_summary",
    "report_outcome",
    "run_headless",
    "served_lines",
    "summary_writer",
    "tell_where",
]


def runner_for(prep: PreparedRun, progress_interval: float) -> RunEngine:
    """The run a prepared workload asks for: one engine, or `run.trials` of them in a row
    (`engine/trials.py`), each printing its progress line."""
    w = prep.workload
    if w.run.trials <= 1:
        return engine_with_progress(prep, progress_interval)
    import dataclasses

    from oxconsole.engine.runner import Engine
    from oxconsole.engine.trials import Trials
    from oxconsole.journal.trialstate import TrialState

    state = (TrialState.read(prep.results_path) if prep.resume else None) or TrialState(w.run.trials)
    state.n = w.run.trials  # a resume may ask for more trials (or fewer) than the run began with

    def make(wk: Workload, skip: AbstractSet[str], total: int | None) -> Engine:
        one = dataclasses.replace(prep, workload=wk, skip=skip, total=total)
        engine = engine_with_progress(one, progress_interval)
        assert isinstance(engine, Engine)
        return engine

    return Trials(
        w, prep.results_path, state, make, first=prep.first_trial, skip=prep.skip, total=prep.trial_total
    )


def engine_with_progress(prep: PreparedRun, progress_interval: float) -> RunEngine:
    """The engine for a prepared run (several processes when run.workers > 1), printing a
    progress line to stderr every interval."""
    from oxconsole.engine.runner import make_engine
    from oxconsole.reports.progress import progress_line

    shown = 0

    def tick(s: Snapshot) -> None:
        # Warnings found as the run starts (open-files limit, TLS off, resume notes) are shown with
        # the first progress line, not only beside the summary at the end.
        nonlocal shown
        for warning in engine.warnings[shown:]:
            print(f"oxconsole: warning: {warning}", file=sys.stderr)
        shown = len(engine.warnings)
        print(progress_line(s, _terminal_width()), file=sys.stderr, flush=True)

    engine = make_engine(
        prep.workload,
        results_path=prep.results_path,
        skip_ids=prep.skip,
        total_expected=prep.total,
        on_tick=tick,
        tick_interval=progress_interval,
    )
    return engine


def _terminal_width() -> int | None:
    """The terminal's width when stderr is one (the line must fit it); None for a log or a pipe,
    which get the whole line."""
    import shutil

    return shutil.get_terminal_size().columns if sys.stderr.isatty() else None


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

    from oxconsole.base.aio import run_loop
    from oxconsole.control import RunInfo, serve_run

    w = prep.workload
    engine = runner_for(prep, interval)
    before_end = _whole_journal_first(prep, before_end)
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
            if hits == 1 and engine.state == "starting":  # e.g. joining a Ray cluster: nothing sent
                print("\noxconsole: stopping before the run started", file=sys.stderr)
            elif hits == 1:
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
    outcome.metrics_url = _metrics_url(engine, w)
    if w.output.html:
        from oxconsole.reports.html import write_run_report

        html = write_run_report(prep.results_path, outcome.summary)
        outcome.html_report = None if html is None else str(html)
    write_batch_files(prep, outcome)
    return outcome


def _metrics_url(engine: object, w: Workload) -> str | None:
    """Where the run's `/metrics` was served, when `[output] prometheus` asked for it."""
    served = getattr(engine, "metrics", None)
    if served is None:
        return None
    addr = w.output.prometheus_address()
    host = (addr[0] if addr else "") or "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{served.port}/metrics"


def write_batch_files(prep: PreparedRun, outcome: RunOutcome) -> None:
    """After the run: the OpenAI Batch output and errors files, when `[output] batch_output` asks."""
    w = prep.workload
    if w.output.batch_output is None:
        return
    from oxconsole.journal.batchout import errors_path, write_batch_output
    from oxconsole.workload.schema import fill_results

    out = Path(fill_results(w.output.batch_output, w.name))
    try:
        ok, failed = write_batch_output(prep.results_path, out, w.name, {m.name: m.api for m in w.models})
    except OSError as e:
        outcome.warnings.append(f"output.batch_output: could not write {out}: {e.strerror}")
        return
    print(
        f"oxconsole: batch output: {ok} answers in {out}, {failed} failures in {errors_path(out)}",
        file=sys.stderr,
    )


def _whole_journal_first(
    prep: PreparedRun, then: Callable[[RunOutcome], None] | None
) -> Callable[[RunOutcome], None]:
    """The end of a run: after --resume its summary becomes the whole journal's (every session, as
    `oxconsole report` computes it) before anything shows or writes it; what the summary shows that
    the journal's records do not is kept in its manifest, for `oxconsole report`; then `then`."""

    def end(outcome: RunOutcome) -> None:
        from oxconsole.journal.manifest import manifest_path, store_run_sections

        if prep.resume or prep.workload.run.trials > 1:
            from oxconsole.journal.identify import NotAJournal
            from oxconsole.reports.summary import whole_journal_summary

            try:
                outcome.summary = whole_journal_summary(outcome.summary, prep.results_path)
            except (OSError, NotAJournal) as e:
                outcome.warnings.append(f"the summary covers this session only: {e}")
        if prep.workload.stages:
            from oxconsole.metrics.stages import judge_stages

            judge_stages(outcome.summary, [st.duration for st in prep.workload.stages])
            outcome.not_sent = outcome.summary["requests"].get("not_sent", outcome.not_sent)
        try:
            store_run_sections(prep.results_path, outcome.summary)
        except OSError as e:
            where = manifest_path(prep.results_path)
            why = e.strerror or e
            outcome.warnings.append(f"{where}: could not keep the run's changes for reports: {why}")
        if then is not None:
            then(outcome)

    return end


def summary_writer(files: Sequence[Path]) -> tuple[Callable[[RunOutcome], None], list[str]]:
    """The end-of-run step that writes the summary JSON to each of `files` (`summary.json` beside
    the journal, a `--summary-json` file) before the run tells anyone it ended, and the list it
    fills with those it wrote; one it cannot write is said on stderr."""
    saved: list[str] = []

    def write(outcome: RunOutcome) -> None:
        for path in files:
            try:
                write_json(path, outcome.summary)
                saved.append(str(path))
            except OSError as e:
                print(f"oxconsole: could not write the summary to {path}: {e}", file=sys.stderr, flush=True)

    return write, saved


def print_summary(summary: dict[str, Any], summary_json: str | None) -> bool:
    """The summary table on stdout, and the summary JSON to `summary_json` when given: a file
    (written whole, then renamed into place) or stdout/stderr (`oxconsole.reports.outputs.SUMMARY_STREAMS`).
    When the JSON goes to stdout the table goes to stderr, so stdout holds the JSON alone.
    False when the file could not be written (having said why)."""
    import orjson

    from oxconsole.reports.summary import render_summary
    from oxconsole.reports.summarytable import table_width

    stream = summary_stream(summary_json) if summary_json else None
    table = sys.stderr if stream == "stdout" else sys.stdout
    print(render_summary(summary, table_width(table)), file=table, flush=True)
    if stream is not None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        out.flush()
    elif summary_json:
        try:
            write_json(Path(summary_json), summary)
        except OSError as e:  # checked before the run; the disk may have filled up since
            print(
                f"oxconsole: could not write the summary to {summary_json}: {e.strerror or e}",
                file=sys.stderr,
            )
            return False
    return True


def tell_where(
    results: Path,
    summaries: Sequence[str] = (),
    log: Path | None = None,
    kept_aside: Path | None = None,
) -> None:
    """The last lines of a run, on stderr: where its journal, summaries and engine log are."""
    for line in where_lines(results, summaries=summaries, log=log, kept_aside=kept_aside):
        print(f"oxconsole: {line}", file=sys.stderr, flush=True)


def report_outcome(
    outcome: RunOutcome, prep: PreparedRun, summary_json: str | None, written: Sequence[str] = ()
) -> int:
    """The end of a headless run: its warnings on stderr, the summary table on stdout, the summary
    JSON written to `summary_json` when given, where everything is (`written`: the summaries the
    run's end wrote already, `summary.json` beside the journal), and what was not sent (with the
    command that sends the rest); the run's exit code."""
    for warning in outcome.warnings:
        print(f"oxconsole: warning: {warning}", file=sys.stderr)
    saved = print_summary(outcome.summary, summary_json)
    given = [summary_json] if summary_json and saved and summary_json not in written else []
    tell_where(prep.results_path, [*written, *given], None, prep.kept_aside)
    for line in served_lines(outcome):
        print(f"oxconsole: {line}", file=sys.stderr, flush=True)
    syn = prep.workload.prompts.synthetic
    for note in end_notes(outcome.summary, lambda: _resume(prep), bool(syn and syn.prefix_tokens)):
        print(f"oxconsole: {note}", file=sys.stderr, flush=True)
    return outcome.exit_code if saved else EXIT_NOT_SAVED  # a summary not written is results not saved


def served_lines(outcome: RunOutcome) -> list[str]:
    """Where the run served `/metrics` and wrote its HTML report, when it did."""
    lines = []
    if outcome.metrics_url:
        lines.append(f"/metrics was served at {outcome.metrics_url} while the run lasted")
    if outcome.html_report:
        lines.append(f"HTML report: {outcome.html_report}")
    return lines


def _resume(prep: PreparedRun) -> str:
    return resume_command(str(prep.workload.path), prep.overrides, prep.results_path)
