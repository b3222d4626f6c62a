"""The header panel: who and how the run is doing, how far it is, and one status line.

Why this module exists: the header is the one panel always on screen, and its three lines answer
three questions (state and totals; progress; what just happened or what the phase is), each built
by its own function here.
"""

from __future__ import annotations

from textual.reactive import reactive

from oxconsole.base.figures import OUTPUT_TOKENS_PER_S
from oxconsole.base.units import fmt_count, fmt_duration, fmt_money, fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.metrics.stages import stage_text
from oxconsole.reports.progress import eta_seconds
from oxconsole.sweep.gauge import sweep_fraction, sweep_text
from oxconsole.ui.charts import hbar
from oxconsole.ui.lines import Line, Palette, fit
from oxconsole.ui.numbers import fmt_change, fmt_clock, pct
from oxconsole.ui.panels.goodput import goodput_rate, goodput_share
from oxconsole.ui.panels.packing import rate_label
from oxconsole.ui.widgets import Panel

__all__ = ["HeaderPanel", "header_lines"]


def header_lines(
    s: Snapshot,
    p: Palette,
    width: int,
    *,
    name: str,
    state: str,
    note: str = "",
    note_style: str = "",
    flash: str = "",
    flash_style: str = "",
    duration: float = 0.0,
) -> list[Line]:
    """Three lines: who/state/counts/cost; progress bar with ETA (or, for a run bounded by
    ``duration`` seconds alone, elapsed time against it); a status line: a confirmation (``flash``,
    for a moment), then the console's note or the phase, and the current rates."""
    lines = [
        _title_line(s, p, width, name, state),
        _progress_line(s, p, width, state, duration),
        _status_line(s, p, width, note, note_style, flash, flash_style),
    ]
    return fit(lines, width)


def _state_style(p: Palette, state: str) -> str:
    return {
        "running": p.success,
        "paused": p.warning,
        "draining": p.warning,
        "stopping": p.warning,
        "done": p.primary,
        "starting": p.muted,
        "disconnected": p.error,
    }.get(state, p.foreground)


def _title_line(s: Snapshot, p: Palette, width: int, name: str, state: str) -> Line:
    """Run name, state, elapsed, ok / errors, the share of good requests with `[slo]` (retried when
    wide), cost and projected cost. When that is wider than ``width``, the least useful parts go
    first (the projection's word, the retried count, the error share, the projection, then the
    wide gaps), so the cost stays in sight at 80 columns beside the share of good requests."""
    for level in range(5):
        t = _title(s, p, width, name, state, level)
        if t.cell_len <= width:
            return t
    return t


def _title(s: Snapshot, p: Palette, width: int, name: str, state: str, level: int) -> Line:
    """`_title_line` at a level of thrift: 0 everything that fits the width, 1 no retried count,
    2 no error share, 3 no projection, 4 single gaps."""
    gap = " " if level >= 4 else "  "
    state_style = _state_style(p, state)
    t = Line()
    t.append(f" {name} ", style=f"bold {p.primary}")
    t.append(" ● ", style=state_style)
    t.append(state, style=f"bold {state_style}")
    t.append(f"{gap}{fmt_clock(s.elapsed_s)}", style="bold")
    if s.gauges.auto:
        t.append(f"{gap}auto ", style=p.accent)
        t.append(str(s.gauges.concurrency), style=f"bold {p.accent}")
    t.append(f"{gap} ok ", style=p.muted)
    t.append(fmt_count(s.counts.ok), style=p.success)
    t.append(f"{gap}err ", style=p.muted)
    err_pct = s.counts.error / s.counts.total if s.counts.total else 0.0
    t.append(fmt_count(s.counts.error), style=p.error if s.counts.error else "")
    if s.counts.error and level < 2:
        t.append(f" ({pct(err_pct)})", style=p.error)
    t.append_text(goodput_share(s, p, f"{gap} good ") or Line())
    if s.counts.retried and width >= 100 and level < 1:
        t.append(f"{gap}retried ", style=p.muted)
        t.append(fmt_count(s.counts.retried))
    t.append(f"{gap} cost ", style=p.muted)
    t.append(fmt_money(s.cost))
    if s.projected_cost is not None and s.projected_cost > s.cost and level < 3:
        t.append(" → ", style=p.muted)
        t.append(f"~{fmt_money(s.projected_cost)}", style=p.accent)
        if width >= 100 and level < 1:
            t.append(" projected", style=p.muted)
    return t


