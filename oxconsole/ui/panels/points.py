"""The sweep's points so far: each ended point's value, req/s, goodput and p99, the knee marked,
and the point running now.

Why this module exists: while a sweep runs, the question is not only "how is this point doing"
but "where is the knee so far"; the answer is read off the sweep gauge (`Snapshot.sweep`, built by
`sweep/gauge.py`) alone, so the table is a plain function, testable without Textual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import REQUESTS_PER_S
from oxconsole.base.units import fmt_ms
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.widgets import Panel

__all__ = ["PointsPanel", "points_inputs", "points_lines"]


def points_inputs(s: Snapshot) -> object:
    """What the table shows (it redraws only when this changes)."""
    g = s.sweep or {}
    return (len(g.get("done") or ()), g.get("index"), g.get("knee"), round(s.req_per_s_10s, 1))


def points_lines(s: Snapshot, p: Palette, width: int, height: int = 100) -> list[Line]:
    """One row per ended point (`*` the knee so far), then the point running (`▸`, its last-10-s
    req/s); the newest rows when they do not all fit."""
    g: Mapping[str, Any] = s.sweep or {}
    done = list(g.get("done") or ())
    knee = g.get("knee")
    slo = any(d.get("goodput_per_s") is not None for d in done)
    cols = [Col(""), Col("#"), Col(str(g.get("key", "value")), right=False, flex=True, min_width=5)]
    cols += [Col(REQUESTS_PER_S.short), *([Col("goodput")] if slo else []), Col("p99")]
    rows: list[list[Cell]] = []
    for d in done:
        mark = Line("*", style=f"bold {p.success}") if knee is not None and d["value"] == knee else ""
        good, met = d.get("goodput_per_s"), d.get("slo_met")
        goodput = [Line("-" if good is None else f"{good:.1f}", style=p.error if met is False else "")]
        row: list[Cell] = [mark, str(d["index"]), str(d["value"]), f"{d['req_per_s']:.2f}"]
        rows.append([*row, *(goodput if slo else []), _ms(d.get("p99_ms"))])
    if s.gauges.state != "done" and g:
        now: list[Cell] = [
            Line("▸", style=p.accent),
            str(g.get("index")),
            Line(str(g.get("value")), style="bold"),
        ]
        rows.append([*now, f"{s.req_per_s_10s:.2f}", *([""] if slo else []), ""])
    room = max(1, height - 3)
    lines = grid(cols, rows[-room:], width, p)
    foot = f"knee so far: {g.get('key')}={knee}" if knee is not None else "knee: not yet"
    lines.append(Line(foot, style=p.muted))
    return fit(lines[: max(1, height)], width)


def _ms(v: Any) -> str:
    return "-" if v is None else fmt_ms(float(v))


class PointsPanel(Panel):
    """Each ended point's value, req/s, goodput and p99, the knee so far, the point running."""

    TITLE = "sweep points"
    EVERY = 2
    DEFAULT_CSS = """
    PointsPanel { height: auto; max-height: 12; }
    """

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        return points_inputs(snap), height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return points_lines(snap, self.palette, width, height)
