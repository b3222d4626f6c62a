"""The compare page's charts: the runs' distributions overlaid on one log axis, and their time
series on one time axis, a colour per run.

Why this module exists: a table of Δ% says that two runs differ, not how: a second mode in the
latency, a slow start, a run that degraded half way. Drawn on the same axes, the runs' shapes can
be read against each other; each run's journal is read again here (its timeline), in constant
memory, and the charts are the same hand-written SVG as the run's own report (`svg.py`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from html import escape

from oxconsole.base.figures import LATENCY, REQUESTS_PER_S, TTFT
from oxconsole.reports.svg import (
    BOTTOM,
    PALETTE,
    RIGHT,
    Frame,
    H,
    Line,
    W,
    draw_axes,
    draw_legend,
    fmt_ms,
    line_chart,
    nice_ticks,
    open_svg,
)
from oxconsole.reports.timeline import Timeline, build_timeline

__all__ = ["compare_charts", "overlay_distribution"]

BINS = 32
"""Common log-spaced bins of the overlaid distributions."""
METRICS = (TTFT, LATENCY)
"""The distributions overlaid."""


def overlay_distribution(title: str, runs: Sequence[tuple[str, Sequence[tuple[float, float, int]]]]) -> str:
    """Each run's histogram as a line of the share of its ok requests per bin, on common log bins
    from the lowest value of any run to the highest."""
    out = open_svg(title)
    edges = [(b[0], b[1]) for _, bins in runs for b in (*bins[:1], *bins[-1:])]
    lo = max(min((e[0] for e in edges), default=0.0), 1e-3)
    hi = max((e[1] for e in edges), default=0.0)
    if hi <= lo:
        out.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no ok requests</text></svg>')
        return "\n".join(out)
    span = math.log(hi / lo)
    lines, top = [], 0.0
    for k, (name, bins) in enumerate(runs):
        counts = [0] * BINS
        for b_lo, b_hi, c in bins:
            mid = math.sqrt(max(b_lo, lo) * max(b_hi, lo))
            counts[min(BINS - 1, max(0, int(BINS * math.log(mid / lo) / span)))] += c
        total = sum(counts) or 1
        ys = [100.0 * c / total for c in counts]
        top = max(top, *ys)
        lines.append(Line(name, ys, PALETTE[k % len(PALETTE)], xs=[i + 0.5 for i in range(BINS)]))
    y_ticks = nice_ticks(top)
    f = Frame(BINS, y_ticks[-1])
    out += draw_axes(f, y_ticks, [], "% of ok", "ms")
    for i in range(0, BINS + 1, 4):
        edge = lo * math.exp(span * i / BINS)
        anchor = "end" if i == BINS else "middle"
        out.append(
            f'<text x="{f.x(i):.1f}" y="{H - BOTTOM + 17}" text-anchor="{anchor}">{fmt_ms(edge)}</text>'
        )
    for ln in lines:
        assert ln.xs is not None
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{f.x(x):.1f},{f.y(y or 0.0):.1f}"
            for i, (x, y) in enumerate(zip(ln.xs, ln.ys, strict=True))
        )
        out.append(f'<path d="{d}" fill="none" stroke="{ln.color}" stroke-width="1.8"/>')
    out += draw_legend(lines)
    out.append(f'<text x="{W - RIGHT}" y="{H - 3}" text-anchor="end" class="unit">ms</text>')
    out.append("</svg>")
    return "\n".join(out)


def compare_charts(paths: Sequence[str | os.PathLike[str]], names: Sequence[str]) -> str:
    """The compare page's charts section: distributions, then requests/s and latency p50 over time."""
    tls: list[Timeline] = [build_timeline(p) for p in paths]
    figs = []
    for metric in METRICS:
        runs = [(n, tl.whole[metric.key].bins(BINS)) for n, tl in zip(names, tls, strict=True)]
        title = f"{metric.label[:1].upper()}{metric.label[1:]} distributions"
        figs.append(_figure(f"{title} ({metric.unit})", overlay_distribution(title, runs)))
    span = max((max(tl.span, tl.step) for tl in tls), default=1.0)
    rate = [
        Line(n, tl.rate("ok"), PALETTE[k % len(PALETTE)], xs=tl.times())
        for k, (n, tl) in enumerate(zip(names, tls, strict=True))
    ]
    chart = line_chart(REQUESTS_PER_S.label, [], rate, x_max=span, y_unit=REQUESTS_PER_S.short)
    figs.append(_figure("Requests/s (ok) over time", chart))
    lat = [
        Line(n, tl.percentile(LATENCY, 50), PALETTE[k % len(PALETTE)], xs=tl.times())
        for k, (n, tl) in enumerate(zip(names, tls, strict=True))
    ]
    p50 = LATENCY.at("p50")
    chart = line_chart(p50.label, [], lat, x_max=span, y_unit=LATENCY.unit)
    figs.append(_figure(f"Latency p50 over time ({LATENCY.unit})", chart))
    return (
        f'<section id="overlay"><h2>The runs overlaid</h2><div class="charts">{"".join(figs)}</div></section>'
    )


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"
