"""What every console panel is: a widget that holds one immutable Snapshot and shows it as lines.

Why this module exists: a panel must cost nothing when nothing visible changed and little when
something did. Each panel keeps the latest snapshot in a `reactive`; `watch_snapshot` asks its
`draw` (the pure line functions beside each panel in `ui/panels/`) for the lines at the panel's
size and repaints only the lines that differ
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

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line, Palette

__all__ = ["Panel", "forget_palettes"]

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
