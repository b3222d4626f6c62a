"""The latency panel: one timing metric's histogram, over the last window or the whole run.

Why this module exists: percentiles alone hide the shape (two modes, a long tail); the histogram
shows it, with p50/p90/p99 marked on the bins that hold them. `h` cycles through
`LATENCY_METRICS`, `r` switches between the window and the whole run.
"""

from __future__ import annotations

import math

from textual.reactive import reactive

from oxconsole.base.figures import TIMINGS, Figure
from oxconsole.base.units import fmt_count, fmt_ms
from oxconsole.metrics.snapshot import Bins, Snapshot
from oxconsole.ui.charts import hbar
from oxconsole.ui.lines import Line, Palette, fit
from oxconsole.ui.numbers import ms
from oxconsole.ui.panels.reasoning import reasoning_line
from oxconsole.ui.widgets import Panel

__all__ = ["LATENCY_METRICS", "LatencyPanel", "latency_lines"]

LATENCY_METRICS: tuple[Figure, ...] = TIMINGS
"""The timings in the order `h` cycles through them, each titled by its declaration."""


def _fit_bins(bins: Bins, rows: int) -> list[tuple[float, float, int]]:
    """The bins without empty ones at either end, merged in runs to at most ``rows``."""
    b = list(bins)
    while b and b[0][2] == 0:
        b.pop(0)
    while b and b[-1][2] == 0:
        b.pop()
    rows = max(1, rows)
    if len(b) > rows:
        k = math.ceil(len(b) / rows)
        b = [
            (b[i][0], b[min(i + k, len(b)) - 1][1], sum(c for _, _, c in b[i : i + k]))
            for i in range(0, len(b), k)
        ]
    return b


def latency_lines(s: Snapshot, p: Palette, width: int, height: int, metric: str, scope: str) -> list[Line]:
    """One metric's histogram (``scope`` "window" = last window_s seconds, "run" = whole run),
    with p50/p90/p99 marked on the bins that hold them."""
    label = next((f.title for f in LATENCY_METRICS if f.key == metric), metric)
    summ = (s.window if scope == "window" else s.run).get(metric, {})
    bins = (s.bins_window if scope == "window" else s.bins_run).get(metric, ())
    lines: list[Line] = []
    t = Line(label, style=f"bold {p.primary}")
    t.append(f" · {'last ' + str(s.window_s) + ' s' if scope == 'window' else 'whole run'}", style="bold")
    t.append("   h: metric · r: window/run", style=p.muted)
    lines.append(t)
    n = sum(c for _, _, c in bins)
    t = Line()
    for q in ("p50", "p90", "p99"):
        t.append(f"{q} ", style=p.muted)
        t.append(f"{ms(summ.get(q, 0.0)):<8}", style="bold")
    if width >= 52:
        t.append("max ", style=p.muted)
        t.append(f"{ms(summ.get('max', 0.0)):<8}")
    t.append(f"n={fmt_count(n)}", style=p.muted)
    lines.append(t)
    answer = reasoning_line(s, p, width)
    if answer is not None:
        lines.append(answer)
    if n == 0:
        lines.append(
            Line("no finished requests" + (" in this window" if scope == "window" else " yet"), style=p.muted)
        )
        return fit(lines, width)
    qs = [(q, summ.get(q, 0.0)) for q in ("p50", "p90", "p99")]
    lines.extend(_bin_lines(_fit_bins(bins, max(1, height - len(lines))), qs, p, width))
    return fit(lines, width)


def _bin_lines(
    rows: list[tuple[float, float, int]], qs: list[tuple[str, float]], p: Palette, width: int
) -> list[Line]:
    """One line per bin: its upper bound, a bar, its count, and the percentiles that fall in it."""
    label_w = 9
    count_w = max(len(fmt_count(c)) for _, _, c in rows)
    mark_w = 13
    bar_w = max(4, width - label_w - count_w - mark_w - 1)
    top = max(c for _, _, c in rows) or 1
    lines: list[Line] = []
    for i, (lo, hi, c) in enumerate(rows):
        t = Line(f"{fmt_ms(hi):>{label_w - 1}} ", style=p.muted)
        filled, _ = hbar(c / top, bar_w)
        in_bin = [q for q, v in qs if v > 0 and (lo <= v <= hi or (i == 0 and v < lo))]
        t.append(filled.ljust(bar_w), style=p.accent if in_bin else p.bar)
        t.append(f" {fmt_count(c):>{count_w}}", style=p.muted if c == 0 else "")
        if in_bin:
            t.append(" ◂" + " ".join(in_bin), style=p.accent)
        lines.append(t)
    return lines


class LatencyPanel(Panel):
    """Histogram of one latency metric (`h` cycles), last window or whole run (`r`)."""

    TITLE = "latency"
    EVERY = 2
    metric: reactive[str] = reactive(LATENCY_METRICS[0].key, repaint=False)
    scope: reactive[str] = reactive("window", repaint=False)

    def watch_metric(self) -> None:
        self.redraw()

    def watch_scope(self) -> None:
        self.redraw()

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        run = self.scope == "run"
        summary = (snap.run if run else snap.window).get(self.metric)
        bins = (snap.bins_run if run else snap.bins_window).get(self.metric)
        return self.metric, self.scope, snap.window_s, summary, bins, snap.reasoning

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return latency_lines(snap, self.palette, width, height, self.metric, self.scope)
