"""The cascade view's panel, shown once the run judges its answers (`[quality]`).

Why this module exists: like the cost view, a panel only some runs have; its lines are
`panels/cascade.py`'s, its place on the screen is `dashboard.py`'s (`MainScreen.reveal`).
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line
from oxconsole.ui.panels.cascade import cascade_lines, per_valid_rows
from oxconsole.ui.widgets import Panel

__all__ = ["CascadePanel"]


class CascadePanel(Panel):
    """Each model's valid and escalation rates, and $ per valid answer now and projected."""

    TITLE = "cascade"
    EVERY = 2
    DEFAULT_CSS = """
    CascadePanel { height: auto; max-height: 12; }
    """

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        q = snap.quality or {}
        return q.get("judged"), q.get("steps"), per_valid_rows(snap), width, height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return cascade_lines(snap, self.palette, width, height)
