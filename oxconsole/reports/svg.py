"""Hand-written SVG charts for the HTML report: lines over time, stacked bars, distributions.

Why this module exists: the report must open offline as one file and read well on a laptop. A
few hundred lines of SVG text cover the four chart types it needs with no dependency, no script
and a file of tens of kilobytes, where a charting library inlined would add megabytes (plotly) or
a native dependency (vl-convert), and matplotlib would be a heavy import for four plain charts.
SVG is vector (sharp at any zoom, prints well) and part of the HTML, so the browser needs nothing
else. Every text is escaped; nothing here reads files or the network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = [
    "PALETTE",
    "Frame",
    "Line",
    "Marker",
    "bin_position",
    "distribution",
    "draw_axes",
    "draw_legend",
    "fmt_num",
    "line_chart",
    "marker_label",
    "nice_ticks",
    "open_svg",
    "stacked_bars",
    "stretches",
    "time_ticks",
]

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
"""Colours that stay apart for most colour-blind readers, on a white page."""

W, H = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 30, 34


@dataclass(frozen=True, slots=True)
class Line:
    """One series: a value per x (None = no data there, the line breaks)."""

    name: str
    ys: Sequence[float | None]
    color: str
    dashed: bool = False
    xs: Sequence[float] | None = None
    """The series' own x values (runs compared on one chart have their own slots); None: the chart's."""


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical rule at ``t`` (same unit as x) with a short label: a change or a stage."""

    t: float
    label: str


def fmt_num(v: float) -> str:
    """Compact: 0.25, 12, 1.2k, 3.4M."""
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e3:
        return f"{v / 1e3:.3g}k"
    if v == round(v) and a < 1e3:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.3g}"  # 12.5 stays 12.5
    return f"{v:.2g}"


def fmt_secs(v: float) -> str:
    """A time tick: `12.5s`, `0.5s`, `2m`, `2.5m`, `1.5h` (as many decimals as it has: ticks of
    `time_ticks` are round, so no two print alike and none prints wrong)."""
    if v >= 3600:
        return f"{round(v / 3600, 3):g}h"
    if v >= 120:
        return f"{round(v / 60, 3):g}m"
    return f"{round(v, 3):g}s"


TIME_STEPS = (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)
"""Steps a time axis ticks at (seconds): whole seconds, minutes and hours, halves and quarters below."""


def time_ticks(hi: float, n: int = 8) -> list[float]:
    """Ticks from 0 to ``hi`` seconds (about ``n``), at a step of `TIME_STEPS`, none past ``hi``."""
    if not hi > 0 or not math.isfinite(hi):
        return [0.0]
    step = next((s for s in TIME_STEPS if s >= hi / n), None) or 3600 * math.ceil(hi / n / 3600)
    return [round(i * step, 6) for i in range(int(hi / step + 1e-9) + 1)]


def fmt_ms(v: float) -> str:
    return f"{v / 1000:.3g}s" if v >= 1000 else f"{v:.3g}ms"


def nice_ticks(hi: float, n: int = 5) -> list[float]:
    """Round ticks from 0 to at least ``hi`` (about ``n`` of them)."""
    if not hi > 0 or not math.isfinite(hi):
        return [0.0, 1.0]
    raw = hi / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    k = math.ceil(hi / step - 1e-9)
    return [i * step for i in range(k + 1)]


class Frame:
    """The plot area's arithmetic: x from 0..x_max, y from 0..y_max, into pixels."""

    def __init__(self, x_max: float, y_max: float) -> None:
        self.x_max = x_max if x_max > 0 else 1.0
        self.y_max = y_max if y_max > 0 else 1.0
        self.pw = W - LEFT - RIGHT
        self.ph = H - TOP - BOTTOM

    def x(self, v: float) -> float:
        return LEFT + self.pw * v / self.x_max

    def y(self, v: float) -> float:
        return TOP + self.ph * (1.0 - v / self.y_max)


def open_svg(title: str) -> list[str]:
    return [
        f'<svg class="chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">'
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>',
    ]


