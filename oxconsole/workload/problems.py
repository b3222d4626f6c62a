"""Error texts in the user's words: `file: key.path: expected ..., got ...`, did-you-mean hints,
and `Problems`, the list that collects every error of one document.

Why this module exists: every message the workload layer raises has this one shape, so the pieces
that render a key path, a user's value and a suggestion live together, and so does the rule for
reporting all of a file's errors at once, in file order.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

import orjson

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_KEY_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[^.]+')
_SHOW_MAX = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


MAX_LINE_ERRORS = 20
"""Bad lines of a prompts file told at most (then how many more): a screenful, not a flood."""


class WorkloadError(Exception):
    """Bad input (exit 2): one line per error, each naming the file, the key path and what was expected.

    `errors` holds the lines in file order; `str()` is them joined by newlines, so a single error
    reads exactly as one line.
    """

    def __init__(self, *errors: str) -> None:
        super().__init__(*errors)
        self.errors: list[str] = list(errors)

    def __str__(self) -> str:
        return "\n".join(self.errors)


def printable(text: str) -> str:
    """`text` with control characters (C0, DEL, C1, bidi overrides) escaped: never raw on a terminal."""
    return _CONTROL.sub(_escape, text)


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return json.dumps(ch)[1:-1] if ch < " " else f"\\u{ord(ch):04x}"


def show(value: Any) -> str:
    """A short TOML-ish rendering of a user value for 'got ...'."""
    text = _render(value)
    if len(text) > _SHOW_MAX:
        text = text[: _SHOW_MAX - 1] + "…"
    return text


def _render(value: Any, depth: int = 0) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return printable(json.dumps(value[:200], ensure_ascii=False))
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "a table" if depth == 0 else "{…}"
    if isinstance(value, list):
        if depth > 1:
            return "[…]"
        parts = [_render(v, depth + 1) for v in value[:8]]
        if len(value) > 8:
            parts.append("…")
        return "[" + ", ".join(parts) + "]"
    return f"{type(value).__name__} {value}"


def join_key(path: str, key: str | int) -> str:
    """`path.key`, the key quoted where TOML needs it (`sim.models."a.b"`)."""
    if isinstance(key, int):
        k = str(key)
    else:
        k = key if _BARE_KEY.fullmatch(key) else printable(json.dumps(key, ensure_ascii=False))
    return f"{path}.{k}" if path else k


def error(label: str, path: str, expected: str, got: str) -> WorkloadError:
    """`label: path: expected ..., got ...`, to raise."""
    where = f"{label}: {path}" if path else label
    return WorkloadError(f"{where}: expected {expected}, got {got}")


def fail(label: str, path: str, expected: str, value: Any) -> NoReturn:
    """Raise `error` with the user's value shown short."""
    raise error(label, path, expected, show(value))


def json_object(raw: bytes | bytearray | str, label: str, where: str, expected: str) -> dict[str, Any]:
    """One line or entry of a JSON source as an object; WorkloadError naming it otherwise
    (`expected` says which keys it should carry)."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise error(label, where, "a JSON object", f"invalid JSON ({e.msg.split(':')[0]})") from None
    if type(obj) is not dict:
        fail(label, where, expected, obj)
    return obj


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest choice to a misspelt word (case-insensitive as a second try), or None."""
    pool = list(choices)
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not found:
        lower = {c.lower(): c for c in pool}
        found = [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.6)]
    return found[0] if found else None


class Problems:
    """Every error found in one document, each reported once, in the order of the file's keys.

    The section parsers record a bad value here and go on with the default, so one `load_workload`
    lists every mistake instead of the first. The first error at a key path wins (a later check
    of the same value would only repeat it). Lines recorded with `note` (the `--set` arguments)
    come first, in command-line order; then the document's errors, sorted by where their key
    path sits in the document (a missing key after its table's other keys).
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._notes: list[str] = []
        self._found: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self._notes or self._found)

    def has(self, path: str) -> bool:
        """An error is already recorded at this key path."""
        return path in self._found

    def add(self, path: str, expected: str, got: str) -> None:
        """Record `label: path: expected ..., got ...` (got already rendered)."""
        if path not in self._found:
            self._found[path] = str(error(self.label, path, expected, got))

    def bad(self, path: str, expected: str, value: Any) -> None:
        """Record an error showing the user's value short."""
        self.add(path, expected, show(value))

    def note(self, *lines: str) -> None:
        """Record finished error lines that have no key path in the document."""
        self._notes.extend(lines)

    def raise_if_any(self, doc: Any) -> None:
        """Raise one WorkloadError listing every error, in file order, when there is any."""
        if not self:
            return
        ordered = sorted(self._found, key=lambda path: _position(doc, path))
        raise WorkloadError(*self._notes, *(self._found[p] for p in ordered))


def _split_key(path: str) -> list[str]:
    """The parts of a key path written by `join_key` (quoted parts unquoted)."""
    parts = []
    for m in _KEY_PART.finditer(path):
        text = m.group()
        if text.startswith('"'):
            try:
                text = json.loads(text)
            except ValueError:
                pass
        parts.append(text)
    return parts


def _position(doc: Any, path: str) -> tuple[int, ...]:
    """Where a key path sits in the document: the index of each part in its table or array."""
    pos: list[int] = []
    cur = doc
    for part in _split_key(path):
        if isinstance(cur, dict):
            keys = list(cur)
            pos.append(keys.index(part) if part in cur else len(keys))
            cur = cur.get(part)
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            pos.append(int(part))
            cur = cur[int(part)]
        else:
            pos.append(0)
            cur = None
    return tuple(pos)
