"""A sweep's results: the table (one row per point, the knee marked) and the `--summary-json`
object (`{"over", "points": [{"value", "slo_met", "summary"}], "knee": {"index", "value"}}`).

Why this module exists: the table and the JSON are both read off the ended points and the knee
rule; keeping them apart from the run lets a resumed or stopped sweep show the very same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import (
    COST_PER_TASK,
    ERRORS,
    GOOD_FRACTION,
    GOODPUT,
    ITL,
    LATENCY,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    TTFT,
    Figure,
)
from oxconsole.base.units import fmt_money, fmt_ms
from oxconsole.metrics.knee import knee_index, load_order, offered, slo_met
from oxconsole.metrics.plans import summary_per_task
from oxconsole.sweep.plan import SHORT_KEYS
from oxconsole.sweep.quality import quality_table

__all__ = ["knee_of", "render_table", "sweep_json"]

Point = Mapping[str, Any]


def sweep_json(over: str, points: list[Point]) -> dict[str, Any]:
    """The contract's sweep object; `knee` is null when no point qualifies. `slo_met` is null for
    a workload without `[slo]`. `knee.index` is the knee's position in `points`."""
    summaries = [p["summary"] for p in points]
    values = [p["value"] for p in points]
    k = _knee(over, values, summaries)
    return {
        "over": over,
        "points": [
            {"value": p["value"], "slo_met": slo_met(p["summary"]), "summary": p["summary"]} for p in points
        ],
        "knee": None if k is None else {"index": k, "value": values[k]},
    }


def _knee(over: str, values: list[Any], summaries: list[Any]) -> int | None:
    """The knee; the values are the offered load when the key is concurrency or rate."""
    return knee_index(values, summaries, load=SHORT_KEYS.get(over, over) in SHORT_KEYS.values())


def knee_of(over: str, points: list[Point]) -> int | None:
    """The knee's position among `points` (ended points, in the order they ran); None if none."""
    if not points:
        return None
    return _knee(over, [p["value"] for p in points], [p["summary"] for p in points])


def _pair(summary: Mapping[str, Any], f: Figure) -> str:
    """`p50/p99` in milliseconds, the unit said once above the table (`101/104`, `5.0/5.4`)."""
    p50 = f.at("p50").value(summary)
    if p50 is None:
        return "-"
    return f"{fmt_ms(p50, unit=False)}/{fmt_ms(f.at('p99').value(summary) or 0.0, unit=False)}"


def _goodput(summary: Mapping[str, Any]) -> str:
    if not isinstance(summary.get("goodput"), Mapping):
        return "-"
    return f"{GOODPUT.value(summary) or 0.0:.1f} {100 * (GOOD_FRACTION.value(summary) or 0.0):.0f}%"


def _cost_per_task(summary: Mapping[str, Any]) -> str:
    """The summary's `cost.per_task` (cost over every task, errors cost nothing)."""
    per_task = summary_per_task(summary)
    return "-" if not per_task else fmt_money(per_task)


def _plans_table(points: list[Point], knee: int | None) -> list[str]:
    """With `[plans.NAME]`: cost per task under the actual prices and each plan, beside tasks/s
    and latency per task (the article's trade-off, e.g. over `packing.size`); none without plans."""
    names: list[str] = []
    for p in points:
        for name in (p["summary"].get("cost") or {}).get("plans") or {}:
            if name not in names:
                names.append(name)
    if not names:
        return []
    head = ("", "#", "value", "tasks/s", LATENCY.at("p50").label, "actual", *names)
    rows = [head]
    for i in _by_value(points):
        p = points[i]
        s = p["summary"]
        plans = (s.get("cost") or {}).get("plans") or {}
        lat = LATENCY.at("p50").value(s)
        rows.append(
            (
                "*" if i == knee else "",
                str(i + 1),
                str(p.get("text", p["value"])),
                f"{REQUESTS_PER_S.value(s) or 0.0:.2f}",
                "-" if lat is None else fmt_ms(lat),
                _cost_per_task(s),
                *(_money((plans.get(n) or {}).get("per_task")) for n in names),
            )
        )
    return ["cost per task by plan:", *_columns(rows, left=3)]


