"""`oxconsole sweep WORKLOAD.toml --over KEY=V1,V2,...`: the command line of a sweep, from argv to
its table, its JSON and its exit code.

Why this module exists: the command line (`cli/main.py`) only hands a sweep its arguments; checking
them (every bad value at once, exit 2), resuming, signals and the end of a sweep are here. A sweep
always runs behind one control socket; on a terminal, `cli/main.py` runs it in a process of its own
(this very command, `--headless`) and opens the console on it, and the end it prints is the one
printed here, sent over the socket (`show_sweep_end`).

Exit codes: 0 a knee was found; 1 no knee (no point finished a request); 2 bad input; 3 the
workload has `[slo]` and no point met it; 4 the journal could not be written; 130 stopped before
every point ended (`--resume` runs the rest).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oxconsole.base.exits import EXIT_ERRORS, EXIT_INTERRUPTED, EXIT_NOT_SAVED, EXIT_OK, BadInput, Parser
from oxconsole.base.jsonfile import write_json
from oxconsole.base.safetext import shown_lines
from oxconsole.cli.prepare import PreparedRun, check_progress_interval, load_checked, prepare_run
from oxconsole.metrics.knee import has_slo
from oxconsole.reports.outputs import summary_stream
from oxconsole.sweep.plan import Over, PointPlan, SweepState, check_points, parse_over, resumed_state
from oxconsole.sweep.table import render_table, sweep_json

__all__ = ["EXIT_NO_SLO", "Console", "show_sweep_end", "sweep_main"]

EXIT_NO_SLO = 3
"""The workload has `[slo]` and no point met it (the contract's 3: `[slo]` not met)."""


def _parser() -> Parser:
    p = Parser(
        prog="oxconsole sweep",
        description="Run one point per value of a workload key, in one process, and find the knee.",
    )
    p.add_argument("workload", metavar="WORKLOAD.toml")
    p.add_argument(
        "--over",
        required=True,
        metavar="KEY=V1,V2,...",
        help="concurrency, rate or any --set path, and its values; concurrency=auto searches for the knee",
    )
    p.add_argument(
        "--point-duration", default="30s", metavar="DURATION", help="each point's length (default 30s)"
    )
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--summary-json", metavar="PATH", help="also write the sweep's JSON to PATH")
    p.add_argument("--output", metavar="PATH", help="override [output] results (the sweep's one journal)")
    p.add_argument("--resume", action="store_true", help="continue a stopped sweep from the points not ended")
    p.add_argument(
        "--headless",
        action="store_true",
        help="no console: progress on stderr, the table on stdout (so too when stdout is not a terminal)",
    )
    p.add_argument("--progress-interval", type=float, default=2.0, metavar="S")
    p.add_argument("--theme", metavar="NAME", help="console theme")
    p.add_argument(
        "--refresh", type=float, default=4.0, metavar="HZ", help="console refresh rate (default 4)"
    )
    return p


def _seconds(text: str) -> float:
    from oxconsole.workload.values import parse_duration

    s = parse_duration(text)
    if s is None or not s > 0 or s == float("inf"):
        raise BadInput(f"--point-duration: expected a duration > 0 such as 30s or 2m, got {text!r}")
    return s


Console = Callable[[list[str], Any, PreparedRun], "int | None"]
"""Opens the console on the sweep run in a process of its own (`cli/main.py`, which may import the
console): (argv, the parsed flags, the prepared run) -> its exit code, or None to run headless."""


def sweep_main(argv: list[str], console: Console | None = None) -> int:
    """The sweep; with `console` and stdout a terminal (and no `--headless`), under the console."""
    ns = _parser().parse_args(argv)
    check_progress_interval(ns.progress_interval)
    if ns.refresh <= 0 or not math.isfinite(ns.refresh):
        raise BadInput(f"--refresh: expected a number of updates per second > 0, got {ns.refresh}")
    over, seconds, plans = _checked(ns)
    prep = prepare_run(ns.workload, list(ns.overrides), ns.output, ns.resume, ns.summary_json)
    state = SweepState(over.spec(), seconds, list(ns.overrides))
    if ns.resume:
        state = resumed_state(prep.results_path, state)
        print(f"oxconsole: resuming the sweep: {len(state.done)} point(s) already ended", file=sys.stderr)
    if console is not None and not ns.headless and sys.stdout.isatty():
        code = console(argv, ns, prep)
        if code is not None:
            return code
    return _run(ns, over, plans, state, prep.results_path, prep.kept_aside)


def _checked(ns: Any) -> tuple[Over, float, list[PointPlan]]:
    """`--over`, `--point-duration`, the workload and every point's workload; BadInput with every
    problem found (a point's only once the workload itself is good, so one problem is told once)."""
    problems: list[str] = []
    over: Over | None = None
    seconds = 30.0
    try:
        over = parse_over(ns.over)
    except BadInput as e:
        problems.append(str(e))
    try:
        seconds = _seconds(ns.point_duration)
    except BadInput as e:
        problems.append(str(e))
    try:
        load_checked(ns.workload, list(ns.overrides))
    except BadInput as e:
        problems.append(str(e))
    if problems or over is None:
        raise BadInput("\n".join(problems))
    return over, seconds, check_points(ns.workload, over, list(ns.overrides), seconds)


def _run(ns: Any, over: Over, plans: list[Any], state: SweepState, results: Path, aside: Path | None) -> int:
    """The sweep headless, behind one control socket (`oxconsole ps` lists it, `oxconsole attach`
    opens the console on it until its end); its end printed; its exit code."""
    from oxconsole.control import RunInfo
    from oxconsole.sweep.run import Sweep
    from oxconsole.sweep.served import ServedSweep

    sweep = Sweep(
        ns.workload,
        over,
        plans,
        state,
        results=results,
        base_overrides=list(ns.overrides),
        progress_interval=ns.progress_interval,
    )
    served = ServedSweep(sweep, lambda end: _ended(ns, over, end, results, aside))
    info = RunInfo(
        name=plans[0].workload.name,
        workload_path=str(Path(ns.workload).resolve()),
        overrides=tuple(ns.overrides),
        results_path=str(results.resolve()),
    )
    return int(_run_with_signals(served, info).exit_code)


def _ended(ns: Any, over: Over, end: Any, results: Path, aside: Path | None) -> tuple[dict[str, Any], int]:
    """Print the sweep's end (the table on stdout, notes on stderr) and write its JSON; the end
    message for its consoles (`{"sweep", "lines"}`: what was printed, in order) and the exit code."""
    said: list[tuple[str, str]] = []
    code = _report_end(ns, over, end, results, aside, said)
    show_lines(said)
    points = list(end.points.values())
    return {"sweep": sweep_json(over.key, points), "lines": [list(x) for x in said]}, code


def _report_end(
    ns: Any, over: Over, end: Any, results: Path, aside: Path | None, said: list[tuple[str, str]]
) -> int:
    for warning in end.warnings:
        said.append(("err", f"oxconsole: warning: {warning}"))
    points = list(end.points.values())
    to_stdout = bool(ns.summary_json) and summary_stream(ns.summary_json) == "stdout"
    said.append(("err" if to_stdout else "out", shown_lines(render_table(over.key, points))))
    data = sweep_json(over.key, points)
    saved = _write_summary(ns.summary_json, data, said)
    said.append(("err", f"oxconsole: journal: {results}"))
    if aside is not None:
        said.append(("err", f"oxconsole: the previous journal was kept as {aside}"))
    if end.journal_failure is not None or not saved:
        if end.journal_failure:
            said.append(("err", f"oxconsole: error: results could not be saved: {end.journal_failure}"))
        return EXIT_NOT_SAVED
    if end.stopped:
        said.append(("err", f"oxconsole: sweep stopped; continue with: {_resume_command(ns)}"))
        return EXIT_INTERRUPTED
    if data["knee"] is not None:
        return EXIT_OK
    return EXIT_NO_SLO if has_slo([p["summary"] for p in points]) else EXIT_ERRORS


def show_lines(lines: list[tuple[str, str]] | list[list[str]]) -> None:
    """Print what a sweep's end said, each line on the stream it went to."""
    for stream, text in lines:
        print(text, file=sys.stdout if stream == "out" else sys.stderr, flush=True)


def show_sweep_end(summary: Mapping[str, Any] | None) -> bool:
    """A sweep's end message printed as the headless sweep printed it; False when `summary` is
    not a sweep's (a run's summary)."""
    if not isinstance(summary, Mapping) or "sweep" not in summary or "lines" not in summary:
        return False
    show_lines([(str(a), str(b)) for a, b in summary["lines"]])
    return True


def _write_summary(path: str | None, data: dict[str, Any], said: list[tuple[str, str]]) -> bool:
    if not path:
        return True
    stream = summary_stream(path)
    if stream is not None:  # the table went to stderr when the JSON goes to stdout
        import orjson

        said.append(
            ("out" if stream == "stdout" else "err", orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        )
        return True
    try:
        write_json(Path(path), data)
    except OSError as e:
        said.append(("err", f"oxconsole: could not write the summary to {path}: {e.strerror or e}"))
        return False
    said.append(("err", f"oxconsole: summary: {path}"))
    return True


def _resume_command(ns: Any) -> str:
    import shlex

    from oxconsole.base.redaction import shown_override

    args = ["oxconsole", "sweep", ns.workload, "--over", ns.over, "--point-duration", ns.point_duration]
    for o in ns.overrides:
        args += ["--set", shown_override(o)]  # a header's value may be a key: not repeated
    if ns.output:
        args += ["--output", ns.output]
    return shlex.join([*args, "--resume"])


def _run_with_signals(served: Any, info: Any) -> Any:
    """The sweep on its own loop behind its control socket; SIGINT/SIGTERM stop it (the point
    running gets `run.grace`), a second one cancels what is in flight."""
    import asyncio
    import signal

    from oxconsole.base.aio import run_loop
    from oxconsole.control import serve_run

    sweep = served.sweep

    async def go() -> Any:
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if sweep.stopping == 0:
                print(
                    "\noxconsole: stopping the sweep (Ctrl-C again to cancel requests in flight)",
                    file=sys.stderr,
                )
            sweep.stop(cancel=sweep.stopping > 0)

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return await serve_run(served, info, warn=sweep.warn)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    return run_loop(go())
