"""The in-flight panel's server line: what the engine says it is doing, beside the client's figures.

Why this module exists: when TTFT climbs after `+`, the person at the console needs to see whether
the engine is queueing, its KV cache is full, or the requests are elsewhere (in the client's own
queue, in transit). The line shows the engine's running and waiting requests and its KV usage
from its `/metrics` (`Gauges.server`), then where the queue is in words
(`metrics.server.live.queue_place`), in the 36 columns the panel has at 80x24.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import KV_USAGE, RUNNING, WAITING
from oxconsole.base.units import fmt_count
from oxconsole.metrics.bound import SERVER_KV_FULL
from oxconsole.metrics.server.live import fresh, queue_place
from oxconsole.ui.lines import Line, Palette

__all__ = ["busiest", "server_line"]

_WIDE = {
    "engine": "queue: engine",
    "client": "queue: client",
    "transit": "in transit",
    "others": "from others",
    "none": "no queue",
}
_NARROW = {"engine": "", "client": "client", "transit": "transit", "others": "others", "none": ""}
"""Narrow, requests waiting in the engine are said by the waiting figure's colour and the `bound`
line (`server queue`), and no queue by nothing."""


def busiest(server: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """The endpoint to show: of those read lately, the one with the most requests waiting in its
    engine (then the fullest KV cache); else the first."""

    def load(item: tuple[str, Mapping[str, Any]]) -> tuple[bool, float, float]:
        e = item[1]
        return fresh(e), float(e.get(WAITING.key) or 0.0), float(e.get(KV_USAGE.key) or 0.0)

    return max(server.items(), key=load)


def _n(v: Any) -> str:
    return fmt_count(int(v)) if isinstance(v, int | float) else "–"


Parts = list[tuple[str, str]]
"""(text, style) pieces of the line after its label."""


def server_line(
    server: Mapping[str, Mapping[str, Any]],
    waiting_slot: int,
    p: Palette,
    head: Line,
    narrow: bool,
    width: int = 80,
) -> Line:
    """`head` (the row's label) then "run 4 · wait 2 · kv 56% · queue: engine" for the
    busiest endpoint (its name too when there are several and room), or why there is nothing.
    Narrow, within `width`: the words for where the queue is go first when the engine queues
    (the `bound` line says it), then the KV usage unless it is high, before anything is cut."""
    name, e = busiest(server)
    if RUNNING.key not in e and WAITING.key not in e:  # the busiest never read: its warning says why
        head.append("no figures (see the warnings)" if e.get("failed") else "no figures yet", style=p.muted)
        return head
    sep = " " if narrow else " · "
    waiting = e.get(WAITING.key)
    core: Parts = [("run ", p.muted), (_n(e.get(RUNNING.key)), "bold"), (sep + "wait ", p.muted)]
    core.append((_n(waiting), p.warning if isinstance(waiting, int | float) and waiting > 0 else "bold"))
    kv_parts: Parts = []
    kv = e.get(KV_USAGE.key)
    high = isinstance(kv, int | float) and kv >= SERVER_KV_FULL
    if isinstance(kv, int | float):
        kv_parts = [
            (sep + ("kv" if narrow else "kv "), p.muted),
            (f"{100 * kv:.0f}%", p.warning if high else "bold"),
        ]
    tail: Parts = []
    if not fresh(e):
        age = e.get("age_s")
        tail = [(sep + (f"{age:.0f}s old" if isinstance(age, int | float) else "old"), p.warning)]
    else:
        where, n = queue_place(e, waiting_slot)
        words = (_NARROW if narrow else _WIDE)[where]
        if where == "others":  # the engine serves more than this run sends
            words = f"+{fmt_count(n)} {words}"
        elif where in ("client", "transit"):
            words = f"{words} {fmt_count(n)}"
        if words:
            tail = [(sep, p.muted), (words, p.foreground)]
        if len(server) > 1 and not narrow:
            tail.append((f" ({name})", p.muted))
    room = width - head.cell_len
    for parts in (core + kv_parts + tail, core + (kv_parts if high else []) + tail, core + kv_parts, core):
        if sum(len(text) for text, _ in parts) <= room:
            break
    for text, style in parts:
        head.append(text, style=style)
    return head
