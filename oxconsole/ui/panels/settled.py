"""Settled or settling, beside the phase: whether its figures can be read yet.

Why this module exists: the status line (always on screen) and the phase table both name the
phase, and both say in the same words and colours whether its figures hold still ("settled ±3%"
in the success colour, "settling ±12%" or "settling" muted), from the snapshot's `settle`.
"""

from __future__ import annotations

from oxconsole.metrics.settle import SettleView
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line, Palette

__all__ = ["settle_label"]


def settle_label(s: Snapshot, p: Palette, which: str = "phase") -> Line | None:
    """`settled ±3%` / `settling ±12%` / `settling` for the phase (or ``"run"``); None when the
    snapshot does not say (an engine older than the statistics)."""
    view = SettleView.from_dict((s.settle or {}).get(which))
    if view is None:
        return None
    style = f"bold {p.success}" if view.state == "settled" else p.muted
    return Line(view.label(), style=style)
