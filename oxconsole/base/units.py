"""How every figure reads: one formatter per kind (money, durations, milliseconds, counts, rates),
and a logged change in words (the figures themselves are declared in `figures.py`).

Why this module exists: the console, the summary table, the sweep table and the reports show the
same cost, latency and rate; each kind is written one way here, so a cost below a cent, an ETA
or a p99 reads the same wherever it is shown. Plain functions of a number; nothing of the
package, no Rich, no Textual (the bottom layer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "NONE",
    "change_text",
    "cut",
    "fmt_count",
    "fmt_decimal",
    "fmt_duration",
    "fmt_money",
    "fmt_ms",
    "fmt_num",
    "fmt_rate",
    "fmt_seconds_header",
    "fmt_weight",
    "number",
]

NONE = "–"
"""Shown for a figure nothing measured (every request failed, no stream): never a made-up 0."""


def number(v: Any) -> float | None:
    """`v` as a finite float, or None (missing, not a number, NaN, infinite)."""
    if isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fmt_money(v: Any) -> str:
    """A cost with the digits that matter and never an exponent: cents from 1 up, 4 decimals
    down to a cent, 3 significant digits below it (``12.35``, ``0.0432``, ``0.000123``). Costs
    carry no currency sign: they are in the currency of the workload's prices."""
    x = number(v)
    if x is None:
        return NONE
    if x == 0:
        return "0"
    if abs(x) >= 1:
        return f"{x:,.2f}"
    if abs(x) >= 0.01:
        return f"{x:.4f}"
    return f"{x:.{2 - math.floor(math.log10(abs(x)))}f}"


def fmt_decimal(v: Any) -> str:
    """A number as the user wrote it, in decimals and never an exponent (a price of 0.0000177
    per request, not ``1.77e-05``), to 12 significant digits: ``0.1``, ``2``, ``0.0000177367``."""
    x = number(v)
    if x is None:
        return NONE
    if x == 0 or not 1e-12 <= abs(x) < 1e15:
        return f"{x:g}" if x else "0"
    digits = max(0, 11 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f}".rstrip("0").rstrip(".")


def fmt_duration(s: float, decimals: int = 0) -> str:
    """A span of time: ``42s`` (``42.3s`` with ``decimals=1``), ``1m05s``, ``2h03m``."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.{decimals}f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def fmt_ms(ms: Any, unit: bool = True) -> str:
    """Milliseconds: ``4.2ms``, ``123ms``, ``12.3s`` from 10 s up. Without ``unit`` (a column
    whose head says ms) the bare figure: ``4.2``, ``123``, ``12345``."""
    x = number(ms)
    if x is None:
        return NONE
    if not unit:
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}"
    if x >= 10_000:
        return f"{x / 1000:.1f}s"
    if x >= 100:
        return f"{x:.0f}ms"
    return f"{x:.1f}ms"


_RATE_DIGITS = ((1000.0, ",.0f"), (100.0, ".0f"), (10.0, ".1f"))


def fmt_rate(r: float, unit: str = "/s") -> str:
    """Requests (or tokens) per second with sensible digits (``1,234/s``, ``123/s``, ``12.3/s``,
    ``1.23/s``); 0 shows as 0."""
    spec = next((spec for floor, spec in _RATE_DIGITS if r >= floor), ".2f")
    return f"{r:{spec}}{unit}"


_COUNT_STEPS = ((10_000_000, 1e6, ".1f", "M"), (1_000_000, 1e6, ".2f", "M"), (100_000, 1e3, ".0f", "k"))


def fmt_count(n: float) -> str:
    """A count where space is short: 1234 -> "1,234"; 123456 -> "123k"; 1234567 -> "1.23M"."""
    n = int(n)
    for floor, scale, spec, suffix in _COUNT_STEPS:
        if abs(n) >= floor:
            return f"{n / scale:{spec}}{suffix}"
    return f"{n:,}"


def fmt_num(v: Any, decimals: int = 1) -> str:
    """A figure in a column whose head says its unit: ``12.3``, ``1,234.5``, ``123,457``."""
    x = number(v)
    if x is None:
        return NONE
    if abs(x) >= 100_000:
        return f"{x:,.0f}"
    return f"{x:,.{decimals}f}"


def fmt_weight(w: float) -> str:
    return f"{w:g}" if w < 1000 else f"{w:.0f}"


def fmt_seconds_header(seconds: float) -> str:
    """Seconds in an HTTP header (Retry-After): whole seconds when whole, else to the millisecond."""
    if seconds == int(seconds):
        return str(int(seconds))
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def cut(s: str, width: int) -> str:
    """`s` in at most `width` columns, an ellipsis where it was cut."""
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"


def change_text(c: Mapping[str, Any], arrow: str = " → ", unlimited: str = "unlimited") -> str:
    """One logged change in words: ``concurrency 32 → 28``, ``rate unlimited → 27.5/s``,
    ``qwen weight 1 → 2``, ``qwen off``, ``paused``, ``resumed``. The console passes a tighter
    ``arrow`` and ``unlimited`` ("→", "∞")."""
    what = str(c.get("what", "?"))
    frm, to = c.get("from"), c.get("to")
    if what == "rate":

        def r(x: Any) -> str:
            return unlimited if not x else fmt_rate(float(x))

        return f"rate {r(frm)}{arrow}{r(to)}"
    if what == "tpm":

        def t(x: Any) -> str:
            return "off" if not x else f"{float(x):,.0f}"

        return f"tpm {t(frm)}{arrow}{t(to)}"
    if what == "weight":
        w0, w1 = fmt_weight(float(frm or 0)), fmt_weight(float(to or 0))
        return f"{c.get('model', '?')} weight {w0}{arrow}{w1}"
    if what == "enabled":
        return f"{c.get('model', '?')} {'on' if to else 'off'}"
    if what == "paused":
        return "paused" if to else "resumed"
    if what == "auto":
        return "auto concurrency on" if to else "auto concurrency off"
    if what == "cascade" and isinstance(frm, list) and isinstance(to, list):

        def steps(x: list[Any]) -> str:
            return "+".join(str(m) for m in x) or "none"

        return f"cascade {steps(frm)}{arrow}{steps(to)}"
    if what == "stage" and isinstance(to, int):  # [[stages]] boundary: shown 1-based, as the console
        return f"stage {to + 1}"
    model = f" {c['model']}" if c.get("model") is not None else ""
    return f"{what}{model} {frm}{arrow}{to}"
