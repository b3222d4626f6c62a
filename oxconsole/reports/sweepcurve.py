"""The HTML report's sweep section: throughput against latency, goodput against the swept value
with the knee marked, and a table of the points.

Why this module exists: a sweep's journal is one journal of many points, and what its reader wants
is the curve the points make and where it bends, not only the whole journal's figures. The points'
summaries are in the journal's manifest (key `sweep`, written by `oxconsole.sweep.plan`); the knee
is found by the sweep's own rule (`oxconsole.metrics.knee`), so the page marks the knee the sweep's
table named. Charts are inline SVG drawn with `svg.py`'s frame and axes; nothing is fetched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
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
from oxconsole.journal.manifest import read_manifest
from oxconsole.metrics.knee import LOAD_KEYS, has_slo, knee_index, load_order, offered, score, slo_met
from oxconsole.metrics.plans import summary_per_task
from oxconsole.reports.svg import (
    BOTTOM,
    PALETTE,
    RIGHT,
    TOP,
    Frame,
    H,
    Line,
    W,
    draw_axes,
    draw_legend,
    fmt_num,
    marker_label,
    nice_ticks,
    open_svg,
)

__all__ = ["SweepPoint", "point_rows", "sweep_points", "sweep_report", "sweep_section"]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One ended point of a sweep, as its manifest keeps it."""

    index: int
    value: Any
    text: str
    load: Mapping[str, Any]
    summary: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Dots:
    """One series of labelled dots: (x, y, label) each, joined in x order."""

    name: str
    dots: Sequence[tuple[float, float, str]]
    color: str
    dashed: bool = False


def sweep_points(results: str | os.PathLike[str]) -> tuple[str, list[SweepPoint]]:
    """The swept key and the ended points (in index order) of the sweep whose journal is
    ``results``; ("", []) when the journal is not a sweep's (its manifest has no `sweep`)."""
    sweep = read_manifest(Path(results)).get("sweep")
    if not isinstance(sweep, Mapping):
        return "", []
    key = str(sweep.get("spec") or "").partition("=")[0].strip()
    points = []
    for k, p in (sweep.get("points") or {}).items():
        if isinstance(p, Mapping) and isinstance(p.get("summary"), Mapping) and str(k).isdigit():
            text = str(p.get("text", p.get("value")))
            points.append(SweepPoint(int(k), p.get("value"), text, p.get("load") or {}, p["summary"]))
    return key, sorted(points, key=lambda p: p.index)


def sweep_section(results: str | os.PathLike[str]) -> str:
    """The section (`id="sweep"`), or "" for a journal that is not a sweep's."""
    key, points = sweep_points(results)
    if not points:
        return ""
    summaries = [p.summary for p in points]
    knee = knee_index([p.value for p in points], summaries, load=key in LOAD_KEYS)
    slo = has_slo(summaries)
    charts = [
        '<div class="charts">',
        _figure(
            "Throughput against latency (one dot per point, labelled with its value)", _tput_latency(points)
        ),
        _figure(
            f"{'Goodput' if slo else 'Throughput'} against {key}, the knee marked",
            _score_chart(key, points, knee, slo),
        ),
        "</div>",
    ]
    return (
        f'<section id="sweep"><h2>Sweep over {escape(key)}</h2>'
        f'<p class="note">{_knee_note(key, points, knee, slo)}</p>'
        f"{''.join(charts)}{_points_table(points, knee)}</section>"
    )


def _knee_note(key: str, points: list[SweepPoint], knee: int | None, slo: bool) -> str:
    rule = (
        "the highest goodput with the SLO met"
        if slo
        else "the highest throughput before p99 latency doubles from the first point's"
    )
    n = f"{len(points)} point(s)"
    if knee is None:
        return escape(f"{n}; no knee: no point qualifies ({rule}).")
    p = points[knee]
    return f"{escape(n)}; knee: <b>{escape(f'{key}={p.text}')}</b> (point #{p.index}), {escape(rule)}."


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"


def _f(d: Mapping[str, Any], f: Figure) -> float:
    return f.value(d) or 0.0


def _tput_latency(points: list[SweepPoint]) -> str:
    """x: requests/s, y: latency p50 and p99 (ms), one dot per point and percentile, joined in
    x order."""
    order = [points[i] for i in load_order([p.value for p in points])]
    series = [
        _Dots(
            name,
            [(_f(p.summary, REQUESTS_PER_S), _f(p.summary, LATENCY.at(q)), p.text) for p in order],
            color,
            dashed,
        )
        for name, q, color, dashed in (("p50", "p50", PALETTE[0], False), ("p99", "p99", PALETTE[2], True))
    ]
    return _dots_chart("throughput against latency", series, x_unit=REQUESTS_PER_S.short, y_unit=LATENCY.unit)