def _money(v: Any) -> str:
    return "-" if v is None else fmt_money(v)


def _columns(rows: list[tuple[str, ...]], left: int) -> list[str]:
    """Rows as aligned text: the first `left` columns to the left, the others to the right."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(w) if c >= left else cell.ljust(w)
            for c, (cell, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


COLUMNS = (
    "", "#", "value", "offered", REQUESTS_PER_S.short, OUTPUT_TOKENS_PER_S.short, "goodput",
    TTFT.label, ITL.label, LATENCY.label, ERRORS.short, COST_PER_TASK.label,
)  # fmt: skip
"""The table's columns by their heads. A column is left out when it would say nothing (see
`_shown`), so that the table fits 80 columns in the usual cases."""


def _cells(i: int, point: Point, knee: int | None) -> dict[str, str]:
    s = point["summary"]
    cells = (
        "*" if i == knee else "",
        str(i),  # numbered from 0, as the JSON's index and the journal's point
        str(point.get("text", point["value"])),
        offered(point.get("load") or {}),
        f"{REQUESTS_PER_S.value(s) or 0.0:.2f}",
        f"{OUTPUT_TOKENS_PER_S.value(s) or 0.0:.0f}",
        _goodput(s),
        *(_pair(s, f) for f in (TTFT, ITL, LATENCY)),
        str(int(ERRORS.value(s) or 0)),
        _cost_per_task(s),
    )
    return dict(zip(COLUMNS, cells, strict=True))


def _shown(over: str, cells: list[dict[str, str]]) -> list[str]:
    """The columns worth a place: `offered` unless each point offered its own value (a sweep over
    concurrency, or over rate), goodput only with `[slo]`, ITL only when a point streamed tokens."""
    key = {v: k for k, v in SHORT_KEYS.items()}.get(over, over)  # run.concurrency -> concurrency
    offered = {"concurrency": "c={}", "rate": "{}/s"}.get(key)
    offers_value = offered is not None and all(c["offered"] == offered.format(c["value"]) for c in cells)
    out = []
    for head in COLUMNS:
        if head == "offered" and offers_value:
            continue
        if head in ("goodput", ITL.label) and all(c[head] == "-" for c in cells):
            continue
        out.append(head)
    return out


def _by_value(points: list[Point]) -> list[int]:
    """The points' positions from the lowest value to the highest (the order they ran when the
    values are not numbers): a search measures 1, 2, 4, 8, 6, 7 and the table reads 1, 2, 4, 6, 7, 8."""
    return load_order([p["value"] for p in points])


def render_table(over: str, points: list[Point]) -> str:
    """One row per ended point, by value; `#` numbers the points in the order they ran, from 0, as
    the JSON's `index`, the journal's `point` and the ids' `@POINT` do; the knee marked `*` and
    named below (`knee: point #2`)."""
    if not points:
        return f"sweep over {over}: no point ended"
    k = _knee(over, [p["value"] for p in points], [p["summary"] for p in points])
    order = _by_value(points)
    cells = [_cells(i, points[i], k) for i in order]
    cols = _shown(over, cells)
    rows = [tuple(cols), *(tuple(c[h] for h in cols) for c in cells)]
    timed = f"{TTFT.label}, {ITL.label} and {LATENCY.label}"
    lines = [
        f"sweep over {over}: {len(points)} point(s); {timed} in {LATENCY.unit}, p50/p99",
        *_columns(rows, left=3),
    ]
    if order != sorted(order):
        lines.append("rows by value; # is the order the points ran")
    has_slo = any(isinstance(p["summary"].get("goodput"), Mapping) for p in points)
    if k is None:
        why = (
            "one point has nothing to compare with"
            if len(points) == 1
            else "no point met the SLO"
            if has_slo
            else "no point finished a request"
        )
        lines.append(f"knee: none ({why})")
    else:
        rule = (
            "the highest goodput with the SLO met"
            if has_slo
            else "the highest throughput before p99 latency doubles"
        )
        lines.append(f"knee: point #{k}, {over}={points[k].get('text', points[k]['value'])} ({rule})")
    lines += _plans_table(points, k)
    lines += quality_table(points, k)
    return "\n".join(lines)
