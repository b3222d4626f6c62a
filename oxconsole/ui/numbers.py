"""How figures read on the console beyond the shared units: clocks, a dash for no figure,
percentages, tight change words, and the rounding the key steps use.

Why this module exists: the panels, the key actions and the routing editor are narrower than a
summary table; what only the console writes lives here, and every other kind (money, rates,
counts, milliseconds) comes from `oxconsole.base.units`, so a cost reads the same in the console as
in the summary. Plain functions; no Rich, no Textual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from oxconsole.base.units import NONE, change_text, fmt_ms

__all__ = ["fmt_change", "fmt_clock", "ms", "pct", "round_sig", "tight_count"]


def fmt_clock(s: float) -> str:
    """Elapsed time as m:ss or h:mm:ss."""
    s = int(max(0.0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def ms(v: float) -> str:
    """Milliseconds, or a dash when there is no figure (0)."""
    return fmt_ms(v) if v > 0 else NONE


def pct(x: float) -> str:
    """A fraction as a percentage: whole percents, one decimal below 10%."""
    return f"{100 * x:.0f}%" if x >= 0.1 or x == 0 else f"{100 * x:.1f}%"


def fmt_change(c: Mapping[str, Any]) -> str:
    """One logged change in words, tight: ``concurrency 32→28``, ``rate ∞→20.0/s``, ``qwen off``;
    an agent's (`oxconsole mcp`) says so: ``concurrency 32→64 (agent)``."""
    text = change_text(c, arrow="→", unlimited="∞")
    return f"{text} (agent)" if c.get("by") == "agent" else text


def round_sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant digits (rates read better as 22.0 than 21.9615)."""
    if x <= 0:
        return 0.0
    return round(x, max(0, digits - 1 - math.floor(math.log10(x))))


def tight_count(n: float) -> str:
    """A count in at most 4 columns, for a narrow panel: ``600``, ``8.1k``, ``81k``, ``1.5M``."""
    n = int(n)
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            x = n / scale
            return f"{x:.1f}{suffix}" if abs(x) < 10 else f"{x:.0f}{suffix}"
    return str(n)
