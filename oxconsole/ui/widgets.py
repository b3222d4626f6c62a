"""The console's panels: each holds one immutable Snapshot and shows it as one Rich Text.

Why this module exists: a panel must cost nothing when nothing visible changed and little when
something did. Each panel keeps the latest snapshot in a `reactive`; `watch_snapshot` asks a pure
function in `render.py` for the Text at the panel's size and repaints only when that Text differs
from what is on screen (a snapshot that only moved the clock by 250 ms repaints the header once a
second, not four times). A panel that is not on screen (a hidden tab) draws nothing until it is
shown. No DataTable, no per-row widgets, no work proportional to the run.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
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
    snapshot: reactive[Snapshot | None] = reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = self.TITLE
        self._lines: list[Text] = []
        self._strips: list[Strip] = []
        self._drawn_for: tuple[int, int, Style | None] = (0, 0, None)
        self.paints = 0
        """Lines repainted so far (tests and the CPU budget read it)."""

    def watch_snapshot(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw at the current size and repaint only the lines that differ from what is shown."""
        if not self.is_on_screen and self._lines:
            self._drawn_for = (0, 0, None)  # hidden (another tab): draw in full when shown again
            return
        self._update()

    def _update(self) -> None:
        width, height = self._size_now()
        base = self.rich_style
        text = self._draw_now(width, height)
        lines = list(text.split("\n", allow_blank=True)) if text.plain else [Text()]
        full = self._drawn_for != (width, height, base)
        old = self._lines
        if len(lines) != len(old) and self.styles.height is not None and self.styles.height.is_auto:
            self.refresh(layout=True)
            full = True
        console = self.app.console
        strips = self._strips if not full else []
        dirty: list[int] = []
        for y, line in enumerate(lines):
            if not full and y < len(old) and line == old[y]:
                continue
            strip = Strip(list(Segment.apply_style(line.render(console), base)))
            strip = strip.adjust_cell_length(width, base)
            if y < len(strips):
                strips[y] = strip
            else:
                strips.append(strip)
            dirty.append(y)
        if len(strips) > len(lines):
            dirty.extend(range(len(lines), len(strips)))
            del strips[len(lines) :]
        self._lines = lines
        self._strips = strips
        self._drawn_for = (width, height, base)
        if full:
            self.paints += height
            self.refresh()
            return
        self.paints += len(dirty)
        for start, count in _runs(dirty):
            self.refresh(Region(0, start, width, count))

    def _size_now(self) -> tuple[int, int]:
        size = self.content_size
        return max(1, size.width), max(1, size.height)

    def _draw_now(self, width: int, height: int) -> Text:
        snap = self.snapshot
        if snap is None:
            return Text("waiting for the first figures…", style=self.palette.muted)
        return self.draw(snap, width, height)

    @property
    def palette(self) -> R.Palette:
        """Theme colours resolved once per theme (panels render Rich text, not CSS)."""
        name = self.app.theme
        p = _PALETTES.get(name)
        if p is None:
            p = _PALETTES[name] = R.Palette.from_variables(self.app.theme_variables)
        return p

    def render_line(self, y: int) -> Strip:
        """Textual's line API: one content line, from the strips built in `_update`."""
        width, height = self._size_now()
        drawn = self._drawn_for
        if drawn[0] != width or drawn[1] != height:
            self._update()
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self._drawn_for[2])

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        snap = self.snapshot
        if snap is None:
            return 1
        return len(self.draw(snap, max(1, width), 100).plain.split("\n"))

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        raise NotImplementedError

    def restyle(self) -> None:
        """The theme changed: draw every line again (their colours changed)."""
        self._drawn_for = (0, 0, None)
        self.refresh()


def _runs(ys: list[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as (start, count) runs, one refresh region per run."""
    out: list[tuple[int, int]] = []
    for y in sorted(ys):
        if out and out[-1][0] + out[-1][1] == y:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((y, 1))
    return out


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

    run_name: reactive[str] = reactive("", repaint=False)
    state: reactive[str] = reactive("starting", repaint=False)
    note: reactive[str] = reactive("", repaint=False)
    note_level: reactive[str] = reactive("", repaint=False)

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
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

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_in_flight(snap, self.palette, width, height)


class ThroughputPanel(Panel):
    """req/s and output tokens/s per second over the last minutes, ▲ where a setting changed."""

    TITLE = "throughput"
    DEFAULT_CSS = """
    ThroughputPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_throughput(snap, self.palette, width, height)


class LatencyPanel(Panel):
    """Histogram of one latency metric (`h` cycles), last window or whole run (`r`)."""

    TITLE = "latency"
    metric: reactive[str] = reactive("ttft_ms", repaint=False)
    scope: reactive[str] = reactive("window", repaint=False)

    def watch_metric(self) -> None:
        self.redraw()

    def watch_scope(self) -> None:
        self.redraw()

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_latency(snap, self.palette, width, height, self.metric, self.scope)


class ModelsPanel(Panel):
    """One row per model: weight vs actual share, in flight, req/s, TTFT and latency, errors,
    tokens, cost; disabled and cooling-down models marked."""

    TITLE = "models"
    DEFAULT_CSS = """
    ModelsPanel { height: auto; max-height: 14; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_models(snap, self.palette, width)


class ErrorsPanel(Panel):
    """Errors by class (final and retried) with the latest detail of each."""

    TITLE = "errors"

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_errors(snap, self.palette, width)


class PhasePanel(Panel):
    """Since the last change vs the whole run: what the change did."""

    TITLE = "this phase vs whole run"

    def draw(self, snap: Snapshot, width: int, height: int) -> Text:
        return R.render_phase(snap, self.palette, width, height)
