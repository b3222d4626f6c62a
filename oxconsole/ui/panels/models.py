"""The models panel: one row per model, as many columns as the width allows.

Why this module exists: a run over several models is judged model by model (share against weight,
rate, TTFT and latency, errors, cost); the table decides which columns fit the room it is given
(columns dropped or merged when narrow) and the widget shows it.
"""

from __future__ import annotations

from oxconsole.base.figures import COST, ERRORS, LATENCY, OK, REQUESTS_PER_S, TTFT
from oxconsole.base.units import fmt_count, fmt_money, fmt_rate, fmt_weight
from oxconsole.metrics.snapshot import ModelStats, Snapshot
from oxconsole.ui.lines import Col, Line, Palette, fit, grid
from oxconsole.ui.numbers import ms, pct
from oxconsole.ui.panels.media import media_line
from oxconsole.ui.widgets import Panel

__all__ = ["ModelsPanel", "models_lines"]

_MODEL_HEADERS = {
    "model": "model",
    "state": "state",
    "weight": "weight",
    "target": "target",
    "share": "share",
    "in_fl": "in fl",
    "rate": REQUESTS_PER_S.short,
    "ttft2": f"{TTFT.at('p50').short}/99",
    "ttft": TTFT.at("p50").short,
    "lat2": f"{LATENCY.at('p50').short}/99",
    "lat": LATENCY.at("p50").short,
    "ok": OK.label,
    "err": ERRORS.short,
    "tok": "tok in/out",
    "cost": COST.label,
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


class ModelsPanel(Panel):
    """One row per model: weight vs actual share, in flight, req/s, TTFT and latency, errors,
    tokens, cost; disabled and cooling-down models marked."""

    TITLE = "models"
    EVERY = 2
    DEFAULT_CSS = """
    ModelsPanel { height: auto; max-height: 14; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return models_lines(snap, self.palette, width)
