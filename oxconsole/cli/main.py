"""Command line: argv to a subcommand and an exit code; bad input becomes exit 2.

Why this module exists: it is the only place that reads argv. It imports neither Textual nor the
openai SDK at module level, so `--help`, `validate` and `report` start fast; the run (headless,
or the engine process and the console) is imported when one starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from oxconsole.base.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, BadInput, Parser
from oxconsole.cli.flags import run_parser, validate_parser
from oxconsole.cli.prepare import PreparedRun, check_progress_interval, load_checked, prepare_run
from oxconsole.cli.quickstart import workload_for, workload_to_validate
from oxconsole.reports.hints import RAY_OVERRIDE

SUBCOMMANDS = ("run", "init", "validate", "sim", "report", "attach", "ps", "sweep", "mcp")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS and not (args[0].endswith(".toml") or os.path.isfile(args[0])):
            if args[0] == "run":
                return _run_command(args[1:], "oxconsole run")
            return _subcommand(args[0], args[1:])
        return _run_command(args, "oxconsole")
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


def _run_command(args: list[str], prog: str) -> int:
    """`oxconsole [run] [WORKLOAD.toml] [flags]`: a file, or a workload built from the flags."""
    ns = run_parser(prog).parse_args(args)
    check_flags(ns)
    ns.workload = workload_for(ns, ["run", *args])
    return _run(ns)


def _subcommand(name: str, rest: list[str]) -> int:
    if name == "init":
        from oxconsole.cli.starter import init_main

        return init_main(rest)
    if name == "sim":
        from oxconsole.sim.cli import main as sim_main

        return int(sim_main(rest))
    if name == "report":
        p = Parser(prog="oxconsole report", description="Recompute the summary from a results journal alone.")
        p.add_argument("results", metavar="RESULTS.jsonl", nargs="+", help="two or more: compared")
        p.add_argument("--json", action="store_true", help="print the summary JSON instead of the table")
        p.add_argument("--html", metavar="PATH", help="write a self-contained HTML report to PATH")
        p.add_argument("--csv", metavar="PATH", help="write one CSV row per record to PATH")
        p.add_argument("--markdown", action="store_true", help="print the summary as Markdown tables")
        p.add_argument("--with-text", action="store_true", help="keep response text in the CSV")
        p.add_argument("--plans", metavar="FILE.toml", help="price the journal under the [plans.*] of FILE")
        ns = p.parse_args(rest)
        from oxconsole.reports.command import ReportRequest, report_command, wants_more

        req = ReportRequest(tuple(ns.results), ns.json, ns.html, ns.csv, ns.markdown, ns.with_text, ns.plans)
        if wants_more(req):
            return report_command(req)
        from oxconsole.reports.summary import report_main

        return int(report_main(ns.results[0], ns.json))
    if name == "validate":
        ns = validate_parser().parse_args(rest)
        with workload_to_validate(ns, ["validate", *rest]) as path:
            return _validate(path, ns.overrides)
    if name == "sweep":
        from oxconsole.cli.sweep import sweep_main

        return sweep_main(rest, console=_sweep_console)
    if name == "ps":
        from oxconsole.cli.ps import ps_main

        return ps_main(rest)
    if name == "mcp":
        from oxconsole.cli.agents.launch import mcp_main

        return mcp_main(rest)
    from oxconsole.cli.attach import attach_main

    return attach_main(rest)


def _validate(path: str, overrides: list[str]) -> int:
    from oxconsole.base.safetext import shown_lines
    from oxconsole.workload import describe

    w, stats = load_checked(path, overrides)
    print(shown_lines(describe(w, stats)))  # a model's name is text, never a terminal command
    return EXIT_OK


def check_flags(ns: argparse.Namespace) -> None:
    """The run flags no parser checks (a refresh rate, a theme, the progress interval, a Ray address)."""
    if ns.refresh <= 0:
        raise BadInput(f"--refresh: expected a number of updates per second > 0, got {ns.refresh}")
    if ns.theme is not None:
        known = theme_names()
        if ns.theme not in known:
            raise BadInput(f"--theme: expected one of {', '.join(sorted(known))}, got {json.dumps(ns.theme)}")
    check_progress_interval(ns.progress_interval)
    from oxconsole.workload.bounds import MAX_TRIALS

    if ns.trials is not None and not 1 <= ns.trials <= MAX_TRIALS:
        raise BadInput(
            f"--trials: expected an integer between 1 and {MAX_TRIALS} (runs in a row), got {ns.trials}"
        )
    if ns.ray_address is not None and not ns.ray_address.strip():
        raise BadInput(
            '--ray-address: expected a Ray address (HOST:PORT, ray://HOST:PORT or "local"), got ""'
        )


def theme_names() -> set[str]:
    """What `--theme` takes: the shipped themes, the user's own and Textual's built-in ones, read
    without starting the console (so a headless run refuses a typo as the console would not)."""
    import tomllib

    from platformdirs import user_config_dir

    names: set[str] = set()
    # the folders oxconsole.ui.theming loads from (that module imports Textual's app: too slow here)
    for folder in (
        Path(__file__).parents[1] / "ui" / "themes",
        Path(user_config_dir("oxconsole")) / "themes",
    ):
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else ():
            try:
                name = tomllib.loads(path.read_text(encoding="utf-8")).get("name")
            except (OSError, ValueError):
                continue  # the console names a theme file that does not load
            if isinstance(name, str) and name.strip():
                names.add(name.strip())
    try:
        from textual.theme import BUILTIN_THEMES
    except ImportError:
        return names
    return names | set(BUILTIN_THEMES)


def _run(ns: argparse.Namespace) -> int:
    if ns.prometheus:  # the same as [output] prometheus, checked with the workload
        ns.overrides.append(f"output.prometheus={json.dumps(ns.prometheus)}")
    if ns.trials is not None:
        ns.overrides.append(f"run.trials={ns.trials}")
    if ns.ray_address is not None:  # RAY_ADDRESS is what Ray reads; the engine process inherits it
        os.environ["RAY_ADDRESS"] = ns.ray_address
        ns.overrides.append(RAY_OVERRIDE)
    prep = prepare_run(ns.workload, ns.overrides, ns.output, ns.resume, ns.summary_json)
    headless = ns.headless or not sys.stdout.isatty()
    if not headless:
        code = _run_console(ns, prep)
        if code is not None:
            return code
    from oxconsole.cli.headless import report_outcome, run_headless, summary_writer
    from oxconsole.cli.prepare import SUMMARY_NAME
    from oxconsole.reports.outputs import beside_journal

    # summary.json beside the journal, as the engine process of a console run writes it
    keep, written = summary_writer([beside_journal(prep.results_path.resolve(), SUMMARY_NAME)])
    outcome = run_headless(prep, ns.progress_interval, before_end=keep)
    return report_outcome(outcome, prep, ns.summary_json, written)


def _run_console(ns: argparse.Namespace, prep: PreparedRun) -> int | None:
    """Start the engine process and open the console on it; None: no console, run headless."""
    from oxconsole.cli.console import console_session, load_console
    from oxconsole.cli.detached import spawn_host, wait_listening
    from oxconsole.cli.runend import RunEnd, show_end
    from oxconsole.control import SocketSource

    run_console, why = load_console()
    if run_console is None:
        print(f"oxconsole: {why}; running headless.", file=sys.stderr)
        return None
    started = time.time()
    host = spawn_host(
        prep,
        resume=ns.resume,
        summary_json=ns.summary_json,
        progress_interval=ns.progress_interval,
    )
    ended = RunEnd(summary_json=ns.summary_json, kept_aside=prep.kept_aside, log=host.log)

    def early_end(summary: dict[str, Any], results: Path) -> None:
        show_end(summary, results, ended, since=started)

    # An engine process still starting on a loaded machine (its imports alone are a second of CPU)
    # is waited for; one that exits is seen at once, and a hung one is stopped after a minute.
    entry = wait_listening(host, timeout=60.0, show_end=early_end)
    if isinstance(entry, int):
        return entry
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console_session(
        source, run_console, theme=ns.theme, refresh=ns.refresh, wait_exit=host.proc.wait, ended=ended
    )


def _sweep_console(argv: list[str], ns: argparse.Namespace, prep: PreparedRun) -> int | None:
    """A sweep under the console: the sweep headless in a process of its own (one control socket
    for every point), the console attached to it, the sweep's end printed as headless prints it;
    None: no console, run headless."""
    from oxconsole.cli.console import console_session, load_console
    from oxconsole.cli.detached import spawn_sweep_host, wait_listening
    from oxconsole.cli.runend import RunEnd
    from oxconsole.control import SocketSource

    run_console, why = load_console()
    if run_console is None:
        print(f"oxconsole: {why}; running headless.", file=sys.stderr)
        return None
    host = spawn_sweep_host(argv, prep)
    entry = wait_listening(host, timeout=60.0)
    if isinstance(entry, int):  # over (or failed) before the console could open: its own code
        rc = host.proc.poll()
        return entry if rc is None else rc
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    ended = RunEnd(summary_json=ns.summary_json, kept_aside=prep.kept_aside, log=host.log)
    return console_session(
        source, run_console, theme=ns.theme, refresh=ns.refresh, wait_exit=host.proc.wait, ended=ended
    )


if __name__ == "__main__":
    raise SystemExit(main())
