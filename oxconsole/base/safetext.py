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