def _score_chart(key: str, points: list[SweepPoint], knee: int | None, slo: bool) -> str:
    """y: goodput (with `[slo]`, throughput beside it) or throughput, against the swept value: by
    value when every value is a number, else one step per point in load order."""
    numeric = all(isinstance(p.value, int | float) and not isinstance(p.value, bool) for p in points)
    order = load_order([p.value for p in points])
    xs = {i: float(points[i].value) if numeric else float(rank + 1) for rank, i in enumerate(order)}
    series = [
        _Dots(
            "goodput" if slo else REQUESTS_PER_S.short,
            [(xs[i], score(points[i].summary), points[i].text) for i in order],
            PALETTE[1],
        )
    ]
    if slo:
        tput = [(xs[i], _f(points[i].summary, REQUESTS_PER_S), "") for i in order]
        series.insert(0, _Dots(REQUESTS_PER_S.short, tput, PALETTE[0], dashed=True))  # under goodput's dots
    mark = None
    if knee is not None:
        mark = (xs[knee], score(points[knee].summary), f"knee: {key}={points[knee].text}")
    ticks = None if numeric else [(xs[i], points[i].text) for i in order]
    return _dots_chart(
        f"{series[-1].name} against {key}",
        series,
        x_unit=key,
        y_unit=REQUESTS_PER_S.short,
        knee=mark,
        x_ticks=ticks,
    )


def _dots_chart(
    title: str,
    series: Sequence[_Dots],
    *,
    x_unit: str,
    y_unit: str,
    knee: tuple[float, float, str] | None = None,
    x_ticks: Sequence[tuple[float, str]] | None = None,
) -> str:
    """Dots joined by a thin line per series (in the order given), each dot labelled, on axes
    from 0; a knee is a ring round its dot and a dashed rule with its name."""
    x_hi = max((x for s in series for x, _, _ in s.dots), default=0.0)
    y_ticks = nice_ticks(max((y for s in series for _, y, _ in s.dots), default=0.0))
    ticks = list(x_ticks) if x_ticks is not None else [(t, fmt_num(t)) for t in nice_ticks(x_hi, 8)]
    x_max = max(ticks[-1][0] + (0.5 if x_ticks is not None else 0.0), x_hi) if ticks else x_hi
    f = Frame(x_max, y_ticks[-1])
    out = open_svg(title) + draw_axes(f, y_ticks, [], y_unit, "s")
    for t, label in ticks:
        x = f.x(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{H - BOTTOM}" y2="{H - BOTTOM + 4}" class="axis"/>')
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 17}" text-anchor="middle">{escape(label)}</text>')
    out.append(f'<text x="{W - RIGHT}" y="{H - 3}" text-anchor="end" class="unit">{escape(x_unit)}</text>')
    if knee is not None:
        kx = f.x(knee[0])
        out.append(f'<line x1="{kx:.1f}" x2="{kx:.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="marker"/>')
        out.append(marker_label(kx, TOP + 12, knee[2]))
        out.append(
            f'<circle cx="{kx:.1f}" cy="{f.y(knee[1]):.1f}" r="7" fill="none" stroke="#f59e0b" '
            'stroke-width="2" class="knee"/>'
        )
    for s in series:
        out += _series(f, s)
    out += draw_legend([Line(s.name, [], s.color) for s in series])
    out.append("</svg>")
    return "\n".join(out)


