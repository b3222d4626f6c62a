"""`oxconsole attach [NAME]`: open the console on a run already going (started headless, or
detached with `d`).

Why this module exists: the command's flags and its refusals, before the console opens on the run
(`oxconsole.cli.console`); which run a name means is `ps.choose`, shared with the agents' tools.
"""

from __future__ import annotations

import math
import sys

from oxconsole.base.exits import EXIT_BAD_INPUT, BadInput, Parser
from oxconsole.cli import console
from oxconsole.cli.ps import choose, say_run_dirs
from oxconsole.control import SocketSource, list_runs

__all__ = ["attach_main"]


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


def attach_main(argv: list[str]) -> int:
    ns = _attach_parser().parse_args(argv)
    if ns.refresh <= 0 or not math.isfinite(ns.refresh):
        print(
            f"oxconsole attach: --refresh: expected a number of updates per second > 0, got {ns.refresh}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    say_run_dirs("oxconsole attach")
    try:
        entry = choose(list_runs(), ns.name)
    except BadInput as e:
        print(f"oxconsole attach: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run_console, why = console.load_console()
    if run_console is None:
        print(f"oxconsole attach: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console.console_session(source, run_console, theme=ns.theme, refresh=ns.refresh, attached=True)
