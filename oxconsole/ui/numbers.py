"""How figures read on the console: counts, rates, costs, weights, clocks and logged changes.

Why this module exists: every panel, the key actions and the routing editor show the same kinds of
numbers, and they must read the same everywhere (``1.23M``, ``22.0/s``, ``concurrency 32→28``).
Plain functions of a number (or of one logged change) to a short string; no Rich, no Textual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from oxconsole.metrics.format import fmt_ms

__all__ = [
    "fmt_change",
    "fmt_clock",
    "fmt_cost",
    "fmt_count",
    "fmt_rate",
    "fmt_weight",
    "ms",
    "pct",
    "round_sig",
]


def fmt_count(n: float) -> str:
    """1234 -> "1,234"; 1234567 -> "1.23M"."""
    n = int(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if abs(n) >= 100_000:
        return f"{n / 1e3:.0f}k"
    return f"{n:,}"


def fmt_rate(r: float, unit: str = "/s") -> str:
    """Requests (or tokens) per second with sensible digits; 0 shows as 0."""
    if r >= 1000:
        return f"{r:,.0f}{unit}"
    if r >= 100:
        return f"{r:.0f}{unit}"
    if r >= 10:
        return f"{r:.1f}{unit}"
    return f"{r:.2f}{unit}"


def fmt_cost(c: float) -> str:
    """Costs carry no currency sign: they are in the currency of the workload's prices."""
    if c == 0:
        return "0"
    if c < 0.01:
        return f"{c:.5f}"
    if c < 1:
        return f"{c:.4f}"
    if c < 100:
        return f"{c:.2f}"
    return f"{c:,.0f}"


def fmt_weight(w: float) -> str:
    return f"{w:g}" if w < 1000 else f"{w:.0f}"


def fmt_clock(s: float) -> str:
    """Elapsed time as m:ss or h:mm:ss."""
    s = int(max(0.0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def ms(v: float) -> str:
    """Milliseconds, or a dash when there is no figure (0)."""
    return fmt_ms(v) if v > 0 else "–"


def pct(x: float) -> str:
    """A fraction as a percentage: whole percents, one decimal below 10%."""
    return f"{100 * x:.0f}%" if x >= 0.1 or x == 0 else f"{100 * x:.1f}%"


def fmt_change(c: Mapping[str, Any]) -> str:
    """One logged change in words: ``concurrency 32→28``, ``qwen off``, ``paused``."""
    what = str(c.get("what", "?"))
    frm, to = c.get("from"), c.get("to")
    if what == "rate":

        def r(x: Any) -> str:
            return "∞" if not x else fmt_rate(float(x))

        return f"rate {r(frm)}→{r(to)}"
    if what == "tpm":
        return f"tpm {fmt_count(float(frm)) if frm else 'off'}→{fmt_count(float(to)) if to else 'off'}"
    if what == "weight":
        return f"{c.get('model', '?')} weight {fmt_weight(float(frm or 0))}→{fmt_weight(float(to or 0))}"
    if what == "enabled":
        return f"{c.get('model', '?')} {'on' if to else 'off'}"
    if what == "paused":
        return "paused" if to else "resumed"
    return f"{what} {frm}→{to}"


def round_sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant digits (rates read better as 22.0 than 21.9615)."""
    if x <= 0:
        return 0.0
    return round(x, max(0, digits - 1 - math.floor(math.log10(x))))
