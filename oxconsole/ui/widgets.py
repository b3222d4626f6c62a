"""The console's panels: each holds one immutable Snapshot and renders it when Textual repaints.

Why this module exists: a panel must cost nothing when nothing changed and little when something
did. Each panel keeps the latest snapshot in a `reactive`; assigning a new one marks the panel
dirty, and Textual calls `render()` for panels that are actually on screen (a panel in a hidden
tab is not rendered at all). `render()` hands the snapshot to a pure function in `render.py` and
returns a plain Rich renderable: no DataTable, no per-row widgets, no work proportional to the run.
"""

from __future__ import annotations

from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui import render as R

__all__ = [
    "ErrorsPanel",
    "HeaderPanel",
    "InFlightPanel",
    "LatencyPanel",
    "ModelsPanel",
    "Panel",
    "PhasePanel",
    "ThroughputPanel",
]

_PALETTES: dict[str, R.Palette] = {}


class Panel(Widget):
    """Base: a bordered box rendering `snapshot` through `draw`."""

    DEFAULT_CSS = """
    Panel {
        border: round $primary 50%;
        border-title-color: $text-primary;
        border-title-style: bold;
        padding: 0 1;
        height: 1fr;
        background: $surface;
    }
    Panel:focus {
        border: round $accent;
    }
    """

    TITLE: ClassVar[str] = ""
    snapshot: reactive[Snapshot | None] = reactive(None, layout=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = self.TITLE

    @property
    def palette(self) -> R.Palette:
        """Theme colours resolved once per theme (panels render Rich text, not CSS)."""
        name = self.app.theme
        p = _PALETTES.get(name)
        if p is None:
            p = _PALETTES[name] = R.Palette.from_variables(self.app.theme_variables)
        return p

    def render(self) -> RenderableType:
        snap = self.snapshot
        if snap is None:
            return Text("waiting for the first figures…", style=self.palette.muted)
        size = self.content_size
        return self.draw(snap, max(1, size.width), max(1, size.height))

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        raise NotImplementedError


def forget_palettes() -> None:
    """Drop cached palettes (a theme was re-registered under the same name)."""
    _PALETTES.clear()


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

    run_name: reactive[str] = reactive("")
    state: reactive[str] = reactive("starting")
    note: reactive[str] = reactive("")
    note_level: reactive[str] = reactive("")

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        p = self.palette
        style = {"error": p.error, "warn": p.warning, "info": p.primary}.get(self.note_level, "")
        return R.render_header(
            snap, p, width, name=self.run_name, state=self.state, note=self.note, note_style=style
        )


class InFlightPanel(Panel):
    """In flight vs limit, waiting for a slot / the rate bucket / backing off, target vs achieved
    rate, loop lag, and what bounds throughput (with a warning when it is the client itself)."""

    TITLE = "in flight"
    DEFAULT_CSS = """
    InFlightPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_in_flight(snap, self.palette, width, height)


class ThroughputPanel(Panel):
    """req/s and output tokens/s per second over the last minutes, ▲ where a setting changed."""

    TITLE = "throughput"
    DEFAULT_CSS = """
    ThroughputPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_throughput(snap, self.palette, width, height)


class LatencyPanel(Panel):
    """Histogram of one latency metric (`h` cycles), last window or whole run (`r`)."""

    TITLE = "latency"
    metric: reactive[str] = reactive("ttft_ms")
    scope: reactive[str] = reactive("window")

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_latency(snap, self.palette, width, height, self.metric, self.scope)


class ModelsPanel(Panel):
    """One row per model: weight vs actual share, in flight, req/s, TTFT and latency, errors,
    tokens, cost; disabled and cooling-down models marked."""

    TITLE = "models"
    DEFAULT_CSS = """
    ModelsPanel { height: auto; max-height: 14; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_models(snap, self.palette, width)


class ErrorsPanel(Panel):
    """Errors by class (final and retried) with the latest detail of each."""

    TITLE = "errors"

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_errors(snap, self.palette, width)


class PhasePanel(Panel):
    """Since the last change vs the whole run: what the change did."""

    TITLE = "this phase vs whole run"

    def draw(self, snap: Snapshot, width: int, height: int) -> RenderableType:
        return R.render_phase(snap, self.palette, width, height)
