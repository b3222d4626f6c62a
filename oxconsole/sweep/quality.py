"""A sweep's answers that must be right: per point, valid answers per second, p99 latency and
what one valid answer costs at the actual prices and under each plan.

Why this module exists: a sweep over the cascade (`--over routing.cascade=small+big,big`) or over
the small model's share is the article's trade-off measured, and these are its figures; read off
the points' summaries (`quality`, `cost.per_valid`), beside the main table, only when the workload
has `[quality]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oxconsole.base.figures import COST_PER_VALID, GOODPUT, LATENCY, VALID_FRACTION, percent
from oxconsole.base.units import fmt_money, fmt_ms
from oxconsole.metrics.knee import load_order

__all__ = ["quality_table"]


def _valid_per_s(s: Mapping[str, Any]) -> float:
    """Valid answers per second; with `[slo]`, good ones (a good request is also valid)."""
    if isinstance(s.get("goodput"), Mapping):
        return GOODPUT.value(s) or 0.0
    duration = float(s.get("duration_s") or 0.0)
    valid = int((s.get("quality") or {}).get("valid") or 0)
    return valid / duration if duration > 0 else 0.0


def _money(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else fmt_money(v)


def quality_table(points: Sequence[Mapping[str, Any]], knee: int | None) -> list[str]:
    """The table's lines (none when no point judged its answers)."""
    if not any(isinstance(p["summary"].get("quality"), Mapping) for p in points):
        return []
    names: list[str] = []
    for p in points:
        for name in (p["summary"].get("cost") or {}).get("plans") or {}:
            if name not in names:
                names.append(name)
    rows: list[tuple[str, ...]] = [
        ("", "#", "value", "valid/s", "valid", "escalated", "answer p99", "$/valid", *names)
    ]
    for i in load_order([p["value"] for p in points]):
        s = points[i]["summary"]
        q = s.get("quality") or {}
        cost = s.get("cost") or {}
        plans = cost.get("plans") or {}
        p99 = LATENCY.at("p99").of(q if LATENCY.of(q) else s)  # escalations included
        rows.append(
            (
                "*" if i == knee else "",
                str(i + 1),
                str(points[i].get("text", points[i]["value"])),
                f"{_valid_per_s(s):.2f}",
                percent(VALID_FRACTION.value(s) or 0.0),
                str(int((s.get("cascade") or {}).get("escalated") or 0)),
                "-" if p99 is None else fmt_ms(float(p99)),
                _money(COST_PER_VALID.of(s)),
                *(_money((plans.get(n) or {}).get("per_valid")) for n in names),
            )
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    out = ["valid answers and $ per valid answer" + (" by plan:" if names else ":")]
    for r in rows:
        cells = (
            cell.ljust(w) if c < 3 else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        out.append("  ".join(cells).rstrip())
    return out
