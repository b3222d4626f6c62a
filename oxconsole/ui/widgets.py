"""The console's panels: each holds one immutable Snapshot and shows it as lines of styled text.

Why this module exists: a panel must cost nothing when nothing visible changed and little when
something did. Each panel keeps the latest snapshot in a `reactive`; `watch_snapshot` asks a pure
function in `ui/panels/` for the lines at the panel's size and repaints only the lines that differ
from what is on screen (a snapshot that only moved the clock by 250 ms repaints the header once a
second, not four times). A panel that is not on screen (a hidden tab) draws nothing until it is
shown. No DataTable, no per-row widgets, no work proportional to the run.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from oxconsole.base.units import fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line, Palette
from oxconsole.ui.panels.header import header_lines
from oxconsole.ui.panels.in_flight import in_flight_lines
from oxconsole.ui.panels.latency import latency_lines
from oxconsole.ui.panels.tables import errors_lines, models_lines, phase_lines
from oxconsole.ui.panels.throughput import throughput_lines

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

_PALETTES: dict[str, Palette] = {}


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
    EVERY: ClassVar[int] = 1
    """Take every EVERY-th snapshot (the console ticks at --refresh): figures over windows of
    seconds (histograms, per-model rows, the phase) need not redraw at 4 Hz."""
    snapshot: reactive[Snapshot | None] = reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = self.TITLE
        self._lines: list[Line] = []
        self._strips: list[Strip] = []
        self._drawn_for: tuple[int, int, Style | None] = (0, 0, None)
        self._base: Style | None = None
        self._styles: dict[tuple[str, str], Style] = {}
        self._inputs: object = None
        self.paints = 0
        """Lines repainted so far (tests and the CPU budget read it)."""
        self.draws = 0
        """Times the panel's Text was built (a snapshot that changes nothing it shows builds none)."""

    def watch_snapshot(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Draw at the current size and repaint only the lines that differ from what is shown."""
        if not self.is_on_screen and self._lines:
            self._drawn_for = (0, 0, None)  # hidden (another tab): draw in full when shown again
            return
        self._update()

    def _base_style(self) -> Style:
        """The panel's own colours under its lines. `Widget.rich_style` is worked out again after
        every refresh, so it is kept here until the theme or the layout changes (`restyle`)."""
        base = self._base
        if base is None:
            base = self._base = self.rich_style
        return base

    def _update(self) -> None:
        width, height = self._size_now()
        base = self._base_style()
        full = self._drawn_for != (width, height, base)
        snap = self.snapshot
        inputs = self.inputs(snap, width, height) if snap is not None else None
        if not full and inputs is not None and inputs == self._inputs:
            return  # nothing this panel shows has changed
        self._inputs = inputs
        self.draws += 1
        lines = self._draw_now(width, height)
        old = self._lines
        if len(lines) != len(old) and self.styles.height is not None and self.styles.height.is_auto:
            self.refresh(layout=True)
            full = True
        strips = self._strips if not full else []
        dirty: list[int] = []
        for y, line in enumerate(lines):
            if not full and y < len(old) and line == old[y]:
                continue
            strip = self._strip(line, width, base)
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
        if dirty:
            self.paints += len(dirty)
            self.refresh(*(Region(0, start, width, count) for start, count in _runs(dirty)))

    def _strip(self, line: Line, width: int, base: Style) -> Strip:
        """A Line as a Strip of ``width`` cells on the panel's colours; each style string is
        parsed once (until `restyle`)."""
        styles = self._styles
        get_style = self.app.console.get_style
        under = line.style
        segments: list[Segment] = []
        last: Style | None = None
        pending = ""
        for text, name in line.runs:
            style = styles.get((under, name))
            if style is None:
                style = base
                if under:
                    style = style + get_style(under)
                if name:
                    style = style + get_style(name)
                styles[(under, name)] = style
            if style is last or style == last:
                pending += text  # one segment per style change: each costs escape codes
                continue
            if last is not None:
                segments.append(Segment(pending, last))
            last, pending = style, text
        if last is not None:
            segments.append(Segment(pending, last))
        cells = line.cell_len
        if cells < width:
            segments.append(Segment(" " * (width - cells), base))
            return Strip(segments, width)
        if cells == width:
            return Strip(segments, width)
        return Strip(segments).adjust_cell_length(width, base)

    def _size_now(self) -> tuple[int, int]:
        size = self.content_size
        return max(1, size.width), max(1, size.height)

    def _draw_now(self, width: int, height: int) -> list[Line]:
        snap = self.snapshot
        if snap is None:
            return [Line("waiting for the first figures…", style=self.palette.muted)]
        return self.draw(snap, width, height)

    @property
    def palette(self) -> Palette:
        """Theme colours resolved once per theme (panels render Rich text, not CSS)."""
        name = self.app.theme
        p = _PALETTES.get(name)
        if p is None:
            p = _PALETTES[name] = Palette.from_variables(self.app.theme_variables)
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
        return len(self.draw(snap, max(1, width), 100))

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        """What the panel shows depends on, compared with ``==`` before drawing: when it equals the
        last one, the panel is not drawn at all. None (the default) means draw every snapshot."""
        return None

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        """The panel's lines, each at most ``width`` cells."""
        raise NotImplementedError

    def restyle(self) -> None:
        """The theme or the layout changed: draw every line again (their colours changed)."""
        self._drawn_for = (0, 0, None)
        self._base = None
        self._styles.clear()
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
    flash: reactive[str] = reactive("", repaint=False)
    flash_level: reactive[str] = reactive("", repaint=False)
    duration: float = 0.0
    """The run's ``run.duration`` (0: none): a time bar when it has no fixed request count."""

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        p = self.palette
        levels = {"error": p.error, "warn": p.warning, "info": p.primary}
        return header_lines(
            snap,
            p,
            width,
            name=self.run_name,
            state=self.state,
            note=self.note,
            note_style=levels.get(self.note_level, ""),
            flash=self.flash,
            flash_style=p.warning if self.flash_level == "warn" else p.accent,
            duration=self.duration,
        )


class InFlightPanel(Panel):
    """In flight vs limit, waiting for a slot / the rate bucket / backing off, target vs achieved
    rate, loop lag, and what bounds throughput (with a warning when it is the client itself)."""

    TITLE = "in flight"
    DEFAULT_CSS = """
    InFlightPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return in_flight_lines(snap, self.palette, width, height)


class ThroughputPanel(Panel):
    """req/s and output tokens/s per second over the last minutes, ▲ where a setting changed."""

    TITLE = "throughput"
    DEFAULT_CSS = """
    ThroughputPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return throughput_lines(snap, self.palette, width, height)


class LatencyPanel(Panel):
    """Histogram of one latency metric (`h` cycles), last window or whole run (`r`)."""

    TITLE = "latency"
    EVERY = 2
    metric: reactive[str] = reactive("ttft_ms", repaint=False)
    scope: reactive[str] = reactive("window", repaint=False)

    def watch_metric(self) -> None:
        self.redraw()

    def watch_scope(self) -> None:
        self.redraw()

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        run = self.scope == "run"
        summary = (snap.run if run else snap.window).get(self.metric)
        bins = (snap.bins_run if run else snap.bins_window).get(self.metric)
        return self.metric, self.scope, snap.window_s, summary, bins, snap.reasoning

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return latency_lines(snap, self.palette, width, height, self.metric, self.scope)


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


class ErrorsPanel(Panel):
    """Errors by class (final and retried) with the first detail of each, wrapped."""

    TITLE = "errors"

    def inputs(self, snap: Snapshot, width: int, height: int) -> object:
        return snap.errors, snap.attempt_errors, snap.error_details, fmt_rate(snap.errors_per_s_10s), height

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return errors_lines(snap, self.palette, width, height)


class PhasePanel(Panel):
    """Since the last change vs the whole run: what the change did."""

    TITLE = "this phase vs whole run"
    EVERY = 2

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return phase_lines(snap, self.palette, width, height)
