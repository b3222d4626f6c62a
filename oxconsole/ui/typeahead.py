"""Keys typed while the console starts: held unechoed, then handed to the console once it is up.

Why this module exists: between `oxconsole WORKLOAD.toml` and the console's first frame there are a
second or two (the engine process starts, Textual loads). The terminal's line discipline would echo
keys typed then onto the screen, and the console would read them before it had anything to act on.
`hold` turns echo and line buffering off as soon as a console is decided on; `take` reads what was
typed, without waiting, and puts the terminal back as it was just before Textual takes it over;
`keys` turns what was typed into key names the console can apply. No Textual here: `hold` runs
before Textual is imported.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import sys
import termios
from collections.abc import Mapping
from typing import Any

__all__ = ["TypeAhead", "hold", "keys", "plan", "take"]

_NAMES = {
    "+": "plus",
    "=": "equals_sign",
    "-": "minus",
    "]": "right_square_bracket",
    "[": "left_square_bracket",
    " ": "space",
    "?": "question_mark",
}
"""Characters whose key name is not the character itself (as Textual names them)."""
_SHOWN = {name: ch for ch, name in _NAMES.items()} | {"space": "space"}

_ESCAPE = re.compile(r"\x1b(\[[0-9;?<>]*[ -/]*[@-~]|O.|.)?", re.DOTALL)
"""An escape sequence (arrow keys, function keys, mouse reports): never a console key."""


class TypeAhead:
    """Holds one terminal's input while the console starts (see the module docstring)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    @property
    def holding(self) -> bool:
        return self._saved is not None

    def hold(self) -> bool:
        """Stop echoing and line-buffering what is typed (Ctrl-C still interrupts); False when
        the fd is not a terminal. Idempotent."""
        if self._saved is not None:
            return True
        try:
            if not os.isatty(self.fd):
                return False
            saved = termios.tcgetattr(self.fd)
            quiet = list(saved)
            quiet[3] = saved[3] & ~(termios.ECHO | termios.ICANON)
            termios.tcsetattr(self.fd, termios.TCSANOW, quiet)
        except (OSError, termios.error):
            return False
        self._saved = saved
        return True

    def take(self) -> str:
        """What was typed since `hold`, read without waiting; the terminal is put back as it was.
        Empty when not holding."""
        if self._saved is None:
            return ""
        chunks: list[bytes] = []
        try:
            while select.select([self.fd], [], [], 0)[0]:
                data = os.read(self.fd, 4096)
                if not data:
                    break
                chunks.append(data)
        except OSError:
            pass
        self.release()
        return b"".join(chunks).decode("utf-8", "replace")

    def release(self) -> None:
        """Put the terminal back as it was before `hold` (keys still unread stay queued)."""
        saved, self._saved = self._saved, None
        if saved is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSANOW, saved)
            except (OSError, termios.error):
                pass


def keys(typed: str) -> tuple[list[str], int]:
    """(key names, how many keys were dropped) for text typed ahead: printable characters become
    key names (``+`` -> ``plus``); escape sequences (arrows, function keys) and control characters
    (Enter, Tab) are dropped."""
    names: list[str] = []
    dropped = 0
    for ch in _ESCAPE.sub("\x00", typed):
        if ch.isprintable():
            names.append(_NAMES.get(ch, ch))
        else:
            dropped += 1
    return names, dropped


def plan(typed: str, bound: Mapping[str, str]) -> tuple[list[str], str, int]:
    """(actions to run in order, the keys that name them as typed, how many keys were dropped)
    for text typed ahead, given the console's bindings as key name -> action."""
    names, dropped = keys(typed)
    actions = [bound[n] for n in names if n in bound]
    shown = " ".join(_SHOWN.get(n, n) for n in names if n in bound)
    return actions, shown, dropped + len(names) - len(actions)


_stdin: TypeAhead | None = None


def hold() -> bool:
    """Hold stdin's keys until `take` (or the end of the process, when they are dropped)."""
    global _stdin
    if _stdin is None:
        try:
            _stdin = TypeAhead(sys.stdin.fileno())
        except (AttributeError, OSError, ValueError):
            return False
        atexit.register(_at_exit)
    return _stdin.hold()


def take() -> str:
    """What was typed on stdin since `hold`; the terminal back as it was. Empty when not held."""
    return _stdin.take() if _stdin is not None else ""


def _at_exit() -> None:
    """The console never opened (the run failed to start): drop what was typed for it, so the
    shell does not receive it, and put the terminal back."""
    if _stdin is not None and _stdin.holding:
        _stdin.take()
