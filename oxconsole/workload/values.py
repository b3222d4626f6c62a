"""Typed reading of TOML values: numbers, durations, enums and lists, each checked with its error text.

Why this module exists: every section of the workload reads its keys through `Table`, so a key is
rejected, and a bad value reported (and the reading goes on to the next key), the same way wherever
it appears.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from oxconsole.workload.bounds import INT64_MAX, INT64_MIN, MAX_DURATION, fmt_limit
from oxconsole.workload.problems import Problems, did_you_mean, join_key


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
    """One TOML table being validated: unknown keys and bad values are recorded in `errs`.

    A getter that finds a bad value records the error and returns the default, so the section
    parser reads on and every mistake in the table is reported. A value that is not a table at all
    is recorded once and read as an empty table (`broken`): the parser returns early rather than
    report the keys such a value could not hold. A required key is not reported missing when an
    unknown key was taken for it (`nmae` already says "did you mean name").
    """

    def __init__(
        self,
        errs: Problems,
        data: Any,
        path: str,
        known: Sequence[str],
        section: str,
        elsewhere: Mapping[str, str] | None = None,
    ) -> None:
        self.errs = errs
        self.path = path
        self.broken = not isinstance(data, dict)
        if self.broken:
            errs.bad(path, f"a table ({section})", data)
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}
        self._hinted: set[str] = set()
        for key in self.data:
            if key in known:
                continue
            hint = did_you_mean(key, known)
            if hint is not None:
                self._hinted.add(hint)
                expected = f'a key of {section} (did you mean "{hint}"?)'
            elif elsewhere and key in elsewhere:
                expected = f'a key of {section} ("{key}" belongs under {elsewhere[key]})'
            else:
                expected = f"a key of {section} (one of: {', '.join(known)})"
            errs.add(join_key(path, key), expected, "an unknown key")

    def p(self, key: str | int) -> str:
        return join_key(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.data

    def ok(self, *keys: str) -> bool:
        """None of these keys had an error (so a check across them means something)."""
        return not any(self.errs.has(self.p(k)) for k in keys)

    def fail(self, key: str, expected: str) -> None:
        """Record an error at `key`, showing its value."""
        self.errs.bad(self.p(key), expected, self.data.get(key))

    def required(self, key: str, expected: str) -> None:
        """Record a missing required key (unless an unknown key's did-you-mean already named it)."""
        if key not in self._hinted:
            self.errs.add(self.p(key), expected, "nothing (the key is required)")

    def int_(
        self, key: str, default: int, lo: int | None = None, hi: int | None = None, why: str = ""
    ) -> int:
        """An integer >= lo; above `hi` (or outside 64 bits) is an error that states the range and why."""
        if key not in self.data:
            return default
        v = self.data[key]
        if not is_int(v) or (lo is not None and v < lo):
            self.fail(key, "an integer" + (f" >= {lo}" if lo is not None else ""))
            return default
        if v > (INT64_MAX if hi is None else hi) or v < INT64_MIN:
            if hi is None:
                self.fail(key, "a 64-bit integer (TOML integers are 64-bit)")
            else:
                self.fail(key, f"an integer between {fmt_limit(lo or 0)} and {fmt_limit(hi)}{why}")
            return default
        return cast(int, v)

    def opt_int(self, key: str, lo: int, hi: int, why: str = "") -> int | None:
        return self.int_(key, 0, lo, hi, why) if key in self.data else None

    def num(self, key: str, default: float, hi: float, why: str | None = None) -> float:
        """A finite number between 0 and `hi`.

        With `why`, `hi` is a sanity limit: a negative or non-number value reads "a number >= 0", a
        value above `hi` (or inf, nan) "a number between 0 and hi (why)". Without, `hi` is part of
        the key's meaning (0-1, 0-2) and every error states the range.
        """
        if key not in self.data:
            return default
        v = self.data[key]
        range_text = f"a number between 0 and {fmt_limit(hi)}"
        if why is None:
            if not is_num(v) or not 0 <= v <= hi:
                self.fail(key, range_text)
                return default
        elif not isinstance(v, int | float) or isinstance(v, bool) or v < 0:
            self.fail(key, "a number >= 0")
            return default
        elif not math.isfinite(v) or v > hi:
            self.fail(key, f"{range_text}{why}")
            return default
        return float(v)

    def opt_num(self, key: str, hi: float) -> float | None:
        return self.num(key, 0.0, hi) if key in self.data else None

    def str_(self, key: str, default: str | None = None, what: str = "a non-empty string") -> str:
        """A non-empty string; a missing key without a default is recorded as required (and reads "")."""
        if key not in self.data:
            if default is None:
                self.required(key, what)
                return ""
            return default
        v = self.data[key]
        if not isinstance(v, str) or not v.strip():
            self.fail(key, what)
            return default or ""
        return v

    def bool_(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        v = self.data[key]
        if not isinstance(v, bool):
            self.fail(key, "true or false")
            return default
        return v

    def duration(self, key: str, default: float, positive: bool = False) -> float:
        """Seconds (see `parse_duration`), >= 0 (or > 0), at most MAX_DURATION."""
        if key not in self.data:
            return default
        seconds = parse_duration(self.data[key])
        if seconds is None or seconds < 0 or (positive and seconds == 0):
            self.fail(key, f"a duration {'> 0' if positive else '>= 0'} ({_DURATION_HELP})")
            return default
        if not math.isfinite(seconds) or seconds > MAX_DURATION:
            self.fail(key, "a duration of at most 365 days (no run lasts longer)")
            return default
        return seconds

    def enum(self, key: str, default: str, choices: Sequence[str]) -> str:
        if key not in self.data:
            return default
        v = self.data[key]
        if v not in choices or not isinstance(v, str):
            hint = did_you_mean(v, choices) if isinstance(v, str) else None
            extra = f' (did you mean "{hint}"?)' if hint else ""
            self.fail(key, " | ".join(f'"{c}"' for c in choices) + extra)
            return default
        return v

    def str_list(self, key: str, what: str, allow_empty: bool = True) -> list[str] | None:
        """The array's strings (bad entries recorded and left out); None when absent or not an array."""
        if key not in self.data:
            return None
        v = self.data[key]
        if not isinstance(v, list) or (not allow_empty and not v):
            self.fail(key, f"{'a non-empty' if not allow_empty else 'an'} array of {what}")
            return None
        out: list[str] = []
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                self.errs.bad(join_key(self.p(key), i), "a non-empty string", item)
            else:
                out.append(item)
        return out


def every_interface(host: str) -> bool:
    """Whether binding to `host` listens on every interface: the unspecified address in any
    spelling the socket layer accepts ("0.0.0.0", "0", "::", "::0", "[::]", "0:0:0:0:0:0:0:0")."""
    import ipaddress
    import socket

    bare = host.strip("[]")
    if not bare:
        return True
    try:
        return ipaddress.ip_address(bare).is_unspecified
    except ValueError:
        pass
    try:  # inet_aton reads the short IPv4 forms bind() accepts ("0", "0.0")
        return ipaddress.IPv4Address(socket.inet_aton(bare)).is_unspecified
    except OSError:
        return False


def split_host_port(text: str) -> tuple[str, int] | None:
    """An address such as "127.0.0.1:9464", "[::1]:9464" or ":9464" (loopback) as (host, port);
    None if malformed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if any(c.isspace() or c in "/[]" for c in host):
        return None
    return (host or "127.0.0.1", int(port))
