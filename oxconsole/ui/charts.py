"""Small charts drawn with block characters: sparklines, column charts, bars and a time axis.

Why this module exists: the throughput, in-flight, header and latency panels draw their charts as
plain strings of eighth-blocks, one character per column, so a chart costs a few string joins and
compares equal when it looks the same. Pure functions of numbers and a size.
"""

from __future__ import annotations

from collections.abc import Sequence

from oxconsole.base.units import fmt_duration

__all__ = ["axis", "bar_chart", "hbar", "sparkline"]

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float], width: int, top: float | None = None) -> str:
    """One row of eighth-blocks, the last ``width`` values (left-padded with spaces)."""
    vals = list(values)[-width:] if width > 0 else []
    hi = top if top is not None else max(vals, default=0.0)
    out = []
    for v in vals:
        if hi <= 0 or v <= 0:
            out.append(" ")
        else:
            out.append(_EIGHTHS[max(1, min(8, round(8 * v / hi)))])
    return " " * (width - len(out)) + "".join(out)


def bar_chart(values: Sequence[float], width: int, height: int, top: float | None = None) -> list[str]:
    """A block column chart, ``height`` rows of eighth-blocks, newest value on the right."""
    vals = list(values)[-width:] if width > 0 else []
    pad = width - len(vals)
    hi = top if top is not None else max(vals, default=0.0)
    levels = [0 if hi <= 0 or v <= 0 else max(1, round(8 * height * v / hi)) for v in vals]
    rows = []
    for r in range(height - 1, -1, -1):
        base = r * 8
        row = []
        for lv in levels:
            fill = lv - base
            row.append("█" if fill >= 8 else (_EIGHTHS[fill] if fill > 0 else " "))
        rows.append(" " * pad + "".join(row))
    return rows


def hbar(frac: float, width: int) -> tuple[str, str]:
    """(filled, empty) parts of a horizontal bar with eighth-block resolution."""
    frac = min(1.0, max(0.0, frac))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return filled, "░" * max(0, width - len(filled))


def axis(width: int, span: int) -> str:
    """`-2m ... -1m ... now` under a chart of ``span`` seconds drawn in ``width`` columns."""
    if width < 8:
        return ""
    left = f"-{fmt_duration(span)}"
    mid = f"-{fmt_duration(span / 2)}" if width >= 30 and span >= 4 else ""
    right = "now"
    line = [" "] * width
    for i, ch in enumerate(left):
        if i < width:
            line[i] = ch
    if mid:
        start = width // 2 - len(mid) // 2
        for i, ch in enumerate(mid):
            line[start + i] = ch
    for i, ch in enumerate(right):
        line[width - len(right) + i] = ch
    return "".join(line)
