"""Error texts in the user's words: `file: key.path: expected ..., got ...`, and did-you-mean hints.

Why this module exists: every message the workload layer raises has this one shape, so the pieces
that render a key path, a user's value and a suggestion live together.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from oxconsole.workload.schema import WorkloadError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHOW_MAX = 60


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
        return json.dumps(value[:200], ensure_ascii=False)
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
        k = key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{path}.{k}" if path else k


def error(label: str, path: str, expected: str, got: str) -> WorkloadError:
    """`label: path: expected ..., got ...`, to raise."""
    where = f"{label}: {path}" if path else label
    return WorkloadError(f"{where}: expected {expected}, got {got}")


def fail(label: str, path: str, expected: str, value: Any) -> NoReturn:
    """Raise `error` with the user's value shown short."""
    raise error(label, path, expected, show(value))


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest choice to a misspelt word (case-insensitive as a second try), or None."""
    pool = list(choices)
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not found:
        lower = {c.lower(): c for c in pool}
        found = [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.6)]
    return found[0] if found else None
