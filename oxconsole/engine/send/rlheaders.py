"""Reading a provider's `x-ratelimit-*` headers, within bounds.

Why this module exists: hosted providers say how much of their rate limits is left on every answer
(`x-ratelimit-limit-requests`, `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` and
the same three for `-tokens`; OpenAI's form). The values are a server's, so hostile until read:
each is at most `MAX_CHARS` long, a count is plain digits (at most `MAX_COUNT`), a reset is a Go
duration ("20ms", "1.5s", "6m0s", "1h2m3s") or plain seconds, at most `MAX_RESET_S`; anything
else is ignored, never raised. The engine's per-endpoint bookkeeping is `headroom.py`.
"""

from __future__ import annotations

import math
import re

__all__ = ["KINDS", "MAX_CHARS", "MAX_COUNT", "MAX_RESET_S", "parse_count", "parse_reset"]

KINDS = ("requests", "tokens")
"""The two limits a provider states, each with its limit, remaining and reset header."""

MAX_CHARS = 32
"""Longest header value read; a longer one is ignored whole."""

MAX_COUNT = 10**15
"""Largest count taken as a limit or a remaining figure."""

MAX_RESET_S = 86_400.0
"""Longest reset taken (a day); a provider's windows are a minute or a day at most."""

_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|us|µs|ns|h|m|s)")


def parse_count(value: str | None) -> int | None:
    """A limit or remaining figure: plain digits within bounds, else None."""
    if value is None or len(value) > MAX_CHARS:
        return None
    v = value.strip()
    if not v.isascii() or not v.isdigit():
        return None
    n = int(v)
    return n if n <= MAX_COUNT else None


def parse_reset(value: str | None) -> float | None:
    """Seconds until a limit resets: a Go duration ("6m0s", "20ms", "1.5s") or plain seconds
    ("1", "0.5"); None for anything else (negative, not finite, over `MAX_RESET_S`)."""
    if value is None or len(value) > MAX_CHARS:
        return None
    v = value.strip()
    if not v:
        return None
    seconds: float | None
    try:
        seconds = float(v)
    except ValueError:
        seconds = _go_duration(v)
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_RESET_S:
        return None
    return seconds


def _go_duration(v: str) -> float | None:
    pos, total = 0, 0.0
    while pos < len(v):
        m = _PART.match(v, pos)
        if m is None:
            return None
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    return total
