"""The phase panel: this phase (since the last change) next to the whole run, and the last changes.

Why this module exists: the console's question after a key press is "what did that change do?";
the table answers it figure by figure with the change in percent, and cuts its metrics and its
list of changes to the height it is given.
"""

from __future__ import annotations

from oxconsole.base.figures import ITL, LATENCY, QUEUE, REQUESTS_PER_S, TTFT, Figure
from oxconsole.base.units import fmt_count, fmt_duration, fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.numbers import fmt_change, fmt_clock, ms, pct
from oxconsole.ui.panels.goodput import goodput_rows
from oxconsole.ui.widgets import Panel

__all__ = ["PhasePanel", "phase_lines"]

_PHASE_METRICS: tuple[Figure, ...] = tuple(
    f.at(q)
    for f, q in (
        (TTFT, "p50"),
        (TTFT, "p99"),
        (LATENCY, "p50"),
        (LATENCY, "p99"),
        (ITL, "p50"),
        (QUEUE, "p50"),
    )
)
"""The phase table's timing rows, as many as the height allows."""


def phase_lines(s: Snapshot, p: Palette, width: int, height: int) -> list[Line]:
    """This phase (since the last change) next to the whole run, and the last changes."""
    cols = [
        Col("", right=False, flex=True, min_width=11),
        Col("this phase"),
        Col("whole run"),
        Col("Δ", min_width=4),
    ]
    lines = [_phase_head(s, p), *grid(cols, _phase_rows(s, p, height), width, p)]
    room = height - len(lines)
    if room >= 2 and s.changes:
        lines.append(Line("changes", style=p.muted))
        for c in s.changes[-(room - 1) :]:
            line = Line(f"{fmt_clock(float(c.get('t', 0))):>7} ", style=p.muted)
            line.append(fmt_change(c))
            lines.append(line)
    return fit(lines, width)


def _phase_head(s: Snapshot, p: Palette) -> Line:
    """Which phase, since when and for how long, and the settings that started it."""
    head = Line()
    head.append(f"phase {s.phase_index}", style=f"bold {p.primary}")
    if s.phase_settings:
        dur = max(0.0, s.elapsed_s - s.phase_t_start)
        head.append(f" · {fmt_clock(s.phase_t_start)} (+{fmt_duration(dur)}) ", style=p.muted)
        head.append(", ".join(fmt_change(c) for c in s.phase_settings), style=p.accent)
    else:
        head.append(" · from the start, no change yet", style=p.muted)
    return head


def _phase_rows(s: Snapshot, p: Palette, height: int) -> list[list[Cell]]:
    """Rate, ok / err, error rate, then the timings, each as this phase, whole run, change."""
    pc, rc = s.phase_counts, s.counts

    def delta(a: float, b: float, lower_is_better: bool) -> Line:
        if a <= 0 or b <= 0:
            return Line("")
        d = (a - b) / b
        if abs(d) < 0.005:
            return Line("=", style=p.muted)
        good = (d < 0) == lower_is_better
        return Line(f"{100 * d:+.0f}%", style=p.success if good else p.warning)

    pe = pc.error / pc.total if pc.total else 0.0
    re_ = rc.error / rc.total if rc.total else 0.0
    rows: list[list[Cell]] = [
        [
            Line(REQUESTS_PER_S.short, style=p.muted),
            fmt_rate(s.phase_req_per_s, ""),
            fmt_rate(s.req_per_s, ""),
            delta(s.phase_req_per_s, s.req_per_s, False),
        ],
        [
            Line("ok / err", style=p.muted),
            f"{fmt_count(pc.ok)} / {fmt_count(pc.error)}",
            f"{fmt_count(rc.ok)} / {fmt_count(rc.error)}",
            "",
        ],
        [Line("error rate", style=p.muted), pct(pe), pct(re_), delta(pe, re_, True)],
        *goodput_rows(s, p),
    ]
    for f in _PHASE_METRICS[: max(1, height - 3 - len(rows))]:
        a, b = f.of(s.phase) or 0.0, f.of(s.run) or 0.0
        rows.append([Line(f.label, style=p.muted), ms(a), ms(b), delta(a, b, f.lower_is_better)])
    return rows


class PhasePanel(Panel):
    """Since the last change vs the whole run: what the change did."""

    TITLE = "this phase vs whole run"
    EVERY = 2

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return phase_lines(snap, self.palette, width, height)
