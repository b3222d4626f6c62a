"""Command line: parse arguments, turn bad input into exit 2, run headless or hand over to the console.

Why this module exists: it is the only place that knows about argv, exit codes and signals. It
imports neither Textual nor the openai SDK at module level, so `--help`, `validate` and `report`
start fast; the engine and the console are imported when a run starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oxconsole import __version__

if TYPE_CHECKING:
    from oxconsole.engine.runner import RunEngine, RunOutcome
    from oxconsole.metrics.snapshot import Snapshot
    from oxconsole.workload import Workload

SUBCOMMANDS = ("validate", "sim", "report", "attach", "ps")
EXIT_OK, EXIT_ERRORS, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class BadInput(Exception):
    """A user error: printed as one paragraph, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="oxconsole",
        description="Run an LLM inference workload against any OpenAI-compatible endpoint and watch it live.",
        epilog=(
            "other commands: oxconsole validate WORKLOAD.toml | oxconsole sim [--port N] | "
            "oxconsole report RESULTS.jsonl [--json] | oxconsole attach [NAME] | oxconsole ps"
        ),
    )
    p.add_argument("workload", metavar="WORKLOAD.toml", help="the workload file")
    p.add_argument(
        "--headless", action="store_true", help="no console: progress on stderr, summary on stdout"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a workload key by dotted path, value parsed as TOML (repeatable)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the results journal: ids already ok are not sent"
    )
    p.add_argument("--summary-json", metavar="PATH", help="also write the summary JSON to PATH")
    p.add_argument("--output", metavar="PATH", help="override [output] results")
    p.add_argument(
        "--progress-interval",
        type=float,
        default=2.0,
        metavar="S",
        help="headless progress line interval (default 2)",
    )
    p.add_argument("--theme", metavar="NAME", help="console theme")
    p.add_argument(
        "--refresh", type=float, default=4.0, metavar="HZ", help="console refresh rate (default 4)"
    )
    p.add_argument("--version", action="version", version=f"oxconsole {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS and not (args[0].endswith(".toml") or os.path.isfile(args[0])):
            return _subcommand(args[0], args[1:])
        ns = _run_parser().parse_args(args)
        return _run(ns)
    except BadInput as e:
        print("\n".join(f"oxconsole: {line}" for line in str(e).split("\n")), file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:
        # A workload problem found once the run started (e.g. --resume against a changed workload).
        from oxconsole.workload import WorkloadError

        if not isinstance(e, WorkloadError):
            raise
        print(f"oxconsole: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _subcommand(name: str, rest: list[str]) -> int:
    if name == "sim":
        from oxconsole.sim.cli import main as sim_main

        return int(sim_main(rest))
    if name == "report":
        p = _Parser(
            prog="oxconsole report", description="Recompute the summary from a results journal alone."
        )
        p.add_argument("results", metavar="RESULTS.jsonl")
        p.add_argument("--json", action="store_true", help="print the summary JSON instead of the table")
        ns = p.parse_args(rest)
        from oxconsole.report import report_main

        return int(report_main(ns.results, ns.json))
    if name == "validate":
        p = _Parser(
            prog="oxconsole validate", description="Check a workload, its prompts and its key variables."
        )
        p.add_argument("workload", metavar="WORKLOAD.toml")
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
        ns = p.parse_args(rest)
        return _validate(ns.workload, ns.overrides)
    if name == "ps":
        from oxconsole.control import ps_main

        return ps_main(rest)
    from oxconsole.control import attach_main

    return attach_main(rest)


def _load(path: str, overrides: list[str]) -> tuple[Workload, Any]:
    from oxconsole.workload import WorkloadError, check_prompts, load_workload, resolve_api_key

    try:
        w = load_workload(path, overrides)
        stats = check_prompts(w)
        for m in w.models:
            resolve_api_key(w, m.endpoint)
    except WorkloadError as e:
        raise BadInput(str(e)) from None
    return w, stats


def _validate(path: str, overrides: list[str]) -> int:
    from oxconsole.workload import describe

    w, stats = _load(path, overrides)
    print(describe(w, stats))
    return EXIT_OK


def _results_path(w: Workload, output: str | None, resume: bool) -> tuple[Path, str | None]:
    """The journal path; an existing journal is kept aside (never overwritten) unless resuming."""
    path = Path(output) if output else w.results_path()
    note = None
    if resume:
        if not path.exists():
            raise BadInput(f"{path}: --resume: expected an existing results journal, found none")
        return path, None
    if path.exists() and path.stat().st_size > 0:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
        aside = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
        n = 1
        while aside.exists():
            aside = path.with_name(f"{path.stem}.{stamp}-{n}{path.suffix}")
            n += 1
        path.rename(aside)
        note = f"previous results kept as {aside}"
    return path, note


@dataclass
class PreparedRun:
    """A run validated and ready to start: what the headless runner and the engine process share."""

    workload: Workload
    results_path: Path
    skip: AbstractSet[str]
    """Ids already `ok` in the journal (--resume): not sent again."""
    total: int | None
    """Requests this run will send, when known."""
    overrides: tuple[str, ...]


def prepare_run(workload: str, overrides: list[str], output: str | None, resume: bool) -> PreparedRun:
    """Load and check the workload, settle the journal path (an old one is kept aside), read ids
    already done on --resume. Notes go to stderr; bad input raises BadInput."""
    w, stats = _load(workload, overrides)
    path, note = _results_path(w, output, resume)
    skip: AbstractSet[str] = set()
    if resume:
        from oxconsole.journal.journal import ok_ids

        skip, bad = ok_ids(path)
        if bad:
            print(
                f"oxconsole: {path}: skipped {bad} unreadable line(s) (a torn last line from a crash)",
                file=sys.stderr,
            )
        print(f"oxconsole: resuming: {len(skip)} request(s) already ok in {path}", file=sys.stderr)
    if note:
        print(f"oxconsole: {note}", file=sys.stderr)
    total = stats.total_requests
    if total is not None and skip:
        total = max(0, total - len(skip))
    return PreparedRun(w, path, skip, total, tuple(overrides))


def _check_flags(ns: argparse.Namespace) -> None:
    if ns.refresh <= 0:
        raise BadInput(f"--refresh: expected a number of updates per second > 0, got {ns.refresh}")
    if ns.progress_interval <= 0:
        raise BadInput(f"--progress-interval: expected seconds > 0, got {ns.progress_interval}")


def _run(ns: argparse.Namespace) -> int:
    _check_flags(ns)
    prep = prepare_run(ns.workload, ns.overrides, ns.output, ns.resume)
    headless = ns.headless or not sys.stdout.isatty()
    if not headless:
        code = _run_console(ns, prep)
        if code is not None:
            return code
    outcome = run_headless(prep, ns.progress_interval)
    return _finish(outcome, ns.summary_json)


def _run_console(ns: argparse.Namespace, prep: PreparedRun) -> int | None:
    """Start the engine process and open the console on it; None: no console, run headless."""
    from oxconsole.control import SocketSource, console_session, load_console
    from oxconsole.host import spawn_host, wait_listening

    run_console, why = load_console()
    if run_console is None:
        print(f"oxconsole: {why}; running headless.", file=sys.stderr)
        return None
    host = spawn_host(
        prep,
        resume=ns.resume,
        summary_json=ns.summary_json,
        progress_interval=ns.progress_interval,
    )
    entry = wait_listening(host, timeout=10.0)
    if isinstance(entry, int):
        return entry
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console_session(source, run_console, theme=ns.theme, refresh=ns.refresh, wait_exit=host.proc.wait)


def _finish(outcome: RunOutcome, summary_json: str | None) -> int:
    from oxconsole.report import render_summary

    for warning in outcome.warnings:
        print(f"oxconsole: warning: {warning}", file=sys.stderr)
    print(render_summary(outcome.summary))
    if summary_json:
        import orjson

        p = Path(summary_json)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(orjson.dumps(outcome.summary, option=orjson.OPT_INDENT_2) + b"\n")
    return outcome.exit_code


def progress_line(s: Snapshot) -> str:
    from oxconsole.metrics.format import progress_line as fmt

    return fmt(s)


def make_engine(prep: PreparedRun, progress_interval: float) -> RunEngine:
    """The engine for a prepared run (several processes when run.workers > 1), printing a
    progress line to stderr every interval."""
    from oxconsole.engine.workers import make_engine as build

    shown = 0

    def tick(s: Snapshot) -> None:
        # Warnings found as the run starts (open-files limit, TLS off, resume notes) are shown with
        # the first progress line, not only beside the summary at the end.
        nonlocal shown
        for warning in engine.warnings[shown:]:
            print(f"oxconsole: warning: {warning}", file=sys.stderr)
        shown = len(engine.warnings)
        print(progress_line(s), file=sys.stderr, flush=True)

    engine = build(
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

    from oxconsole.control import RunInfo, serve_run

    w = prep.workload
    engine = make_engine(prep, interval)
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

    from oxconsole.aio import run_loop

    outcome: RunOutcome = run_loop(go())
    return outcome


if __name__ == "__main__":
    raise SystemExit(main())
