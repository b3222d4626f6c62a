"""The errors panel: errors by class (final and retried), each with its first detail, wrapped.

Why this module exists: an error class alone rarely says what to do; its detail often ends with
the hint that does ("is base_url missing /v1?"), so details are wrapped rather than cut, and when
the height is short every class keeps its row and the most frequent classes keep their details.
"""

from __future__ import annotations

import textwrap
from typing import Any

from oxconsole.base.safetext import shown
from oxconsole.base.units import fmt_count, fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Cell, Col, Line, Palette, fit, grid
from oxconsole.ui.widgets import Panel

__all__ = ["ErrorsPanel", "errors_lines"]


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


class ErrorsPanel(Panel):
    """Errors by class (final and retried) with the first detail of each, wrapped."""

    TITLE = "errors"

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        return snap.errors, snap.attempt_errors, snap.error_details, fmt_rate(snap.errors_per_s_10s), height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return errors_lines(snap, self.palette, width, height)
