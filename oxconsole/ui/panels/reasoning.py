"""The console's reasoning line: time to the first answer token, how much of the output was
reasoning, and how much of the input the server's prefix cache served.

Why this module exists: for a reasoning model TTFT is the first reasoning token, and what a user
waits for is the first answer token; a prompt cache changes both the speed and the bill. One
compact line under the latency panel's percentiles says all three, in as many words as the width
allows, and only for runs whose records carry them.
"""

from __future__ import annotations

from oxconsole.base.figures import TTFOT
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Labelled, Line, Palette, labelled_line
from oxconsole.ui.numbers import ms, pct

__all__ = ["reasoning_line"]


def reasoning_line(s: Snapshot, p: Palette, width: int) -> Line | None:
    """`TTFOT p50 91ms p99 120ms · reasoning 67% · cached 72%` (shorter words when narrow);
    None when the run has no reasoning, cached tokens or tool calls."""
    r = s.reasoning
    if r is None:
        return None
    parts: list[Labelled] = []
    if r.ttfot_p50 is not None:
        value = f"{ms(r.ttfot_p50)}/{ms(r.ttfot_p99 or 0.0)}"
        parts.append((f"{TTFOT.label} p50/p99 ", f"{TTFOT.short} ", value))
    if r.reasoning_share is not None:
        parts.append(("reasoning ", "think ", pct(r.reasoning_share)))
    if r.cache_hit_rate is not None:
        parts.append(("cached ", "cache ", pct(r.cache_hit_rate)))
    if r.tool_calls:
        parts.append(("tool calls ", "tools ", str(r.tool_calls)))
    return labelled_line(parts, p, width)
