"""The table panels: one row per model, errors by class, and this phase next to the whole run.

Why this module exists: these three panels are tables laid out by `lines.grid`, and each decides
which columns and rows fit the room it is given (columns dropped or merged when narrow, the phase's
metrics and its list of changes cut to the height).
"""

from __future__ import annotations

from typing import Any

from oxconsole.metrics.format import fmt_duration
from oxconsole.metrics.snapshot import ModelStats, Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.numbers import fmt_change, fmt_clock, fmt_cost, fmt_count, fmt_rate, fmt_weight, ms, pct

__all__ = ["errors_lines", "models_lines", "phase_lines"]

# -- models ----------------------------------------------------------------------------------


def models_lines(s: Snapshot, p: Palette, width: int) -> list[Line]:
    """One row per model; columns are dropped or merged, least useful first, to fit ``width``."""
    wide = width >= 120
    mid = width >= 100
    wsum = sum(
        m.gauge.weight for m in s.models if m.gauge is not None and m.gauge.enabled and m.gauge.weight > 0
    )
    rows = [_model_row(m, p, wsum, mid, wide) for m in s.models]
    return fit(grid(_model_cols(s, mid, wide), rows, width, p), width)


def _model_cols(s: Snapshot, mid: bool, wide: bool) -> list[Col]:
    longest = max((len(m.name) for m in s.models), default=5)
    cols = [Col("model", right=False, flex=True, min_width=min(longest + (0 if mid else 8), 26))]
    if mid:
        cols.append(Col("state", right=False))
    cols += [
        Col("weight"),
        Col("share"),
        Col("in fl"),
        Col("req/s"),
        Col("TTFT p50/99" if mid else "TTFT50"),
        Col("lat p50/99" if mid else "lat50"),
        Col("ok"),
        Col("err"),
    ]
    if wide:
        cols += [Col("tok in/out"), Col("cost")]
    return cols


def _model_state(m: ModelStats, p: Palette) -> tuple[str, str]:
    """(word, style): off, cooling (down after errors), on, or – when the engine gave no gauge."""
    gauge = m.gauge
    if gauge is None:
        return "–", p.muted
    if not gauge.enabled:
        return "off", p.muted
    if gauge.cooled_down:
        return "cooling", p.warning
    return "on", p.success


def _model_row(m: ModelStats, p: Palette, wsum: float, mid: bool, wide: bool) -> list[Cell]:
    gauge = m.gauge
    enabled = gauge is None or gauge.enabled
    state, st_style = _model_state(m, p)
    if gauge is not None:
        wshare = gauge.weight / wsum if wsum and enabled else 0.0
        weight = f"{fmt_weight(gauge.weight)} {pct(wshare):>4}"
    else:
        weight = "–"
    dim = p.muted if not enabled else ""

    def both(a: float, b: float) -> str:
        return f"{ms(a)}/{ms(b)}" if mid else ms(a)

    name = Line(m.name, style=dim or "bold")
    if not mid and state != "on":
        name.append(f" {state}", style=st_style)
    row: list[Cell] = [name]
    if mid:
        row.append(Line(state, style=st_style))
    row += [
        Line(weight, style=dim),
        Line(pct(m.share), style=dim),
        Line(str(gauge.in_flight if gauge is not None else 0), style=dim),
        Line(fmt_rate(m.req_per_s_10s, ""), style=dim),
        Line(both(m.ttft_p50, m.ttft_p99), style=dim),
        Line(both(m.latency_p50, m.latency_p99), style=dim),
        Line(fmt_count(m.counts.ok), style=dim),
        Line(fmt_count(m.counts.error), style=p.error if m.counts.error else dim),
    ]
    if wide:
        row.append(Line(f"{fmt_count(m.input_tokens)}/{fmt_count(m.output_tokens)}", style=dim))
        row.append(Line(fmt_cost(m.cost), style=dim))
    return row


# -- errors ----------------------------------------------------------------------------------


class _ZeroStat:
    count = 0
    detail = ""


_Z: Any = _ZeroStat()


def errors_lines(s: Snapshot, p: Palette, width: int) -> list[Line]:
    """Final errors by class (requests that ended in error), attempts retried by class, and the
    latest detail of each class."""
    classes = sorted(set(s.errors) | set(s.attempt_errors), key=lambda c: (-s.errors.get(c, _Z).count, c))
    if not classes:
        return [Line("no errors", style=p.success)]
    cols = [
        Col("class", right=False),
        Col("final"),
        Col("retried"),
        Col("latest detail", right=False, flex=True),
    ]
    rows: list[list[Cell]] = []
    for c in classes:
        e = s.errors.get(c)
        rows.append(
            [
                Line(c, style=p.error if e else p.warning),
                Line(fmt_count(e.count) if e else "0", style=p.error if e else p.muted),
                fmt_count(s.attempt_errors.get(c, 0)),
                Line(e.detail if e and e.detail else "–", style=p.muted),
            ]
        )
    lines = grid(cols, rows, width, p)
    lines.append(
        Line(
            f"{fmt_rate(s.errors_per_s_10s)} now · final: failed after retries · retried: attempts retried",
            style=p.muted,
        )
    )
    return fit(lines, width)


# -- phase -----------------------------------------------------------------------------------

_PHASE_METRICS: tuple[tuple[str, str, str], ...] = (
    ("TTFT p50", "ttft_ms", "p50"),
    ("TTFT p99", "ttft_ms", "p99"),
    ("latency p50", "latency_ms", "p50"),
    ("latency p99", "latency_ms", "p99"),
    ("ITL p50", "itl_ms", "p50"),
    ("queue p50", "queue_ms", "p50"),
)
"""(label, snapshot key, quantile) of the phase table's timing rows, as many as the height allows."""


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
            Line("req/s", style=p.muted),
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
    ]
    for label, metric, q in _PHASE_METRICS[: max(1, height - 6)]:
        a = s.phase.get(metric, {}).get(q, 0.0)
        b = s.run.get(metric, {}).get(q, 0.0)
        rows.append([Line(label, style=p.muted), ms(a), ms(b), delta(a, b, True)])
    return rows
