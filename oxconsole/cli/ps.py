"""`oxconsole ps`: the runs going on this machine for this user, as a table or JSON.

Why this module exists: `ps`, `attach` and the agents' tools list runs the same way (the same
table, the same notes on folders not looked in) and pick the run a name means the same way
(`choose`); listing them needs neither the engine nor the UI.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import orjson

from oxconsole.base.exits import BadInput, Parser
from oxconsole.base.safetext import shown
from oxconsole.base.units import fmt_duration
from oxconsole.control import RunEntry, list_runs, run_dirs

__all__ = ["NO_RUN", "choose", "ps_main", "render_ps", "say_run_dirs"]

NO_RUN = "no run is going; start one with oxconsole WORKLOAD.toml"


def _progress(e: RunEntry) -> str:
    if e.total:
        return f"{e.done}/{e.total} {100.0 * e.done / e.total:.0f}%"
    return f"{e.done}"


def render_ps(entries: list[RunEntry], now: float | None = None) -> str:
    now = time.time() if now is None else now
    head = ("NAME", "PID", "STATE", "PROGRESS", "REQ/S", "ERR", "ELAPSED")
    rows = [
        (
            shown(e.name, one_line=True),  # a run's name comes from its workload: text only
            str(e.pid),
            e.state,
            _progress(e),
            f"{e.req_per_s:.1f}",
            str(e.errors),
            fmt_duration(now - e.started_at),
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


def _match(entries: list[RunEntry], name: str) -> Iterator[RunEntry]:
    exact = [e for e in entries if e.key == name]
    yield from exact or [e for e in entries if e.name == name]


def choose(entries: list[RunEntry], name: str | None) -> RunEntry:
    """The one run `name` means among those going (NAME-PID, or NAME while one run has it; none:
    the only run); `BadInput` saying why, with the runs going, if not exactly one. The agents'
    tools (`oxconsole mcp`) pick a run by the same words."""
    if not entries:
        raise BadInput(NO_RUN)
    if name is None:
        if len(entries) == 1:
            return entries[0]
        raise BadInput("several runs are going; name one (NAME or NAME-PID):\n" + render_ps(entries))
    found = list(_match(entries, name))
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadInput(f"no run named {name!r} is going; the runs going are:\n" + render_ps(entries))
    raise BadInput(f"several runs are named {name!r}; name one as NAME-PID:\n" + render_ps(found))
