"""A run's figures over time, from its journal: what the HTML report's charts draw.

Why this module exists: the summary is one number per figure; a report needs the same figures
slot by slot (requests/s, tokens/s, errors, latency percentiles) and the whole run's
distributions. The journal is streamed twice (its time span, then the slots), holding a bounded
number of slots (at most `MAX_SLOTS`) and one coarse histogram per slot and metric, so memory
does not grow with the run. Every record line counts as written (a resumed id counts each time).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from oxconsole.base.figures import DRAWN, TIMED, Figure
from oxconsole.metrics import LogHistogram
from oxconsole.reports.summary import read_journal

__all__ = ["MAX_SLOTS", "TIMED", "Slot", "Timeline", "build_timeline", "slot_width"]

MAX_SLOTS = 120
"""Points per chart: enough to see a change of load, few enough for a small file."""

_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_SLOT_ALPHA = 0.01
"""Per-slot histograms keep ~2 significant digits (1%): plenty for a chart, 10x fewer buckets."""


@dataclass(slots=True)
class Slot:
    """The requests that ended in one slot of time."""

    ok: int = 0
    output_tokens: int = 0
    busy: float = 0.0
    """Request-seconds in flight within the slot (sent to answered, every request)."""
    errors: dict[str, int] = field(default_factory=dict)
    hists: dict[str, LogHistogram] = field(
        default_factory=lambda: {f.key: LogHistogram(_SLOT_ALPHA) for f in TIMED}
    )


@dataclass(slots=True)
class Timeline:
    """Slots of `step` seconds from the run's start (`t0`, unix seconds), and the whole run's
    distributions of ok requests' timings."""

    t0: float
    step: float
    span: float
    slots: list[Slot]
    whole: dict[str, LogHistogram]
    """Each of `DRAWN` by its key: `TIMED` always, the others when some ok record has them."""

    def times(self) -> list[float]:
        """The middle of each slot, in seconds since the start."""
        return [(i + 0.5) * self.step for i in range(len(self.slots))]

    def width(self, i: int) -> float:
        """Seconds slot ``i`` covers (the last one may be cut short by the end of the run)."""
        return max(1e-9, min(self.step, self.span - i * self.step)) if self.span > 0 else self.step

    def cut_short(self, i: int) -> bool:
        """Slot ``i`` is the run's last, shorter than a slot, and not its only one. The run's end
        is the end of its last request, so that slot always holds at least one request: over a
        fraction of a second, it would read as a spike (one request in 0.18 s: 5.6 req/s in a run
        that never passed 1), so the rate charts leave it out (`per_second`)."""
        return 0 < i == len(self.slots) - 1 and self.width(i) < self.step

    def per_second(self, i: int, n: float) -> float | None:
        """``n`` things that happened in slot ``i``, per second; None for a cut-short last slot."""
        return None if self.cut_short(i) else n / self.width(i)

    def rate(self, what: str) -> list[float | None]:
        """Per second in each slot: ``ok`` requests, ``output_tokens`` or ``errors``; None for a
        cut-short last slot (`cut_short`)."""
        out = []
        for i, s in enumerate(self.slots):
            n = (
                s.ok
                if what == "ok"
                else s.output_tokens
                if what == "output_tokens"
                else sum(s.errors.values())
            )
            out.append(self.per_second(i, n))
        return out

    def in_flight(self) -> list[float]:
        """The client's requests in flight in each slot, on average over the slot."""
        return [s.busy / self.width(i) for i, s in enumerate(self.slots)]

    def percentile(self, metric: Figure, q: float) -> list[float | None]:
        """Percentile ``q`` of ``metric`` (one of `TIMED`) in each slot; None where no ok request ended."""
        key = metric.key
        return [s.hists[key].percentile(q) if s.hists[key].count else None for s in self.slots]

    def error_classes(self) -> list[str]:
        seen: dict[str, int] = {}
        for s in self.slots:
            for k, v in s.errors.items():
                seen[k] = seen.get(k, 0) + v
        return sorted(seen, key=lambda k: -seen[k])


def slot_width(span: float, max_slots: int = MAX_SLOTS) -> float:
    """The smallest round step (1, 2, 5, 10, 15, 30 s, 1 min...) that fits ``span`` in
    ``max_slots`` slots."""
    for step in _STEPS:
        if span / step <= max_slots:
            return float(step)
    return float(_STEPS[-1])


def _spread(slots: list[Slot], step: float, start: float, end: float) -> None:
    """A request in flight from `start` to `end` (seconds from the first slot's start), as its
    share of each slot it overlaps."""
    if end <= start:
        return
    first = max(0, int(start // step))
    last = min(len(slots) - 1, int(end // step))
    for i in range(first, last + 1):
        lo, hi = max(start, i * step), min(end, (i + 1) * step)
        if hi > lo:
            slots[i].busy += hi - lo


def build_timeline(path: str | os.PathLike[str], max_slots: int = MAX_SLOTS) -> Timeline:
    """Read the journal twice: its span (earliest ``t_scheduled`` to latest end), then each
    record into the slot where it ended. Raises OSError when the journal cannot be read."""
    t0 = float("inf")
    t_end = float("-inf")
    for rec in read_journal(path):
        t0 = min(t0, rec.t_scheduled)
        t_end = max(t_end, rec.t_sent + (rec.latency_ms or 0.0) / 1000.0)
    if t0 == float("inf"):
        return Timeline(0.0, 1.0, 0.0, [], {f.key: LogHistogram() for f in TIMED})
    span = max(0.0, t_end - t0)
    step = slot_width(span, max_slots)
    slots = [Slot() for _ in range(max(1, math.ceil(span / step)))]
    whole = {f.key: LogHistogram() for f in TIMED}
    timed = [(f.key, f.journal) for f in TIMED]
    drawn = [(f.key, f.journal) for f in DRAWN if f not in TIMED]
    for rec in read_journal(path):
        end = rec.t_sent + (rec.latency_ms or 0.0) / 1000.0 - t0
        _spread(slots, step, rec.t_sent - t0, end)
        s = slots[min(len(slots) - 1, max(0, int(end // step)))]
        if rec.status != "ok":
            cls = rec.error or "error"
            s.errors[cls] = s.errors.get(cls, 0) + 1
            continue
        s.ok += 1
        s.output_tokens += rec.output_tokens
        for key, attr in timed:
            v = getattr(rec, attr)
            if v is not None:
                s.hists[key].record(v)
                whole[key].record(v)
        for key, attr in drawn:  # their distributions only, when some record has them
            v = getattr(rec, attr)
            if v is not None:
                (whole.get(key) or whole.setdefault(key, LogHistogram())).record(v)
    return Timeline(t0, step, span, slots, whole)
