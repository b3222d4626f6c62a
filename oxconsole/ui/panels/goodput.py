"""Goodput in the console: good requests per second beside the rates, the share of good requests
beside the counts.

Why this module exists: the header and the throughput panel both show goodput, in the same words
and colours (the share in the error colour while it is below the `[slo]` target, in the success
colour while it meets it), so the parts are built once, here, from the snapshot alone.
"""

from __future__ import annotations

from oxconsole.base.units import fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Cell, Line, Palette

__all__ = ["goodput_part", "goodput_rate", "goodput_rows", "goodput_share"]


def goodput_share(s: Snapshot, p: Palette, lead: str = "good ") -> Line | None:
    """`good 93.5%`: the whole run's share of good requests (what the exit code judges), coloured
    by the target (`–` before any request finished); None without `[slo]`."""
    g = s.goodput
    if g is None:
        return None
    frac, met = g.fraction, g.met
    style = p.muted if met is None else p.success if met else p.error
    t = Line().append(lead, style=p.muted)
    t.append("–" if frac is None else _share(frac), style=f"bold {style}")
    if met is False and g.target is not None:
        t.append(f" < {100 * g.target:g}%", style=p.error)
    return t


def goodput_rate(s: Snapshot, p: Palette, lead: str = "good ") -> Line | None:
    """`good 9.10/s`: good requests per second over the rolling window; None without `[slo]`."""
    g = s.goodput
    if g is None:
        return None
    return Line().append(lead, style=p.muted).append(fmt_rate(g.req_per_s_10s), style=p.primary)


def goodput_part(s: Snapshot, p: Palette, lead: str = "good ") -> Line | None:
    """`good 9.10/s 93.5%`: the rate now, then the run's share; None without `[slo]`."""
    rate = goodput_rate(s, p, lead)
    share = goodput_share(s, p, " ")
    if rate is None or share is None:
        return None
    return rate.append_text(share)


def goodput_rows(s: Snapshot, p: Palette) -> list[list[Cell]]:
    """The phase table's row: the share of good requests in this phase and in the whole run, each
    coloured by the target; none without `[slo]`."""
    g = s.goodput
    if g is None:
        return []

    def cell(good: int, judged: int) -> Line:
        if not judged:
            return Line("–", style=p.muted)
        frac = good / judged
        ok = g.target is None or frac >= g.target
        return Line(_share(round(frac, 4)), style=p.success if ok else p.error)

    target = "" if g.target is None else f"≥{100 * g.target:g}%"
    return [[Line("good", style=p.muted), cell(g.phase_good, g.phase_judged), cell(g.good, g.judged), target]]


def _share(frac: float) -> str:
    """A share as a percentage with one decimal (94.9% must not read as a 95% target met), 100%
    and 0% without."""
    return f"{100 * frac:.0f}%" if frac in (0.0, 1.0) else f"{100 * frac:.1f}%"