def _series(f: Frame, s: _Dots) -> list[str]:
    dots = sorted(s.dots, key=lambda d: d[0])  # joined left to right: a curve, not the run's zig-zag
    dash = ' stroke-dasharray="5 3"' if s.dashed else ""
    out = []
    if len(dots) > 1:
        d = " ".join(f"{'M' if i == 0 else 'L'}{f.x(x):.1f},{f.y(y):.1f}" for i, (x, y, _) in enumerate(dots))
        out.append(f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="1.2" opacity="0.6"{dash}/>')
    for x, y, label in dots:
        cx, cy = f.x(x), f.y(y)
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{s.color}" class="dot"/>')
        if label:
            left = cx > W - RIGHT - 6 * len(label) - 8  # near the right edge: the label left of its dot
            anchor = ' text-anchor="end"' if left else ""
            lx = cx - 5 if left else cx + 5
            out.append(f'<text x="{lx:.1f}" y="{cy - 5:.1f}" font-size="10"{anchor}>{escape(label)}</text>')
    return out


POINT_HEAD = (
    ("#", "#"),
    ("value", "value"),
    ("offered", "offered"),
    (REQUESTS_PER_S.short, REQUESTS_PER_S.short),
    (OUTPUT_TOKENS_PER_S.short, OUTPUT_TOKENS_PER_S.short),
    ("goodput", "goodput"),
    *((f"{f.label} p50/p99", f.label) for f in (TTFT, ITL)),
    *((f.label, f.short) for f in (LATENCY.at("p50"), LATENCY.at("p99"))),
    ("errors", ERRORS.short),
    (COST_PER_TASK.name, COST_PER_TASK.label),
)
"""The points table's columns, (on the page, in text): the sweep's own table's figures."""


def point_rows(points: list[SweepPoint], knee: int | None) -> list[list[str]]:
    """The points table's rows (`POINT_HEAD`), from the lowest load up (`load_order`); `#` is the
    point's index (the order it ran in), `*` marks the knee. Times in ms."""
    rows = []
    for i in load_order([p.value for p in points]):
        p, s = points[i], points[i].summary
        good = (
            f"{_f(s, GOODPUT):.2f} ({100 * _f(s, GOOD_FRACTION):.0f}%)"
            if isinstance(s.get("goodput"), Mapping)
            else "-"
        )
        rows.append(
            [
                f"{p.index}{' *' if i == knee else ''}",
                p.text,
                offered(p.load),
                f"{_f(s, REQUESTS_PER_S):.2f}",
                fmt_num(_f(s, OUTPUT_TOKENS_PER_S)),
                good,
                _pair(s, TTFT),
                _pair(s, ITL),
                fmt_num(_f(s, LATENCY.at("p50"))),
                fmt_num(_f(s, LATENCY.at("p99"))),
                str(int(_f(s, ERRORS))),
                _cost_per_task(s),
            ]
        )
    return rows


def _pair(s: Mapping[str, Any], f: Figure) -> str:
    p50 = f.at("p50").value(s)
    if p50 is None:
        return "-"
    return f"{fmt_num(p50)}/{fmt_num(_f(s, f.at('p99')))}"


def _points_table(points: list[SweepPoint], knee: int | None) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h, _ in POINT_HEAD)
    rows = point_rows(points, knee)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    note = '<p class="note">* the knee. Latency in ms.</p>' if knee is not None else ""
    table = f'<table style="margin-top:12px"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'
    return table + note


def sweep_report(results: str | os.PathLike[str]) -> tuple[str, dict[str, Any]] | None:
    """`oxconsole report` of a sweep's journal: the points table as text with the knee said, and
    the sweep object of the contract (`{"over", "points", "knee"}`); None for a journal that is
    not a sweep's."""
    key, points = sweep_points(results)
    if not points:
        return None
    summaries = [p.summary for p in points]
    knee = knee_index([p.value for p in points], summaries, load=key in LOAD_KEYS)
    rows = [[text for _, text in POINT_HEAD], *point_rows(points, knee)]
    keep = [  # in text: no column of dashes, no offered load that is the value itself
        c for c in range(len(POINT_HEAD))
        if any(r[c] != "-" for r in rows[1:]) and not (POINT_HEAD[c][0] == "offered" and key in LOAD_KEYS)
    ]  # fmt: skip
    rows = [[r[c] for c in keep] for r in rows]
    widths = [max(len(r[c]) for r in rows) for c in range(len(keep))]
    lines = ["", f"sweep over {key}: {len(points)} point(s), times in ms"]
    for r in rows:
        cells = [c.ljust(w) if k < 2 else c.rjust(w) for k, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    slo = has_slo(summaries)
    if knee is None:
        lines.append("no knee: no point qualifies")
    else:
        rule = "highest goodput with the SLO met" if slo else "highest throughput before p99 latency doubles"
        lines.append(f"knee: {key}={points[knee].text} (point #{points[knee].index}, *): the {rule}")
    data = {
        "over": key,
        "points": [
            {"index": p.index, "value": p.value, "slo_met": slo_met(p.summary), "summary": p.summary}
            for p in points
        ],
        "knee": None if knee is None else {"index": knee, "value": points[knee].value},
    }
    return "\n".join(lines) + "\n", data


def _cost_per_task(s: Mapping[str, Any]) -> str:
    """`cost.per_task`; for a summary from before plans, cost over the tasks that ended."""
    per_task = summary_per_task(s)
    return "-" if not per_task else f"{per_task:.3g}"