def draw_axes(f: Frame, y_ticks: list[float], x_ticks: list[float], y_unit: str, x_fmt: str) -> list[str]:
    out = []
    for v in y_ticks:
        y = f.y(v)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt_num(v)}</text>')
    for v in x_ticks:
        x = f.x(v)
        label = fmt_secs(v) if x_fmt == "s" else fmt_ms(v)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{H - BOTTOM}" y2="{H - BOTTOM + 4}" class="axis"/>')
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 17}" text-anchor="middle">{label}</text>')
    out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{H - BOTTOM}" y2="{H - BOTTOM}" class="axis"/>')
    out.append(f'<text x="{LEFT - 6}" y="{TOP - 12}" text-anchor="end" class="unit">{escape(y_unit)}</text>')
    return out


def draw_legend(lines: Sequence[Line]) -> list[str]:
    out = []
    x = W - RIGHT
    for ln in reversed(lines):
        x -= 14 + 7 * len(ln.name)
        out.append(f'<rect x="{x}" y="{TOP - 20}" width="10" height="10" fill="{ln.color}"/>')
        out.append(f'<text x="{x + 13}" y="{TOP - 11}">{escape(ln.name)}</text>')
        x -= 10
    return out


LABEL_ROWS = 4
"""Rows marker labels are staggered over; a label that fits in none is left out (its rule stays)."""
CHAR_W = 6.5
"""The width of a label's character at the charts' font size, in the SVG's units (generous)."""


def label_span(x: float, text: str) -> tuple[float, float]:
    """Where `marker_label` draws ``text`` for a rule at ``x``: (left, right)."""
    w = CHAR_W * len(text)
    return (x - 3 - w, x - 3) if x > W - RIGHT - w - 6 else (x + 3, x + 3 + w)


