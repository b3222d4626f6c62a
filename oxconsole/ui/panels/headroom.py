"""The in-flight panel's headroom line: what is left of a provider's rate limits, and when they reset.

Why this module exists: a run against a hosted provider is often bound by its rate limits, not by
the server or the client; the `x-ratelimit-*` headers say how close, on every answer. The line
shows the endpoint with the least left (by share of its limit): remaining / limit requests and
tokens, and the reset, in words that fit the 36 columns the panel has at 80x24.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.units import fmt_count, fmt_duration
from oxconsole.ui.lines import Line, Palette
from oxconsole.ui.numbers import tight_count

__all__ = ["LOW", "headroom_line", "tightest"]

LOW = 0.1
"""Below this share of a limit left, the figure is shown as a warning."""


def _left(s: Mapping[str, Any], kind: str) -> float | None:
    limit, left = s.get(f"limit_{kind}"), s.get(f"remaining_{kind}")
    if not limit or left is None:
        return None
    return float(left) / float(limit)


def tightest(rl: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """The endpoint with the least share of a limit left, and its figures."""

    def least(item: tuple[str, Mapping[str, Any]]) -> float:
        shares = [x for k in ("requests", "tokens") if (x := _left(item[1], k)) is not None]
        return min(shares, default=1.0)

    return min(rl.items(), key=least)


def headroom_line(rl: Mapping[str, Mapping[str, Any]], p: Palette, head: Line, narrow: bool) -> Line:
    """`head` (the row's label) then "req 12/600 · tok 81k/150k · reset 3.2s" for the tightest
    endpoint (its name too when there are several)."""
    name, s = tightest(rl)
    t = head
    sep = " " if narrow else " · "
    count = tight_count if narrow else fmt_count
    first = True
    reset = None
    for kind, word in (("requests", "req"), ("tokens", "tok")):
        left = s.get(f"remaining_{kind}")
        if left is None:
            continue
        if not first:
            t.append(sep, style=p.muted)
        first = False
        t.append(f"{word} ", style=p.muted)
        share = _left(s, kind)
        t.append(count(left), style=p.warning if share is not None and share < LOW else "bold")
        limit = s.get(f"limit_{kind}")
        if limit is not None:
            t.append(f"/{count(limit)}", style=p.muted)
        r = s.get(f"reset_{kind}_s")
        if r is not None:
            reset = r if reset is None else max(reset, r)
    if reset is not None:
        t.append(sep, style=p.muted)
        t.append("" if narrow else "reset ", style=p.muted)
        t.append(fmt_duration(float(reset), 1 if reset < 10 else 0))
    if len(rl) > 1 and not narrow:
        t.append(f" ({name})", style=p.muted)
    return t
