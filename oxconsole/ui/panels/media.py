"""The console's media line: the kinds in the run at their rates, and the real-time factor.

Why this module exists: requests per second say little of a vision, speech or transcription
model; what it serves is images and seconds of audio. One line under the models table (the
console's first view, at full width), says the kinds present (images in and out, audio in and out,
documents ranked) and the real-time factor's p50 and p99, in as many words as the width allows,
and only for runs whose records carry them.
"""

from __future__ import annotations

from oxconsole.base.figures import RTF
from oxconsole.base.units import fmt_rate
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.lines import Labelled, Line, Palette, labelled_line

__all__ = ["media_line"]


def _rtf(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}" if v < 10 else f"{v:.0f}"


def media_line(s: Snapshot, p: Palette, width: int) -> Line | None:
    """`img 2.00/s in · 0.50/s out · audio 12.3 s/s in · docs 40.0/s · RTF p50/p99 0.12/0.31`
    (the kinds present only; shorter words, then fewer parts when narrow); None when the run has
    no media."""
    m = s.media
    if m is None:
        return None
    parts: list[Labelled] = [
        (f"{f.label} ", f"{f.short} ", fmt_rate(v, f" {f.unit}/s" if f.unit else "/s"))
        for f, v in m.rates()
        if v
    ]
    if m.rtf_p50 is not None:
        parts.append((f"{RTF.label} p50/p99 ", f"{RTF.short} ", f"{_rtf(m.rtf_p50)}/{_rtf(m.rtf_p99)}"))
    if not parts:
        return None
    return labelled_line(parts, p, width, keep_last=m.rtf_p50 is not None)  # the RTF stays last
