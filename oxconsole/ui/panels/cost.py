"""The cost view: what the run costs at its models' own prices and what it would cost under each
what-if plan, so far, per task and projected to the end of the workload, the cheapest marked.

Why this module exists: the article's question ("what would this same traffic cost on the other
plan?") is answered live from the snapshot's figures alone (`Snapshot.plans`, priced by
`metrics/plans.py`), so the table is a plain function, testable without Textual.
"""

from __future__ import annotations

from oxconsole.base.units import fmt_money
from oxconsole.metrics.plans import cheapest
from oxconsole.metrics.snapshot import PlanCost, Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.widgets import Panel

__all__ = ["CostPanel", "cost_lines", "cost_rows"]

ACTUAL = "actual prices"
"""The first row: the models' own prices (the run's real cost)."""


def cost_rows(s: Snapshot) -> list[PlanCost]:
    """The actual prices, then each plan, as the view's rows."""
    done = s.counts.total
    actual = PlanCost(ACTUAL, s.cost, s.cost / done if done else 0.0, s.projected_cost)
    return [actual, *s.plans]


def cost_lines(s: Snapshot, p: Palette, width: int, height: int = 100) -> list[Line]:
    """One row per price table: total so far, per task, projected and how the projection compares
    with the actual prices'; the cheapest (projected, else so far) in bold green with a mark."""
    rows = cost_rows(s)
    best = cheapest({r.name: r.projected if r.projected is not None else r.total for r in rows})
    base = rows[0].projected if rows[0].projected is not None else rows[0].total
    cols = [
        Col("plan", right=False, flex=True, min_width=8),
        Col("so far"),
        Col("per task"),
        Col("projected"),
        Col("vs actual"),
    ]
    cells: list[list[Cell]] = []
    for i, r in enumerate(rows):
        mine = r.projected if r.projected is not None else r.total
        style = f"bold {p.success}" if r.name == best and len(rows) > 1 else ("" if i else "bold")
        vs = "" if i == 0 or not base else f"{round(100.0 * (mine - base) / base):+d}%"  # no "-0%"
        name = Line(r.name, style=style)
        if r.name == best and len(rows) > 1:
            name.append(" ◀", style=p.success)
        cells.append(
            [
                name,
                Line(fmt_money(r.total), style=style),
                Line(fmt_money(r.per_task), style=style),
                Line(fmt_money(r.projected), style=style),
                Line(vs, style=p.muted if not vs else (p.success if mine < base else p.warning)),
            ]
        )
    lines = grid(cols, cells, width, p)
    lines.append(Line(_footnote(s), style=p.muted))
    if not s.plans and height > len(lines) + 1:
        lines.append(Line("add [plans.NAME] tables to compare what-if prices", style=p.muted))
    return fit(lines[: max(1, height)], width)


def _footnote(s: Snapshot) -> str:
    total = s.gauges.total_expected
    done = s.counts.total
    if total is None:
        return f"{done:,} tasks done · no projection: the workload's size is open"
    return f"{done:,} of {total:,} tasks · projected at this pace · errors cost nothing"


class CostPanel(Panel):
    """Total so far, per task and projected, at the actual prices and under each plan."""

    TITLE = "cost by plan"
    EVERY = 2
    DEFAULT_CSS = """
    CostPanel { height: auto; max-height: 12; }
    """

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        return cost_rows(snap), snap.counts.total, snap.gauges.total_expected, height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return cost_lines(snap, self.palette, width, height)
