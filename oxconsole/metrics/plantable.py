"""The summary's price plans as text, and the plans a journal was run with.

Why this module exists: the summary table (`oxconsole report`, the end of a headless run) shows
the plans block beside the run's other figures, and `report` prices a journal under the plans its
run had unless told otherwise; both read the summary's `cost` and the journal's manifest only,
without the engine or the workload file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oxconsole.metrics.plans import at_pace
from oxconsole.workload.errors import Problems, join_key
from oxconsole.workload.plans import PricePlan, parse_plans

__all__ = ["cheapest", "fmt_money", "plan_lines", "stored_plans", "unused_overrides"]

NONE = "–"


def fmt_money(v: float | None) -> str:
    """A cost with the digits that matter: 6 decimals under 1 (three significant digits below
    0.0001), 4 under 100, then 2; never an exponent."""
    if v is None:
        return NONE
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.2f}"
    if abs(v) >= 1:
        return f"{v:.4f}"
    if abs(v) >= 0.0001:
        return f"{v:.6f}"
    return f"{v:.{2 - math.floor(math.log10(abs(v)))}f}"


def cheapest(totals: Mapping[str, float | None]) -> str | None:
    """The name with the lowest figure (the first of equals); None when none has one."""
    best: tuple[float, str] | None = None
    for name, v in totals.items():
        if v is not None and (best is None or v < best[0]):
            best = (v, name)
    return None if best is None else best[1]


def _actual_projected(s: Mapping[str, Any]) -> float | None:
    req = s.get("requests") or {}
    total = float((s.get("cost") or {}).get("total") or 0.0)
    not_sent = req.get("not_sent", 0)
    return at_pace(total, int(req.get("total") or 0), None if not_sent is None else int(not_sent))


def plan_lines(s: Mapping[str, Any]) -> list[str]:
    """The plans block of the summary table (16 + 4 * 14 = 72 columns): the actual prices first,
    then each plan; `*` marks the cheapest projected (else total)."""
    cost = s.get("cost") or {}
    plans = cost.get("plans")
    if not plans:
        return []
    rows: list[tuple[str, float, float, float | None]] = [
        ("actual", float(cost.get("total") or 0.0), float(cost.get("per_task") or 0.0), _actual_projected(s))
    ]
    for name, p in plans.items():
        pr = p.get("projected")
        rows.append((str(name), float(p["total"]), float(p["per_task"]), None if pr is None else float(pr)))
    key = {n: (pr if pr is not None else t) for n, t, _, pr in rows}
    best = cheapest(key)
    lines = ["", f"{'plan':<16}{'total':>14}{'per task':>14}{'projected':>14}{'vs actual':>14}"]
    base = rows[0][1]
    for name, total, unit, pr in rows:
        vs = "" if name == "actual" or not base else f"{100.0 * (total - base) / base:+.0f}%"
        mark = " *" if name == best and len(rows) > 1 else ""
        label = name if len(name) <= 15 else name[:14] + "…"
        lines.append(
            f"{label:<16}{fmt_money(total):>14}{fmt_money(unit):>14}{fmt_money(pr):>14}{vs:>14}{mark}".rstrip()
        )
    lines.append("actual: the models' own prices; plans: the same requests elsewhere; * cheapest")
    return lines


def stored_plans(results: Path, manifest: Mapping[str, Any]) -> dict[str, PricePlan]:
    """The plans a journal's run was started with (its manifest's `plans`); none when it has none
    or they no longer read as plans (a manifest edited by hand)."""
    raw = manifest.get("plans")
    if not isinstance(raw, dict) or not raw:
        return {}
    errs = Problems(os.fspath(results))
    plans = parse_plans(errs, raw, None)
    return {} if errs else plans


def unused_overrides(plans: Mapping[str, PricePlan] | None, summary: Mapping[str, Any]) -> list[str]:
    """Warnings for plans' model prices that name no model of the journal (a misspelt name would
    silently leave that model at the plan's default)."""
    if not plans:
        return []
    models = set(summary.get("models") or {})
    out = []
    for name, plan in plans.items():
        for m in plan.models:
            if m not in models:
                where = join_key(join_key(join_key("plans", name), "models"), m)
                out.append(f"{where}: no model of that name in the journal (its prices are unused)")
    return out
