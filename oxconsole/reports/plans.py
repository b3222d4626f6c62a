"""Price plans in the shareable reports: the HTML report's "cost by plan" and the compared runs'
cost rows.

Why this module exists: a report answers "what would this run have cost elsewhere?" from the
summary's `cost.plans` alone; the bar chart is a few lines of inline SVG (no script, no asset), and
comparing journals adds each plan's total and cost per task as figures like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from oxconsole.base.figures import COST, COST_PER_TASK
from oxconsole.base.units import fmt_money
from oxconsole.metrics.plans import cheapest
from oxconsole.reports.svg import PALETTE, W

__all__ = ["cost_by_plan", "cost_figures", "cost_rows", "money_cell", "plan_table"]

_ROW_H, _LABEL_W, _VALUE_W = 24, 150, 110
_BAR_W = W - _LABEL_W - _VALUE_W  # the width of every other chart: text at one size on the page

_Row = tuple[str, float, float, float | None]
"""(name, total, per task, projected)"""


def cost_figures(s: Mapping[str, Any]) -> dict[str, float]:
    """The figures a comparison adds for a run with plans: the actual total and per task, then
    each plan's (none without plans)."""
    cost = s.get("cost") or {}
    plans = cost.get("plans")
    if not plans:
        return {}
    out = {f.id: f.value(s) or 0.0 for f in (COST, COST_PER_TASK)}
    for name, p in plans.items():
        out[f"cost.plans.{name}.total"] = float(p["total"])
        out[f"cost.plans.{name}.per_task"] = float(p["per_task"])
    return out


def cost_rows(runs: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(figure, label) of every cost figure any run has, in the order first seen; labels fit the
    compare table's 16 columns."""
    keys: dict[str, None] = {}
    for figs in runs:
        keys.update((k, None) for k in figs if k.startswith("cost."))
    return [(k, _label(k)) for k in keys]


def _label(key: str) -> str:
    for f in (COST, COST_PER_TASK):
        if key == f.id:
            return f.label
    name, _, what = key.removeprefix("cost.plans.").rpartition(".")
    suffix = " /task" if what == "per_task" else ""
    room = 15 - len(suffix)
    return (name if len(name) <= room else name[: room - 1] + "…") + suffix


def money_cell(v: float | None) -> str:
    """A cost in the compare table."""
    return "-" if v is None else fmt_money(v)


def _plan_rows(s: Mapping[str, Any]) -> list[_Row]:
    """The actual prices, then each plan of the summary (none without plans)."""
    cost = s.get("cost") or {}
    plans = cost.get("plans")
    if not plans:
        return []
    rows: list[_Row] = [
        ("actual prices", float(cost.get("total") or 0.0), float(cost.get("per_task") or 0.0), None)
    ]
    for name, p in plans.items():
        pr = p.get("projected")
        rows.append((str(name), float(p["total"]), float(p["per_task"]), None if pr is None else float(pr)))
    return rows


def plan_table(s: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The plans as (head, rows) of text cells, for a Markdown table (no rows without plans)."""
    rows = _plan_rows(s)
    head = ["plan", "total", "per task", "projected"]
    return head, [
        [n, fmt_money(t), fmt_money(u), fmt_money(pr) if pr is not None else "–"] for n, t, u, pr in rows
    ]


def cost_by_plan(s: Mapping[str, Any]) -> str:
    """The "Cost by plan" section: a bar per plan (the actual prices first, the cheapest marked)
    and a table of total, per task and projected; empty without plans."""
    rows = _plan_rows(s)
    if not rows:
        return ""
    best = cheapest({n: t for n, t, _, _ in rows})
    table = _table(rows, best)
    note = (
        "The same requests priced under each plan (requests that ended in error cost nothing); "
        "the actual prices are the models' own. Bold: the cheapest."
    )
    return (
        '<section id="plans"><h2>Cost by plan</h2>'
        f'<p class="note">{escape(note)}</p><div class="charts"><figure>{_bars(rows, best)}</figure></div>'
        f"{table}</section>"
    )


def _bars(rows: list[_Row], best: str | None) -> str:
    top = max((t for _, t, _, _ in rows), default=0.0) or 1.0
    width = _LABEL_W + _BAR_W + _VALUE_W
    height = _ROW_H * len(rows) + 8
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="cost by plan" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for i, (name, total, _, _) in enumerate(rows):
        y = 4 + i * _ROW_H
        w = max(1.0, _BAR_W * total / top) if total > 0 else 0.0
        color = PALETTE[1] if name == best else PALETTE[0] if i else "#94a3b8"
        weight = ' font-weight="600"' if name == best else ""
        parts.append(
            f'<text x="{_LABEL_W - 8}" y="{y + 16}" text-anchor="end"{weight}>{escape(name)}</text>'
            f'<rect x="{_LABEL_W}" y="{y + 3}" width="{w:.1f}" height="{_ROW_H - 8}" fill="{color}" rx="2"/>'
            f'<text x="{_LABEL_W + w + 6:.1f}" y="{y + 16}"{weight}>{escape(fmt_money(total))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(rows: list[_Row], best: str | None) -> str:
    body = []
    for name, total, unit, pr in rows:
        cells = [name, fmt_money(total), fmt_money(unit), fmt_money(pr) if pr is not None else "–"]
        tds = "".join(f"<td>{escape(c)}</td>" for c in cells)
        style = ' style="font-weight:600"' if name == best else ""
        body.append(f"<tr{style}>{tds}</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("plan", "total", "per task", "projected"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
