"""The points panel: a sweep's points so far, shown once the run is a sweep.

Why this module exists: like the cost view, the panel appears only for some runs (sweeps); its
lines are `panels/points.py`'s, its place on the screen is `dashboard.py`'s
(`MainScreen.reveal`).
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line
from oxconsole.ui.panels.points import points_inputs, points_lines
from oxconsole.ui.widgets import Panel

__all__ = ["PointsPanel"]


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
