"""A panel's lines: the theme colours they use, the Line they are made of, and hand-laid tables.

Why this module exists: every panel builds a few dozen short lines several times a second, and
the widgets repaint only the lines that changed, so a line must be cheap to build and to compare.
`Line` is that line, `Palette` the theme colours resolved once, `fit` cuts lines to the panel's
width and `grid` lays out a table (cheaper than rich.table to build and to paint, and two results
compare equal when nothing visible changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from oxconsole.base.safetext import shown

__all__ = ["Cell", "Col", "Labelled", "Line", "Palette", "fit", "grid", "join_lines", "labelled_line"]


@dataclass(frozen=True, slots=True)
class Palette:
    """Theme colours resolved to Rich colour strings (from the app's theme variables)."""

    primary: str = ""
    accent: str = ""
    success: str = ""
    warning: str = ""
    error: str = ""
    muted: str = ""
    foreground: str = ""
    bar: str = ""
    bar_empty: str = ""

    @classmethod
    def from_variables(cls, v: Mapping[str, str]) -> Palette:
        """Build from ``App.theme_variables`` (text-* variants are legible on the background)."""
        from textual.color import Color, ColorParseError

        def get(*names: str) -> str:
            for n in names:
                raw = v.get(n)
                if not raw:
                    continue
                try:
                    return Color.parse(raw).hex
                except ColorParseError:
                    continue
            return ""

        def blend(a: str, b: str, f: float) -> str:
            try:
                return Color.parse(v[a]).blend(Color.parse(v[b]), f).hex
            except (KeyError, ColorParseError):
                return ""

        return cls(
            primary=get("text-primary", "primary"),
            accent=get("text-accent", "accent"),
            success=get("text-success", "success"),
            warning=get("text-warning", "warning"),
            error=get("text-error", "error"),
            muted=blend("foreground", "background", 0.45),
            foreground=get("foreground"),
            bar=get("primary"),
            bar_empty=blend("foreground", "background", 0.8),
        )


def _safe(text: str) -> str:
    """``text`` as the terminal may draw it: a name from a workload or a journal (a model, an
    error class, a change) with a control character in it (OSC 52 writes the clipboard, CSI 2J
    clears the screen) is written out (`shown`), never sent as a command. `str.isprintable` is
    one pass in C, so the panels' own text costs next to nothing; a Line is never read as
    markup, so `[bold]` in a name shows as it is."""
    return text if text.isprintable() else shown(text, one_line=True)


class Line:
    """One line of a panel as (text, style) runs: the few parts of `rich.text.Text` the panels use.

    Why not Text itself: a panel builds some 30 lines four times a second, and Text sanitises every
    string it is given and keeps spans that must be divided again to be drawn; that was a fifth of
    the console's CPU. A Line is a list of runs, two Lines compare equal when they draw the same,
    and `widgets.Panel` turns one into a Strip with styles parsed once per style string.
    ``style`` applies under every run, as a Text's own style does.
    """

    __slots__ = ("cells", "runs", "style")

    def __init__(self, text: str = "", style: str = "") -> None:
        self.style = style
        self.runs: list[tuple[str, str]] = [(_safe(text), "")] if text else []
        self.cells = -1
        """Width in cells once `truncate` has measured it (-1: not yet)."""

    def append(self, text: str, style: str = "") -> Line:
        if text:
            self.runs.append((_safe(text), style))
            self.cells = -1
        return self

    def append_text(self, other: Line) -> Line:
        if other.style:
            self.runs.extend((t, f"{other.style} {st}" if st else other.style) for t, st in other.runs)
        else:
            self.runs.extend(other.runs)
        self.cells = -1
        return self

    @property
    def plain(self) -> str:
        return "".join(t for t, _ in self.runs)

    def __len__(self) -> int:
        return sum(len(t) for t, _ in self.runs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Line):
            return NotImplemented
        return self.runs == other.runs and self.style == other.style

    # mutable, like Text: not hashable
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Line({self.plain!r})"

    def copy(self) -> Line:
        new = Line(style=self.style)
        new.runs = list(self.runs)
        return new

    @property
    def cell_len(self) -> int:
        if self.cells < 0:
            self.cells = cell_len(self.plain)
        return self.cells

    def truncate(self, width: int) -> None:
        """Cut to ``width`` cells, the last one an ellipsis in the style of the cell it replaces
        (as `Text.truncate(..., overflow="ellipsis")`)."""
        if self.cell_len <= width:
            return
        self.cells = width
        room = max(0, width - 1)
        out: list[tuple[str, str]] = []
        for text, style in self.runs:
            n = cell_len(text)
            if n <= room:
                out.append((text, style))
                room -= n
                continue
            if room:
                out.append((set_cell_size(text, room), style))
            out.append(("…", style))
            break
        self.runs = out

    def to_text(self) -> Text:
        return Text.assemble(*self.runs, style=self.style, no_wrap=True)


def fit(lines: Sequence[Line], width: int) -> list[Line]:
    """Each line cut to ``width`` cells with an ellipsis."""
    w = max(1, width)
    for line in lines:
        line.truncate(w)
    return list(lines)


def join_lines(lines: Sequence[Line]) -> Text:
    """One Rich Text of several lines (a panel's lines, for tests and tools that want Text)."""
    return Text("\n", no_wrap=True).join(line.to_text() for line in lines)


# -- tables ----------------------------------------------------------------------------------


Labelled = tuple[str, str, str]
"""A part of a one-line summary: (long label, short label, value)."""


def labelled_line(parts: Sequence[Labelled], p: Palette, width: int, *, keep_last: bool = False) -> Line:
    """The parts with their long labels joined by " · "; wider than `width`, with their short
    labels joined by spaces, then parts left out from the end (the one before the last when
    `keep_last`) until it fits; one part is shown however wide."""
    t = _labelled(parts, p, short=False)
    left = list(parts)
    while t.cell_len > width and left:
        t = _labelled(left, p, short=True)
        if t.cell_len <= width or len(left) == 1:
            break
        left.pop(-2 if keep_last else -1)
    return t


def _labelled(parts: Sequence[Labelled], p: Palette, *, short: bool) -> Line:
    t = Line()
    for i, (long_label, short_label, value) in enumerate(parts):
        if i:
            t.append(" " if short else " · ", style=p.muted)
        t.append(short_label if short else long_label, style=p.muted)
        t.append(value, style="bold")
    return t


@dataclass(frozen=True, slots=True)
class Col:
    """A column of `grid`: header, alignment, and whether it takes the width left over."""

    header: str
    right: bool = True
    flex: bool = False
    min_width: int = 0


Cell = Line | str

_GAP = 2
"""Blank cells between two columns of a `grid`."""


def grid(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int, p: Palette) -> list[Line]:
    """A plain table as lines of Text: header, a rule, rows. Columns are as wide as their widest
    cell; the flex column gets what is left (cells cut with an ellipsis). Much cheaper to build
    and to paint than rich.table.Table, and comparable, so an unchanged panel is not repainted."""
    cells = [[c if isinstance(c, Line) else Line(c) for c in row] for row in rows]
    lens = [[len(c) for c in row] for row in cells]
    widths = [max([len(col.header), col.min_width, *(n[i] for n in lens)]) for i, col in enumerate(cols)]
    fixed = sum(w for w, c in zip(widths, cols, strict=True) if not c.flex) + _GAP * (len(cols) - 1)
    for i, col in enumerate(cols):
        if col.flex:
            widths[i] = max(4, width - fixed)
    right = [col.right for col in cols]
    out = [
        _grid_row(
            [Line(c.header) for c in cols], [len(c.header) for c in cols], widths, right, f"bold {p.primary}"
        ),
        Line("─" * max(1, min(width, sum(widths) + _GAP * (len(cols) - 1))), style=p.muted),
    ]
    for row, sizes in zip(cells, lens, strict=True):
        out.append(_grid_row(row, sizes, widths, right))
    return out


def _grid_row(
    items: Sequence[Line], sizes: Sequence[int], widths: Sequence[int], right: Sequence[bool], style: str = ""
) -> Line:
    """One row of `grid`: each cell padded (or cut) to its column's width, right or left aligned."""
    sep = " " * _GAP
    t = Line(style=style)
    for i, item in enumerate(items):
        w, n = widths[i], sizes[i]
        if n > w:
            item = item.copy()
            item.truncate(w)
            n = len(item)
        pad = " " * (w - n)
        if i:
            t.append(sep)
        if right[i]:
            t.append(pad)
            t.append_text(item)
        else:
            t.append_text(item)
            t.append(pad)
    return t
