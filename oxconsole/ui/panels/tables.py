"""The table panels: one row per model, errors by class, and this phase next to the whole run.

Why this module exists: these three panels are tables laid out by `lines.grid`, and each decides
which columns and rows fit the room it is given (columns dropped or merged when narrow, the phase's
metrics and its list of changes cut to the height).
"""

from __future__ import annotations

import textwrap
from typing import Any

from oxconsole.base.safetext import shown
from oxconsole.base.units import fmt_count, fmt_duration, fmt_money, fmt_rate, fmt_weight
from oxconsole.metrics.snapshot import ModelStats, Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.numbers import fmt_change, fmt_clock, ms, pct
from oxconsole.ui.panels.goodput import goodput_rows
from oxconsole.ui.panels.media import media_line

__all__ = ["errors_lines", "models_lines", "phase_lines"]

# -- models ----------------------------------------------------------------------------------


_MODEL_HEADERS = {
    "model": "model",
    "state": "state",
    "weight": "weight",
    "target": "target",
    "share": "share",
    "in_fl": "in fl",
    "rate": "req/s",
    "ttft2": "TTFT p50/99",
    "ttft": "TTFT p50",
    "lat2": "lat p50/99",
    "lat": "lat p50",
    "ok": "ok",
    "err": "err",
    "tok": "tok in/out",
    "cost": "cost",
}

_MODEL_LAYOUTS: tuple[tuple[str, ...], ...] = tuple(
    tuple(layout.split())
    for layout in (
        "model state weight target share in_fl rate ttft2 lat2 ok err tok cost",
        "model state weight target share in_fl rate ttft2 lat2 ok err cost",
        "model state weight share in_fl rate ttft2 lat2 ok err cost",
        "model state weight share in_fl rate ttft lat ok err cost",
        "model state weight share rate ttft lat ok err cost",
        "model weight share rate ttft lat ok err cost",
        "model weight share rate lat err cost",
    )
)
"""The models table's columns from the richest to the leanest, each dropping the least useful
column left (tokens, the share a weight asks for, in flight per model, p99s, the state, which then
follows the name). The first layout that fits is drawn; cost stays down to 80 columns."""


def models_lines(s: Snapshot, p: Palette, width: int) -> list[Line]:
    """One row per model. The name column is as wide as the longest name, and the first of
    `_MODEL_LAYOUTS` that fits ``width`` is drawn; in the last, names are cut to fit. A run with
    images or audio ends with the media line (`media.py`)."""
    wsum = sum(
        m.gauge.weight for m in s.models if m.gauge is not None and m.gauge.enabled and m.gauge.weight > 0
    )
    cells = [_model_cells(m, p, wsum) for m in s.models]
    fits = False
    for layout in _MODEL_LAYOUTS:
        named = "state" not in layout  # the state follows the name
        keys = ["named" if k == "model" and named else k for k in layout]
        widths = (
            max([len(_MODEL_HEADERS[k]), *(len(c[key]) for c in cells)])
            for k, key in zip(layout, keys, strict=True)
        )
        fits = sum(widths) + 2 * (len(layout) - 1) <= width
        if fits:
            break
    cols = [
        Col(_MODEL_HEADERS[k], right=k not in ("model", "state"), flex=k == "model" and not fits)
        for k in layout
    ]
    rows = [[c[key] for key in keys] for c in cells]
    lines = grid(cols, rows, width, p)
    media = media_line(s, p, width)
    if media is not None:  # the kinds in the run at their rates, under the models serving them
        lines.append(media)
    return fit(lines, width)


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


def _model_cells(m: ModelStats, p: Palette, wsum: float) -> dict[str, Line]:
    """Every cell a model's row may show, by column key (``named``: the name with its state after
    it when not on, for layouts without a state column)."""
    gauge = m.gauge
    enabled = gauge is None or gauge.enabled
    state, st_style = _model_state(m, p)
    dim = p.muted if not enabled else ""
    named = Line(m.name, style=dim or "bold")
    if state not in ("on", "–"):
        named.append(f" {state}", style=st_style)
    target = gauge.weight / wsum if gauge is not None and wsum and enabled else 0.0
    return {
        "model": Line(m.name, style=dim or "bold"),
        "named": named,
        "state": Line(state, style=st_style),
        "weight": Line(fmt_weight(gauge.weight) if gauge is not None else "–", style=dim),
        "target": Line(pct(target) if gauge is not None else "–", style=dim),
        "share": Line(pct(m.share), style=dim),
        "in_fl": Line(str(gauge.in_flight if gauge is not None else 0), style=dim),
        "rate": Line(fmt_rate(m.req_per_s_10s, ""), style=dim),
        "ttft2": Line(f"{ms(m.ttft_p50)}/{ms(m.ttft_p99)}", style=dim),
        "ttft": Line(ms(m.ttft_p50), style=dim),
        "lat2": Line(f"{ms(m.latency_p50)}/{ms(m.latency_p99)}", style=dim),
        "lat": Line(ms(m.latency_p50), style=dim),
        "ok": Line(fmt_count(m.counts.ok), style=dim),
        "err": Line(fmt_count(m.counts.error), style=p.error if m.counts.error else dim),
        "tok": Line(f"{fmt_count(m.input_tokens)}/{fmt_count(m.output_tokens)}", style=dim),
        "cost": Line(fmt_money(m.cost), style=dim),
    }


# -- errors ----------------------------------------------------------------------------------


class _ZeroStat:
    count = 0
    detail = ""


_Z: Any = _ZeroStat()


def errors_lines(s: Snapshot, p: Palette, width: int, height: int = 100) -> list[Line]:
    """Final errors by class (requests that ended in error), attempts retried by class, and under
    each class its first detail, wrapped rather than cut (the hint that says why, such as "is
    base_url missing /v1?", tends to be at its end). When the height is short, every class keeps
    its row and the details of the most frequent classes come first."""
    classes = sorted(set(s.errors) | set(s.attempt_errors), key=lambda c: (-s.errors.get(c, _Z).count, c))
    if not classes:
        return [Line("no errors", style=p.success)]
    cols = [Col("class", right=False), Col("final"), Col("retried")]
    rows: list[list[Cell]] = []
    for c in classes:
        e = s.errors.get(c)
        rows.append(
            [
                Line(c, style=p.error if e else p.warning),
                Line(fmt_count(e.count) if e else "0", style=p.error if e else p.muted),
                fmt_count(s.attempt_errors.get(c, 0)),
            ]
        )
    table = grid(cols, rows, width, p)
    room = height - len(table) - 1  # lines left for details; the last line says what columns mean
    lines = table[:2]
    for c, row in zip(classes, table[2:], strict=True):
        lines.append(row)
        e = s.errors.get(c)
        detail = shown(s.error_details.get(c) or (e.detail if e else ""), one_line=True)
        wrapped = textwrap.wrap(detail, max(8, width - 2), break_on_hyphens=False) if detail else []
        keep = max(0, min(len(wrapped), room))
        for k, text in enumerate(wrapped[:keep]):
            cut = k == keep - 1 and keep < len(wrapped)
            lines.append(Line(f"  {text}{' …' if cut else ''}"))
        room -= keep
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
        *goodput_rows(s, p),
    ]
    for label, metric, q in _PHASE_METRICS[: max(1, height - 3 - len(rows))]:
        a = s.phase.get(metric, {}).get(q, 0.0)
        b = s.run.get(metric, {}).get(q, 0.0)
        rows.append([Line(label, style=p.muted), ms(a), ms(b), delta(a, b, True)])
    return rows
