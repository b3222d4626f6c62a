"""The cascade view: each model's valid rate and escalation rate, and what one valid answer costs,
now and projected, at the actual prices and under each plan.

Why this module exists: the article's trade-off (small models first, large ones for what they get
wrong) is judged by these figures while the run goes, from the snapshot alone (`Snapshot.quality`,
`metrics/quality.live_quality`), so the view is a plain function, testable without Textual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import percent
from oxconsole.base.units import fmt_money
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.panels.cost import ACTUAL
from oxconsole.ui.widgets import Panel

__all__ = ["ACTUAL", "CascadePanel", "cascade_lines", "per_valid_rows"]


def per_valid_rows(s: Snapshot) -> list[tuple[str, float | None, float | None]]:
    """(price table, $ per valid answer so far, projected): the actual prices, then each plan. The
    projection divides the projected cost by the valid answers the whole workload would give at
    the valid share so far (None when either is unknown)."""
    q = s.quality or {}
    valid = int(q.get("valid") or 0)
    fraction = float(q.get("fraction") or 0.0)
    total = s.gauges.total_expected
    expected_valid = fraction * total if total else 0.0

    def per(cost: float | None, n: float) -> float | None:
        return None if cost is None or n <= 0 else cost / n

    rows = [(ACTUAL, per(s.cost, valid), per(s.projected_cost, expected_valid))]
    rows += [(p.name, per(p.total, valid), per(p.projected, expected_valid)) for p in s.plans]
    return rows


def cascade_lines(s: Snapshot, p: Palette, width: int, height: int = 100) -> list[Line]:
    """The steps in force and the valid share, one row per model asked, then $ per valid answer."""
    q: Mapping[str, Any] = s.quality or {}
    steps = " → ".join(str(m) for m in q.get("steps") or ()) or "none (every answer stands)"
    judged, valid = int(q.get("judged") or 0), int(q.get("valid") or 0)
    escalated = int(q.get("escalated") or 0)
    head = Line("cascade ", style=p.muted).append(steps, style="bold")
    head.append(f" · valid {percent(float(q.get('fraction') or 0.0))} ({valid:,}/{judged:,})")
    head.append(f" · escalated {escalated:,}", style=p.muted)
    cols = [
        Col("model", right=False, flex=True, min_width=8),
        Col("asked"),
        Col("valid"),
        Col("escalated"),
    ]
    cells: list[list[Cell]] = []
    for name, m in (q.get("models") or {}).items():
        asked = int(m.get("asked") or 0)
        esc = int(m.get("escalated") or 0)
        frac = float(m.get("fraction") or 0.0)
        style = p.success if frac >= 0.95 else (p.warning if frac >= 0.5 else p.error)
        cells.append(
            [
                Line(str(name)),
                Line(f"{asked:,}"),
                Line(percent(frac), style=style),
                Line(percent(esc / asked) if asked else "–", style=p.muted),
            ]
        )
    lines = [head, *grid(cols, cells, width, p)]
    money = [Col("$ per valid answer", right=False, flex=True, min_width=8), Col("now"), Col("projected")]
    rows = [[Line(n), Line(fmt_money(a)), Line(fmt_money(b))] for n, a, b in per_valid_rows(s)]
    lines += grid(money, rows, width, p)
    return fit(lines[: max(1, height)], width)


class CascadePanel(Panel):
    """Each model's valid and escalation rates, and $ per valid answer now and projected."""

    TITLE = "cascade"
    EVERY = 2
    DEFAULT_CSS = """
    CascadePanel { height: auto; max-height: 12; }
    """

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        q = snap.quality or {}
        return q.get("judged"), q.get("steps"), per_valid_rows(snap), width, height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return cascade_lines(snap, self.palette, width, height)
