"""The throughput panel: requests and output tokens per second, one column per second.

Why this module exists: the point of a live console is to see what a change did, so the chart
marks each second where a setting changed (▲) and each second with errors (×) under the rates.
"""

from __future__ import annotations

import itertools

from oxconsole.base.figures import OUTPUT_TOKENS_PER_S
from oxconsole.base.units import fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.charts import axis, bar_chart, sparkline
from oxconsole.ui.lines import Line, Palette, fit
from oxconsole.ui.panels.goodput import goodput_part
from oxconsole.ui.panels.packing import append_packing, rate_label
from oxconsole.ui.widgets import Panel

__all__ = ["ThroughputPanel", "throughput_lines"]


def throughput_lines(s: Snapshot, p: Palette, width: int, height: int) -> list[Line]:
    """req/s (a block chart) and output tokens/s (a sparkline), one column per second, a ▲ under
    each second where a setting changed and a × under seconds with errors."""
    ser = s.series
    cols = max(1, width)
    shown = min(len(ser.req_per_s), cols)
    tall = height >= 7
    lines: list[Line] = []
    t = Line(rate_label(s), style=p.muted)
    t.append(fmt_rate(s.req_per_s_10s, ""), style=f"bold {p.primary}")
    t.append(f" now · {fmt_rate(s.req_per_s, '')} run", style=p.muted)
    append_packing(t, s, p)
    if s.errors_per_s_10s > 0:
        t.append(f" · err {fmt_rate(s.errors_per_s_10s)}", style=p.error)
    if not tall:
        t.append(f" · {OUTPUT_TOKENS_PER_S.short} ", style=p.muted)
        t.append(fmt_rate(s.output_tokens_per_s_10s, ""), style=f"bold {p.accent}")
    good = goodput_part(s, p, " · good ")
    if good is not None and len(t) + len(good) <= width:
        t.append_text(good)
    lines.append(t)
    chart_h = max(1, height - (5 if tall else 3))
    recent = ser.req_per_s[-shown:] if shown else ()
    top = max(recent, default=0.0)
    for row in bar_chart(recent, cols, chart_h, top=top or None):
        lines.append(Line(row, style=p.primary))
    if tall:
        t = Line(f"{OUTPUT_TOKENS_PER_S.short} ", style=p.muted)
        t.append(fmt_rate(s.output_tokens_per_s_10s, ""), style=f"bold {p.accent}")
        t.append(f" now · {fmt_rate(s.output_tokens_per_s, '')} run", style=p.muted)
        lines.append(t)
    lines.append(Line(sparkline(ser.output_tokens_per_s[-shown:] if shown else (), cols), style=p.accent))
    lines.append(_marks_line(s, p, cols, shown))
    if tall:
        lines.append(Line(axis(cols, max(shown, 1)), style=p.muted))
    return fit(lines[: max(1, height)], width)


def _marks_line(s: Snapshot, p: Palette, cols: int, shown: int) -> Line:
    """× under each of the last ``shown`` seconds with errors, ▲ where a setting changed."""
    ser = s.series
    marks = [" "] * cols
    first = ser.start_s + len(ser.req_per_s) - shown  # the second drawn in column ``off``
    off = cols - shown
    for i, e in enumerate(ser.errors_per_s[-shown:] if shown else ()):
        if e > 0:
            marks[off + i] = "×"
    for m in ser.markers:
        col = off + int(m) - first
        if 0 <= col < cols:
            marks[col] = "▲"
    t = Line()
    styles = {"▲": p.warning, "×": p.error, " ": ""}
    for ch, same in itertools.groupby(marks):
        t.append(ch * len(list(same)), style=styles[ch])
    return t


class ThroughputPanel(Panel):
    """req/s and output tokens/s per second over the last minutes, ▲ where a setting changed."""

    TITLE = "throughput"
    DEFAULT_CSS = """
    ThroughputPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return throughput_lines(snap, self.palette, width, height)
