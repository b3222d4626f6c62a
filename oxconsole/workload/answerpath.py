"""`[quality] expected_path`: the expected answer is one value inside a JSON answer.

Why this module exists: a model asked for structured output answers `{"label": "spam", ...}`, and
the prompts line's `"expected": "spam"` is about the label, not the whole text. The path is read
once from the workload (`parse_path`); each answer's value at it is found and compared here.

The path is dotted: `label`, `items.0.name`. A part is a key of an object; on an array, a part of
decimal digits is an index (`0`, `12`; no sign, no leading zero). A key holding a dot cannot be
named (no schema for structured output needs one); an object key made of digits can (`codes.404`
on an object is the key "404").

Equal means, by the type of the value found:
- a string: equal to the expected answer when both are trimmed and case-folded (as `expected`
  compares whole answers);
- a number (not a boolean): the expected answer read as a JSON number is numerically equal
  (`"3"` equals 3 and 3.0, `"1e2"` equals 100, `"0.10"` equals 0.1; an answer's float is the
  number its JSON wrote, not its binary neighbour); a text that is no number equals no number;
- a boolean: the expected answer trimmed and case-folded is `true` or `false` accordingly (a
  prompts line's `"expected": true` is read as the text `true`);
- null: the expected answer is `null` (trimmed, case-folded);
- an object or an array: the expected answer read as JSON is the same value (same keys, same
  order of items, numbers equal as above, strings exactly equal).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

__all__ = ["PATH_MAX", "PathError", "equals_expected", "parse_path", "value_at", "with_value_at"]

PATH_MAX: Final = 1000
"""The longest path (characters)."""
PARTS_MAX: Final = 64
"""Parts of a path at most: as deep as a schema may nest."""

_MISSING: Final = object()


class PathError(ValueError):
    """`expected_path` is not a dotted path: `expected`, and `got` for the parenthesis after the
    path as written (`FILE: quality.expected_path: expected ..., got "a..b" (an empty part)`)."""

    expected = 'a dotted path of object keys and array indexes ("label", "items.0.name")'

    def __init__(self, got: str) -> None:
        super().__init__(got)
        self.got = got


def parse_path(text: str) -> tuple[str, ...]:
    """The parts of a dotted path; PathError when it is empty, too long or has an empty part."""
    if not text or len(text) > PATH_MAX:
        raise PathError("an empty path" if not text else f"{len(text)} characters (at most {PATH_MAX})")
    parts = tuple(text.split("."))
    if len(parts) > PARTS_MAX:
        raise PathError(f"{len(parts)} parts (at most {PARTS_MAX})")
    if any(p == "" for p in parts):
        raise PathError("an empty part")
    return parts


def value_at(value: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    """(found, the value at the path)."""
    node = value
    for part in path:
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and _is_index(part):
            i = int(part)
            node = node[i] if i < len(node) else _MISSING
        else:
            return False, None
        if node is _MISSING:
            return False, None
    return True, node


def with_value_at(base: Any, path: tuple[str, ...], value: Any) -> Any:
    """`base` (a copy) with `value` put at the path, the objects and arrays on the way made as
    needed (an index pads its array with nulls): the simulator's right answer for a prompt whose
    expected answer is at `expected_path` (`base`: its instance of the schema, or None)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(base, list) and _is_index(head):
        out = list(base)
        i = int(head)
        out.extend([None] * (i + 1 - len(out)))
        out[i] = with_value_at(out[i], rest, value)
        return out
    if base is None and _is_index(head):
        return with_value_at([], path, value)
    out_d = dict(base) if isinstance(base, dict) else {}
    out_d[head] = with_value_at(out_d.get(head), rest, value)
    return out_d


def _is_index(part: str) -> bool:
    return part.isascii() and part.isdigit() and (part == "0" or not part.startswith("0"))


def equals_expected(found: Any, expected: str) -> bool:
    """Whether the value found equals the prompts line's expected answer (see the module's rules)."""
    if isinstance(found, str):
        return found.strip().casefold() == expected.strip().casefold()
    if isinstance(found, bool):
        return expected.strip().casefold() == ("true" if found else "false")
    if found is None:
        return expected.strip().casefold() == "null"
    if isinstance(found, int | float):
        want = _number(expected)
        return want is not None and _decimal(found) == want
    if isinstance(found, dict | list):
        try:
            return _same(found, orjson.loads(expected))
        except (orjson.JSONDecodeError, RecursionError):
            return False
    return False


def _number(text: str) -> Decimal | None:
    """The expected answer as a JSON number (no NaN, no infinity, no hex)."""
    t = text.strip()
    try:
        value = orjson.loads(t)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return Decimal(t)
    except InvalidOperation:
        return None


def _decimal(n: int | float) -> Decimal:
    # repr of a float is the shortest text that reads back as it: what the answer's JSON meant
    return Decimal(n) if isinstance(n, int) else Decimal(repr(n))


def _same(a: Any, b: Any) -> bool:
    """JSON equality: no True == 1, numbers by value, containers item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return _decimal(a) == _decimal(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)