def _markers(f: Frame, markers: Sequence[Marker]) -> list[str]:
    """Each marker's rule, and its label in the first row where it overlaps no other label."""
    out = []
    ends = [-math.inf] * LABEL_ROWS  # per row: where its last label ends
    for m in sorted(markers, key=lambda m: m.t):
        if not 0 <= m.t <= f.x_max:
            continue
        x = f.x(m.t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="marker"/>')
        left, right = label_span(x, m.label)
        row = next((r for r in range(LABEL_ROWS) if left > ends[r] + 4), None)
        if row is not None:
            ends[row] = right
            out.append(marker_label(x, TOP + 12 + 12 * row, m.label))
    return out


def marker_label(x: float, y: float, text: str) -> str:
    """A marker's label right of its rule, or left of it near the right edge."""
    if x > W - RIGHT - CHAR_W * len(text) - 6:
        return f'<text x="{x - 3:.1f}" y="{y}" text-anchor="end" class="marker-label">{escape(text)}</text>'
    return f'<text x="{x + 3:.1f}" y="{y}" class="marker-label">{escape(text)}</text>'


def stretches(ys: Sequence[float | None]) -> list[tuple[int, int]]:
    """The stretches of consecutive values in ``ys``, (first, last) indices: a line is drawn
    over each, and a gap (None: no data there) is left a gap. A value with no neighbour is a
    stretch of one: a burst whose second stands alone, or a low-rate run's every second, which a
    path of one point would not draw at all (`line_chart` draws it as a dot)."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    for i, y in enumerate(ys):
        if y is None:
            if start is not None:
                out.append((start, i - 1))
            start = None
        elif start is None:
            start = i
    if start is not None:
        out.append((start, len(ys) - 1))
    return out


def _path(f: Frame, xs: Sequence[float], ys: Sequence[float | None], spans: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    for first, last in spans:
        for i in range(first, min(last, len(xs) - 1) + 1):
            y = ys[i]
            assert y is not None
            parts.append(f"{'M' if i == first else 'L'}{f.x(xs[i]):.1f},{f.y(y):.1f}")
    return " ".join(parts)


def line_chart(
    title: str,
    xs: Sequence[float],
    lines: Sequence[Line],
    *,
    x_max: float,
    y_unit: str,
    markers: Sequence[Marker] = (),
) -> str:
    """Lines over time (x in seconds since the start), y from 0, with markers and a legend. A
    value with no neighbour is drawn as a dot (`stretches`); where there is no data, nothing."""
    top = max((y for ln in lines for y in ln.ys if y is not None), default=0.0)
    y_ticks = nice_ticks(top)
    x_ticks = time_ticks(x_max)
    f = Frame(x_max, y_ticks[-1])
    out = open_svg(title) + draw_axes(f, y_ticks, x_ticks, y_unit, "s")
    for ln in lines:
        dash = ' stroke-dasharray="5 3"' if ln.dashed else ""
        lx = xs if ln.xs is None else ln.xs
        spans = [(a, b) for a, b in stretches(ln.ys) if a < len(lx)]
        d = _path(f, lx, ln.ys, [(a, b) for a, b in spans if b > a])
        if d:
            out.append(f'<path d="{d}" fill="none" stroke="{ln.color}" stroke-width="1.8"{dash}/>')
        for i, _ in (s for s in spans if s[0] == s[1]):
            y = ln.ys[i]
            assert y is not None
            out.append(f'<circle cx="{f.x(lx[i]):.1f}" cy="{f.y(y):.1f}" r="2.5" fill="{ln.color}"/>')
    out += _markers(f, markers) + draw_legend(lines)
    out.append("</svg>")
    return "\n".join(out)


def stacked_bars(
    title: str,
    xs: Sequence[float],
    step: float,
    stacks: Sequence[Line],
    *,
    x_max: float,
    y_unit: str,
    markers: Sequence[Marker] = (),
) -> str:
    """One bar per slot (``step`` wide, centred on x), its parts stacked in order."""
    totals = [sum((s.ys[i] or 0.0) for s in stacks) for i in range(len(xs))]
    y_ticks = nice_ticks(max(totals, default=0.0))
    f = Frame(x_max, y_ticks[-1])
    out = open_svg(title) + draw_axes(f, y_ticks, time_ticks(x_max), y_unit, "s")
    bw = max(1.0, f.x(step) - f.x(0) - 1.0)
    for i, x in enumerate(xs):
        base = 0.0
        for s in stacks:
            v = s.ys[i] or 0.0
            if v <= 0:
                continue
            y_top = f.y(base + v)
            h = f.y(base) - y_top
            out.append(
                f'<rect x="{f.x(x) - bw / 2:.1f}" y="{y_top:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                f'fill="{s.color}"/>'
            )
            base += v
    out += _markers(f, markers) + draw_legend(stacks)
    out.append("</svg>")
    return "\n".join(out)


def bin_position(bins: Sequence[tuple[float, float, int]], v: float) -> float | None:
    """Where ``v`` falls on a histogram of ``bins`` drawn one bar per bin: inside the bar of the
    bin that holds it (``i`` to ``i + 1``, log-interpolated between its edges), whatever the bins'
    widths; None outside them."""
    for i, (b_lo, b_hi, _) in enumerate(bins):
        if b_lo <= v <= b_hi:
            if b_hi <= b_lo or b_lo <= 0:
                return i + 0.5
            return i + math.log(v / b_lo) / math.log(b_hi / b_lo)
    return None


def distribution(
    title: str,
    bins: Sequence[tuple[float, float, int]],
    color: str,
    marks: Sequence[tuple[str, float]] = (),
) -> str:
    """A histogram over log-spaced bins (ms), with the percentiles in ``marks`` as rules."""
    out = open_svg(title)
    if not bins:
        out.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no ok requests</text></svg>')
        return "\n".join(out)
    y_ticks = nice_ticks(max(c for _, _, c in bins))
    f = Frame(len(bins), y_ticks[-1])
    out += draw_axes(f, y_ticks, [], "requests", "ms")
    hi = bins[-1][1]
    for i, (b_lo, _b_hi, c) in enumerate(bins):
        x0, x1 = f.x(i), f.x(i + 1)
        if c:
            out.append(
                f'<rect x="{x0 + 0.5:.1f}" y="{f.y(c):.1f}" width="{x1 - x0 - 1:.1f}" '
                f'height="{f.y(0) - f.y(c):.1f}" fill="{color}"/>'
            )
        if i % 4 == 0:
            out.append(f'<text x="{x0:.1f}" y="{H - BOTTOM + 17}" text-anchor="middle">{fmt_ms(b_lo)}</text>')
    out.append(f'<text x="{W - RIGHT:.1f}" y="{H - BOTTOM + 17}" text-anchor="end">{fmt_ms(hi)}</text>')
    for i, (label, v) in enumerate(marks):
        pos = bin_position(bins, v)
        if pos is None:
            continue
        x = f.x(pos)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="marker"/>')
        out.append(marker_label(x, TOP + 12 + 12 * i, f"{label} {fmt_ms(v)}"))
    out.append("</svg>")
    return "\n".join(out)
