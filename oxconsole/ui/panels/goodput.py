"""Goodput beside throughput: good requests per second now and the run's share of good ones.

Why this module exists: the header's rates and the throughput panel both show goodput, in the
same words and colours (the share in the error colour once it is below the `[slo]` target, in
the success colour while it meets it), so the part is built once, here, from the snapshot alone.
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Line, Palette
from oxconsole.ui.numbers import fmt_rate

__all__ = ["goodput_part"]


def goodput_part(s: Snapshot, p: Palette, lead: str = "good ") -> Line | None:
    """`good 9.1/s 93%`: good requests per second over the window, then the whole run's share of
    good requests against the target (`–` before any request finished); None without `[slo]`."""
    g = s.goodput
    if g is None:
        return None
    frac, met = g.fraction, g.met
    style = p.muted if met is None else p.success if met else p.error
    t = Line().append(lead, style=p.muted)
    t.append(fmt_rate(g.req_per_s_10s), style=p.primary)
    t.append(" ")
    t.append("–" if frac is None else _share(frac), style=f"bold {style}")
    return t


def _share(frac: float) -> str:
    """A share as a percentage with one decimal (94.9% must not read as a 95% target met), 100%
    and 0% without."""
    return f"{100 * frac:.0f}%" if frac in (0.0, 1.0) else f"{100 * frac:.1f}%"
