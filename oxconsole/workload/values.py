"""Typed reading of TOML values: numbers, durations, enums and lists, each checked with its error text.

Why this module exists: every section of the workload reads its keys through `Table`, so a key is
rejected, and a bad value reported, the same way wherever it appears.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

from oxconsole.workload.errors import did_you_mean, error, fail, join_key


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_DURATION_FULL = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ms|s|m|h))+")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_HELP = 'seconds, or a string such as "500ms", "1.5s", "10m", "1h"'


def parse_duration(value: Any) -> float | None:
    """Seconds from a TOML number or a string like "500ms", "1.5s", "10m", "1h", "1m30s"; else None."""
    if is_num(value):
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if _DURATION_FULL.fullmatch(text):
            return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(text))
    return None


def fmt_duration(seconds: float) -> str:
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds < 120 or seconds % 60:
        return f"{seconds:g}s"
    if seconds < 7200 or seconds % 3600:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:g}h"


# --------------------------------------------------------------------------------------------
# Table reader: typed getters with the error format built in
# --------------------------------------------------------------------------------------------


class Table:
    """One TOML table being validated: rejects unknown keys, reads typed values with range checks."""

    def __init__(
        self,
        label: str,
        data: Any,
        path: str,
        known: Sequence[str],
        section: str,
        elsewhere: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(data, dict):
            fail(label, path, f"a table ({section})", data)
        self.label = label
        self.data: dict[str, Any] = data
        self.path = path
        for key in data:
            if key in known:
                continue
            hint = did_you_mean(key, known)
            if hint is not None:
                expected = f'a key of {section} (did you mean "{hint}"?)'
            elif elsewhere and key in elsewhere:
                expected = f'a key of {section} ("{key}" belongs under {elsewhere[key]})'
            else:
                expected = f"a key of {section} (one of: {', '.join(known)})"
            raise error(label, join_key(path, key), expected, "an unknown key")

    def p(self, key: str | int) -> str:
        return join_key(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.data

    def fail(self, key: str, expected: str) -> NoReturn:
        fail(self.label, self.p(key), expected, self.data.get(key))

    def int_(self, key: str, default: int, lo: int | None = None) -> int:
        if key not in self.data:
            return default
        v = self.data[key]
        if not is_int(v) or (lo is not None and v < lo):
            self.fail(key, "an integer" + (f" >= {lo}" if lo is not None else ""))
        return cast(int, v)

    def opt_int(self, key: str, lo: int) -> int | None:
        return self.int_(key, 0, lo) if key in self.data else None

    def num(
        self, key: str, default: float, lo: float = 0.0, hi: float | None = None, above: bool = False
    ) -> float:
        if key not in self.data:
            return default
        v = self.data[key]
        ok = is_num(v) and (v > lo if above else v >= lo) and (hi is None or v <= hi)
        if not ok:
            if hi is not None:
                self.fail(key, f"a number between {lo:g} and {hi:g}")
            self.fail(key, f"a number {'>' if above else '>='} {lo:g}")
        return float(v)

    def opt_num(self, key: str, lo: float = 0.0, hi: float | None = None) -> float | None:
        return self.num(key, 0.0, lo, hi) if key in self.data else None

    def str_(self, key: str, default: str | None = None, what: str = "a non-empty string") -> str:
        if key not in self.data:
            if default is None:
                raise error(self.label, self.p(key), what, "nothing (the key is required)")
            return default
        v = self.data[key]
        if not isinstance(v, str) or not v.strip():
            self.fail(key, what)
        return v

    def bool_(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        v = self.data[key]
        if not isinstance(v, bool):
            self.fail(key, "true or false")
        return v

    def duration(self, key: str, default: float, positive: bool = False) -> float:
        if key not in self.data:
            return default
        v = self.data[key]
        seconds = parse_duration(v)
        if seconds is None or seconds < 0 or (positive and seconds == 0):
            self.fail(key, f"a duration {'> 0' if positive else '>= 0'} ({_DURATION_HELP})")
        return seconds

    def enum(self, key: str, default: str, choices: Sequence[str]) -> str:
        if key not in self.data:
            return default
        v = self.data[key]
        if v not in choices or not isinstance(v, str):
            hint = did_you_mean(v, choices) if isinstance(v, str) else None
            extra = f' (did you mean "{hint}"?)' if hint else ""
            self.fail(key, " | ".join(f'"{c}"' for c in choices) + extra)
        return v

    def str_list(self, key: str, what: str, allow_empty: bool = True) -> list[str] | None:
        if key not in self.data:
            return None
        v = self.data[key]
        if not isinstance(v, list) or (not allow_empty and not v):
            self.fail(key, f"{'a non-empty' if not allow_empty else 'an'} array of {what}")
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                fail(self.label, join_key(self.p(key), i), "a non-empty string", item)
        return cast(list[str], v)
