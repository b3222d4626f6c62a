"""`oxconsole sweep WORKLOAD.toml --over KEY=V1,V2,...`: the command line of a sweep, from argv to
its table, its JSON and its exit code.

Why this module exists: the command line (`cli.py`) only hands a sweep its arguments; checking
them (every bad value at once, exit 2), resuming, signals and the end of a sweep are here.

Exit codes: 0 a knee was found; 1 no knee (no point finished a request); 2 bad input; 3 the
workload has `[slo]` and no point met it; 4 the journal could not be written; 130 stopped before
every point ended (`--resume` runs the rest).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from oxconsole.metrics.knee import has_slo
from oxconsole.outputs import summary_stream
from oxconsole.runprep import (
    EXIT_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_NOT_SAVED,
    EXIT_OK,
    BadInput,
    Parser,
    check_progress_interval,
    load_checked,
    prepare_run,
    write_json,
)
from oxconsole.sweep.plan import Over, PointPlan, SweepState, check_points, parse_over, resumed_state
from oxconsole.sweep.table import render_table, sweep_json

__all__ = ["EXIT_NO_SLO", "sweep_main"]

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
        "--headless", action="store_true", help="accepted; a sweep always runs headless (progress on stderr)"
    )
    p.add_argument("--progress-interval", type=float, default=2.0, metavar="S")
    return p


def _seconds(text: str) -> float:
    from oxconsole.workload.values import parse_duration

    s = parse_duration(text)
    if s is None or not s > 0 or s == float("inf"):
        raise BadInput(f"--point-duration: expected a duration > 0 such as 30s or 2m, got {text!r}")
    return s


def sweep_main(argv: list[str]) -> int:
    ns = _parser().parse_args(argv)
    check_progress_interval(ns.progress_interval)
    over, seconds, plans = _checked(ns)
    prep = prepare_run(ns.workload, list(ns.overrides), ns.output, ns.resume, ns.summary_json)
    state = SweepState(over.spec(), seconds, list(ns.overrides))
    if ns.resume:
        state = resumed_state(prep.results_path, state)
        print(f"oxconsole: resuming the sweep: {len(state.done)} point(s) already ended", file=sys.stderr)
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
    from oxconsole.sweep.run import Sweep

    sweep = Sweep(
        ns.workload,
        over,
        plans,
        state,
        results=results,
        base_overrides=list(ns.overrides),
        progress_interval=ns.progress_interval,
    )
    end = _run_with_signals(sweep)
    for warning in end.warnings:
        print(f"oxconsole: warning: {warning}", file=sys.stderr)
    points = list(end.points.values())
    to_stdout = bool(ns.summary_json) and summary_stream(ns.summary_json) == "stdout"
    print(render_table(over.key, points), file=sys.stderr if to_stdout else sys.stdout, flush=True)
    data = sweep_json(over.key, points)
    saved = _write_summary(ns.summary_json, data)
    print(f"oxconsole: journal: {results}", file=sys.stderr)
    if aside is not None:
        print(f"oxconsole: the previous journal was kept as {aside}", file=sys.stderr)
    if end.journal_failure is not None or not saved:
        if end.journal_failure:
            print(f"oxconsole: error: results could not be saved: {end.journal_failure}", file=sys.stderr)
        return EXIT_NOT_SAVED
    if end.stopped:
        print(f"oxconsole: sweep stopped; continue with: {_resume_command(ns)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if data["knee"] is not None:
        return EXIT_OK
    return EXIT_NO_SLO if has_slo([p["summary"] for p in points]) else EXIT_ERRORS


def _write_summary(path: str | None, data: dict[str, Any]) -> bool:
    if not path:
        return True
    stream = summary_stream(path)
    if stream is not None:  # the table went to stderr when the JSON goes to stdout
        import orjson

        out = sys.stdout if stream == "stdout" else sys.stderr
        out.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
        out.flush()
        return True
    try:
        write_json(Path(path), data)
    except OSError as e:
        print(f"oxconsole: could not write the summary to {path}: {e.strerror or e}", file=sys.stderr)
        return False
    print(f"oxconsole: summary: {path}", file=sys.stderr)
    return True


def _resume_command(ns: Any) -> str:
    import shlex

    args = ["oxconsole", "sweep", ns.workload, "--over", ns.over, "--point-duration", ns.point_duration]
    for o in ns.overrides:
        args += ["--set", o]
    if ns.output:
        args += ["--output", ns.output]
    return shlex.join([*args, "--resume"])


def _run_with_signals(sweep: Any) -> Any:
    """The sweep on its own loop; SIGINT/SIGTERM stop it (the point running gets `run.grace`), a
    second one cancels what is in flight."""
    import asyncio
    import signal

    from oxconsole.aio import run_loop

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
            return await sweep.run()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    return run_loop(go())
