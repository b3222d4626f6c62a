"""Text from a server made safe to store and to show.

Why this module exists: a server's text (an error body, an answer, a model name) is hostile until
read. Two things in it break us, and both are settled here, once:

- Stored: JSON may carry an unpaired surrogate escape (`"\\ud800"`), which Python's `json` (the
  SDK's error bodies) turns into a str that is not valid Unicode, and orjson, rightly, refuses to
  write. `valid_text` replaces each lone surrogate with U+FFFD. It costs nothing on ASCII text
  (`str.isascii` reads a flag) and one encode otherwise.
- Shown: control characters (ESC, C1 controls such as CSI U+009B, BEL, backspace, carriage
  return) reach a terminal as commands: OSC 52 writes the clipboard, OSC 8 plants a link, others
  set the title or clear the screen. `shown` writes each one as a visible escape (`\\x1b`), so the
  text reads as text. The console's Textual widgets get `shown` too, and Rich markup escaped.

A name from a workload or a journal (a model, an error class, a change) is as hostile, and it
reaches more than a terminal: `shown_lines` for a table printed whole, `md_cell` for Markdown
(no `<script>`, no `|` splitting a row), `csv_cell` for a spreadsheet (no `=HYPERLINK(...)`).
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls, and the characters that reorder or break
lines on screen (bidirectional overrides, line and paragraph separators)."""

_LINE_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""The same, tab and newline too: for text that must stay on one line (a table cell)."""


def valid_text(s: str) -> str:
    """`s` with every lone surrogate replaced by U+FFFD: a str that any encoder accepts."""
    if s.isascii():
        return s
    try:
        s.encode()
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", s)
    return s


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown(s: str, *, one_line: bool = False) -> str:
    """`s` as a terminal may print it: control characters written out (`\\x1b`), never obeyed;
    `one_line` escapes tab and newline as well."""
    s = valid_text(s)
    pattern = _LINE_CONTROL if one_line else _CONTROL
    return pattern.sub(_escape, s) if pattern.search(s) else s


def shown_lines(text: str) -> str:
    """`text` (lines for a terminal: a table, a report) with every control character in any of
    its lines written out, the line breaks kept: what a table made of names from a workload or a
    journal (a model, an error class, a change) prints, never a command to the terminal."""
    return "\n".join(shown(line, one_line=True) for line in text.split("\n"))


_MD_SPECIAL = re.compile(r"[\\|<>`]")


def md_cell(s: str) -> str:
    """`s` as Markdown text (a table cell, a heading): shown on one line (no control character,
    no line break to end the row), and `|`, `<`, `>`, backticks and backslashes escaped, so a name
    neither splits a table's row nor becomes HTML (`<script>`) or code in a rendered page."""
    s = shown(s, one_line=True)
    return _MD_SPECIAL.sub(lambda m: "\\" + m.group(), s) if _MD_SPECIAL.search(s) else s


CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r", "'")
"""What a spreadsheet reads as the start of a formula (OWASP's CSV injection list), and the quote
that escapes it: a cell starting with one of them gets a leading `'`, which the spreadsheet shows
as text; `csv_value` takes it off again."""


def csv_cell(s: str) -> str:
    """`s` as a CSV cell a spreadsheet will not run: a leading `'` before `=`, `+`, `-`, `@`,
    a tab or a carriage return (`=HYPERLINK(...)` stays text), and before a leading `'` itself, so
    that `csv_value` gives back exactly `s`. Numbers are not text cells: write them as they are."""
    return "'" + s if s.startswith(CSV_FORMULA) else s


def csv_value(cell: str) -> str:
    """A text cell written by `csv_cell`, as it was."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(CSV_FORMULA) else cell