def _progress_line(s: Snapshot, p: Palette, width: int, state: str, duration: float) -> Line:
    """A progress bar: requests done of the total with the ETA (none unless running), or, bound by
    ``duration`` alone, the time elapsed of it; with neither, what was finished and sent."""
    g = s.gauges
    total = g.total_expected
    done = s.counts.total
    ending = next((x for x in (state, g.state) if x in ("done", "draining")), "")
    if s.sweep is not None:  # a sweep: how far through its points, which one, the time left
        frac = sweep_fraction(s.sweep, s.elapsed_s)
        tail = f" {sweep_text(s.sweep)}  {100 * frac:3.0f}%"
        tail += f"  {ending}" if ending else ""
    elif s.stage is not None:  # [[stages]]: the time through them, and which one
        frac = min(1.0, s.elapsed_s / max(float(s.stage["total_s"]), 1e-9))
        where = f"{s.stage['count']} stages" if ending else stage_text(s.stage, s.elapsed_s)
        tail = f" {where}  {100 * frac:3.0f}%  {fmt_count(done)} finished"
        tail += f"  {ending}" if ending else ""
    elif total:
        frac = done / total
        tail = f" {fmt_count(done)}/{fmt_count(total)} {100 * frac:5.1f}%"
        eta = eta_seconds(s)
        if duration > 0 and eta is not None:
            eta = min(eta, max(0.0, duration - s.elapsed_s))  # run.duration may end it first
        if state == "done" or done >= total:
            tail += "  complete"
        elif ending:
            tail += f"  {ending}"
        elif eta is not None:
            tail += f"  ETA {fmt_duration(eta)}"
    elif duration > 0:
        frac = min(1.0, s.elapsed_s / duration)
        tail = f" {fmt_clock(min(s.elapsed_s, duration))} of {fmt_clock(duration)} {100 * frac:5.1f}%"
        tail += f"  · {fmt_count(done)} finished"
        if ending:
            tail += f"  {ending}"
    else:
        return Line(
            f" {fmt_count(done)} finished · {fmt_count(g.dispatched)} sent · no fixed total", style=p.muted
        )
    t = Line()
    filled, empty = hbar(frac, max(10, width - len(tail) - 2))
    t.append(" ")
    t.append(filled, style=p.bar)
    t.append(empty, style=p.bar_empty)
    t.append(tail)
    return t


def _status_line(
    s: Snapshot, p: Palette, width: int, note: str, note_style: str, flash: str, flash_style: str
) -> Line:
    """The confirmation just given (``flash``), then the console's note, or the phase and its
    settings; the current rates (and goodput, with `[slo]`) unless a note takes the room. The
    phase's settings give way to the rates when the line is too long for both."""
    t = Line()
    if flash:
        t.append(f" {flash}", style=f"bold {flash_style or p.accent}")
        if note:
            t.append("  ·", style=p.muted)
    if note:
        t.append(f" {note}", style=note_style or p.warning)
        return t
    if not flash:
        t.append(f" phase {s.phase_index}", style=p.muted)
        if s.phase_settings:
            t.append(f" since {fmt_clock(s.phase_t_start)}: ", style=p.muted)
            t.append(", ".join(fmt_change(c) for c in s.phase_settings))
        else:
            t.append(" (no change yet)", style=p.muted)
    rates = Line(f"   {fmt_rate(s.req_per_s_10s, ' ' + rate_label(s)[:-1])}", style=p.primary)
    rates.append(f"  {fmt_rate(s.output_tokens_per_s_10s, ' ' + OUTPUT_TOKENS_PER_S.short)}")
    good = goodput_rate(s, p, "  good ")
    if good is not None:
        rates = Line().append_text(rates).append_text(good)
        if t.cell_len + rates.cell_len > width:
            t.truncate(max(1, width - rates.cell_len))
    return t.append_text(rates)


class HeaderPanel(Panel):
    """Run name, state, elapsed, progress with ETA, ok/error, cost so far and projected; one
    status line (phase, or what the console is doing: stopping, finished, disconnected)."""

    DEFAULT_CSS = """
    HeaderPanel {
        border: none;
        height: 3;
        padding: 0;
        background: $panel;
    }
    """

    run_name: reactive[str] = reactive("", repaint=False)
    state: reactive[str] = reactive("starting", repaint=False)
    note: reactive[str] = reactive("", repaint=False)
    note_level: reactive[str] = reactive("", repaint=False)
    flash: reactive[str] = reactive("", repaint=False)
    flash_level: reactive[str] = reactive("", repaint=False)
    duration: float = 0.0
    """The run's ``run.duration`` (0: none): a time bar when it has no fixed request count."""

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        p = self.palette
        levels = {"error": p.error, "warn": p.warning, "info": p.primary}
        return header_lines(
            snap,
            p,
            width,
            name=self.run_name,
            state=self.state,
            note=self.note,
            note_style=levels.get(self.note_level, ""),
            flash=self.flash,
            flash_style=p.warning if self.flash_level == "warn" else p.accent,
            duration=self.duration,
        )
