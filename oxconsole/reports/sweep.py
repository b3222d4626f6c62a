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

from oxconsole.journal.manifest import read_manifest
from oxconsole.metrics.knee import LOAD_KEYS, has_slo, knee_index, load_order, score, slo_met
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


def _f(d: Mapping[str, Any], key: str, sub: str) -> float:
    inner = d.get(key)
    return float((inner.get(sub) if isinstance(inner, Mapping) else None) or 0.0)


def _tput_latency(points: list[SweepPoint]) -> str:
    """x: requests/s, y: latency p50 and p99 (ms), one dot per point and percentile, joined in
    x order."""
    order = [points[i] for i in load_order([p.value for p in points])]
    series = [
        _Dots(
            name,
            [
                (_f(p.summary, "throughput", "requests_per_s"), _f(p.summary, "latency_ms", q), p.text)
                for p in order
            ],
            color,
            dashed,
        )
        for name, q, color, dashed in (("p50", "p50", PALETTE[0], False), ("p99", "p99", PALETTE[2], True))
    ]
    return _dots_chart("throughput against latency", series, x_unit="req/s", y_unit="ms")


def _score_chart(key: str, points: list[SweepPoint], knee: int | None, slo: bool) -> str:
    """y: goodput (with `[slo]`, throughput beside it) or throughput, against the swept value: by
    value when every value is a number, else one step per point in load order."""
    numeric = all(isinstance(p.value, int | float) and not isinstance(p.value, bool) for p in points)
    order = load_order([p.value for p in points])
    xs = {i: float(points[i].value) if numeric else float(rank + 1) for rank, i in enumerate(order)}
    series = [
        _Dots(
            "goodput" if slo else "req/s",
            [(xs[i], score(points[i].summary), points[i].text) for i in order],
            PALETTE[1],
        )
    ]
    if slo:
        tput = [(xs[i], _f(points[i].summary, "throughput", "requests_per_s"), "") for i in order]
        series.insert(0, _Dots("req/s", tput, PALETTE[0], dashed=True))  # under goodput's dots
    mark = None
    if knee is not None:
        mark = (xs[knee], score(points[knee].summary), f"knee: {key}={points[knee].text}")
    ticks = None if numeric else [(xs[i], points[i].text) for i in order]
    return _dots_chart(
        f"{series[-1].name} against {key}", series, x_unit=key, y_unit="req/s", knee=mark, x_ticks=ticks
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
    ("req/s", "req/s"),
    ("tok/s", "tok/s"),
    ("goodput", "goodput"),
    ("TTFT p50/p99", "TTFT"),
    ("ITL p50/p99", "ITL"),
    ("latency p50", "lat p50"),
    ("latency p99", "lat p99"),
    ("errors", "err"),
    ("cost per task", "cost/task"),
)
"""The points table's columns, (on the page, in text): the sweep's own table's figures."""


def point_rows(points: list[SweepPoint], knee: int | None) -> list[list[str]]:
    """The points table's rows (`POINT_HEAD`), from the lowest load up (`load_order`); `#` is the
    point's index (the order it ran in), `*` marks the knee. Times in ms."""
    rows = []
    for i in load_order([p.value for p in points]):
        p, s = points[i], points[i].summary
        g = s.get("goodput")
        good = (
            f"{float(g.get('requests_per_s') or 0):.2f} ({100 * float(g.get('fraction') or 0):.0f}%)"
            if isinstance(g, Mapping)
            else "-"
        )
        rows.append(
            [
                f"{p.index}{' *' if i == knee else ''}",
                p.text,
                _offered(p.load),
                f"{_f(s, 'throughput', 'requests_per_s'):.2f}",
                fmt_num(_f(s, "throughput", "output_tokens_per_s")),
                good,
                _pair(s, "ttft_ms"),
                _pair(s, "itl_ms"),
                fmt_num(_f(s, "latency_ms", "p50")),
                fmt_num(_f(s, "latency_ms", "p99")),
                str(int(_f(s, "requests", "error"))),
                _cost_per_task(s),
            ]
        )
    return rows


def _pair(s: Mapping[str, Any], key: str) -> str:
    d = s.get(key)
    if not isinstance(d, Mapping) or d.get("p50") is None:
        return "-"
    return f"{fmt_num(float(d['p50']))}/{fmt_num(float(d.get('p99') or 0.0))}"


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


def _offered(load: Mapping[str, Any]) -> str:
    """The load a point offered: its rate when it had one, else its concurrency (as the table)."""
    rate, conc = load.get("rate"), load.get("concurrency")
    if rate:
        return f"{float(rate):g}/s"
    return f"c={conc}" if conc is not None else "-"


def _cost_per_task(s: Mapping[str, Any]) -> str:
    """`cost.per_task`; for a summary from before plans, cost over the tasks that ended."""
    c = s.get("cost")
    cost: Mapping[str, Any] = c if isinstance(c, Mapping) else {}
    per_task = cost.get("per_task")
    if per_task is None:
        n = int(_f(s, "requests", "total"))
        per_task = float(cost.get("total") or 0.0) / n if n else None
    return "-" if not per_task else f"{float(per_task):.3g}"
