"""Answers that must be right in the shareable reports: the HTML report's "Quality and the cascade"
section (and its Markdown tables) and the compared runs' quality rows.

Why this module exists: a report answers "how many answers were right, per model asked, and what
did one right answer cost?" from the summary's `quality`, `cascade` and `cost.per_valid` alone;
comparing journals adds the valid share and $ per valid answer (actual and per plan) as figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from oxconsole.base.figures import COST, COST_PER_VALID, LATENCY, VALID_FRACTION
from oxconsole.base.units import fmt_money, fmt_ms

__all__ = [
    "MONEY_HEAD",
    "QUALITY_HEAD",
    "quality_figures",
    "quality_rows",
    "quality_section",
    "quality_tables",
]


def _table(head: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _pct(v: Any) -> str:
    return f"{100.0 * float(v or 0.0):.1f}%"


QUALITY_HEAD = ("model", "asked", "valid", VALID_FRACTION.header, "answers that stood")
MONEY_HEAD = ("prices", "total", "per valid answer")


def quality_tables(s: Mapping[str, Any]) -> tuple[str, list[tuple[str, ...]], list[tuple[str, ...]]] | None:
    """What the HTML and the Markdown report say of `[quality]` (None without it): a sentence
    (valid answers, escalations, an answer's p50 and p99), one row per model asked
    (`QUALITY_HEAD`), and the total and $ per valid answer at the actual prices and under each
    plan (`MONEY_HEAD`)."""
    q = s.get("quality")
    if not isinstance(q, Mapping):
        return None
    final = (s.get("cascade") or {}).get("final") or {}
    models: list[tuple[str, ...]] = [
        (str(n), f"{int(m.get('asked') or 0):,}", f"{int(m.get('valid') or 0):,}", _pct(m.get("fraction")),
         f"{int(final.get(n) or 0):,}")
        for n, m in (q.get("models") or {}).items()
    ]  # fmt: skip
    cost = s.get("cost") or {}
    money: list[tuple[str, ...]] = [
        ("actual prices", COST.text(COST.of(s)), COST_PER_VALID.text(COST_PER_VALID.of(s)))
    ]
    money += [
        (str(n), fmt_money(p.get("total")), fmt_money(p.get("per_valid")))
        for n, p in (cost.get("plans") or {}).items()
    ]
    lat = LATENCY.of(q) or {}
    escalated = int((s.get("cascade") or {}).get("escalated") or 0)
    note = (
        f"{int(q.get('valid') or 0):,} valid answers of {int(q.get('judged') or 0):,} judged "
        f"({_pct(q.get('fraction'))}); {escalated:,} requests sent on down the cascade. "
        f"An answer took {fmt_ms(lat.get('p50'))} (p50), {fmt_ms(lat.get('p99'))} (p99), "
        "escalations included. "
        "Every model asked is billed: $ per valid answer divides each total by the valid answers."
    )
    return note, models, money


def quality_section(s: Mapping[str, Any]) -> str:
    """The section (empty without `[quality]`): valid answers per model asked, where the cascade
    left the requests, what a valid answer took and cost at the actual prices and under each plan."""
    tables = quality_tables(s)
    if tables is None:
        return ""
    note, models, money = tables
    return (
        '<section id="quality"><h2>Quality and the cascade</h2>'
        f'<p class="note">{escape(note)}</p>'
        + _table(QUALITY_HEAD, models)
        + _table(MONEY_HEAD, money)
        + "</section>"
    )


def quality_figures(s: Mapping[str, Any]) -> dict[str, float]:
    """The figures a comparison adds for a run with `[quality]`: the valid share (%), $ per valid
    answer at the actual prices and under each plan (none without `[quality]`). The money figures'
    keys start with "cost" (every report formats them as money) but not "cost." (the plans' rows)."""
    q = s.get("quality")
    if not isinstance(q, Mapping):
        return {}
    cost = s.get("cost") or {}
    out = {VALID_FRACTION.id: 100.0 * float(q.get("fraction") or 0.0)}
    if isinstance(cost.get("per_valid"), int | float):
        out[COST_PER_VALID.id] = float(cost["per_valid"])
    for name, p in (cost.get("plans") or {}).items():
        if isinstance(p.get("per_valid"), int | float):
            out[f"{COST_PER_VALID.id}.{name}"] = float(p["per_valid"])
    return out


def quality_rows(runs: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(figure, label) of every quality figure any run has, in the order first seen (labels fit the
    compare table's 16 columns)."""
    keys: dict[str, None] = {}
    for figs in runs:
        keys.update((k, None) for k in figs if k == VALID_FRACTION.id or k.startswith(COST_PER_VALID.id))
    out = []
    for k in keys:
        if k == VALID_FRACTION.id:
            out.append((k, VALID_FRACTION.header))
        elif k == COST_PER_VALID.id:
            out.append((k, COST_PER_VALID.label))
        else:
            name = k.removeprefix(COST_PER_VALID.id + ".")
            out.append((k, (name if len(name) <= 9 else name[:8] + "…") + " /valid"))
    return out
