"""The cost view's panel: the run's cost beside each what-if price plan, shown once the run has plans.

Why this module exists: the panel is the one piece of the console that appears only for some runs
(those with `[plans.NAME]` tables); its lines are `panels/cost.py`'s, its place on the screen is
`dashboard.py`'s (`MainScreen.reveal`).
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line
from oxconsole.ui.panels.cost import cost_lines, cost_rows
from oxconsole.ui.widgets import Panel

__all__ = ["CostPanel"]


class CostPanel(Panel):
    """Total so far, per task and projected, at the actual prices and under each plan."""

    TITLE = "cost by plan"
    EVERY = 2
    DEFAULT_CSS = """
    CostPanel { height: auto; max-height: 12; }
    """

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        return cost_rows(snap), snap.counts.total, snap.gauges.total_expected, height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return cost_lines(snap, self.palette, width, height)
