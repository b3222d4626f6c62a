"""The console's packing figures: HTTP requests per second and cost per task beside tasks/s.

Why this module exists: with `[packing]` each finished record is a task, so the console's rates
count tasks; what the endpoint saw (requests/s) and what a task cost are what packing changes,
and they are shown beside them only when packing is on.
"""

from __future__ import annotations

from oxconsole.base.figures import REQUESTS_PER_S
from oxconsole.base.units import fmt_money, fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line, Palette

__all__ = ["append_packing", "rate_label"]


def rate_label(s: Snapshot) -> str:
    """What the finished-record rate counts: tasks with packing on, requests otherwise."""
    return f"{REQUESTS_PER_S.short} " if s.packing is None else "tasks/s "


def append_packing(t: Line, s: Snapshot, p: Palette) -> None:
    """` · req/s N run · cost/task C` on a rates line (nothing without packing)."""
    pk = s.packing
    if pk is None:
        return
    sent = pk.get("requests_sent", 0.0)
    t.append(f" · {REQUESTS_PER_S.short} ", style=p.muted)
    t.append(fmt_rate(sent / s.elapsed_s if s.elapsed_s > 0 else 0.0, ""), style=p.primary)
    tasks = pk.get("tasks", 0.0)
    if tasks:
        t.append(" · cost/task ", style=p.muted)
        t.append(fmt_money(s.cost / tasks))
