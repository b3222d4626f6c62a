"""`oxconsole attach [NAME]`: open the console on a run already going (started headless, or
detached with `d`).

Why this module exists: picking the one run a name means (NAME or NAME-PID, among the runs
going) is its own question, apart from opening the console on it (`oxconsole.cli.console`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator

from oxconsole.base.exits import EXIT_BAD_INPUT, Parser
from oxconsole.cli import console
from oxconsole.cli.ps import NO_RUN, render_ps, say_run_dirs
from oxconsole.control import RunEntry, SocketSource, list_runs

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
    run_console, why = console.load_console()
    if run_console is None:
        print(f"oxconsole attach: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console.console_session(source, run_console, theme=ns.theme, refresh=ns.refresh, attached=True)
