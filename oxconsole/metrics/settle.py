"""Whether a phase's figures hold still: `settling` until their intervals are within the tolerance.

Why this module exists: a person turning a knob, a sweep point and a reader of the summary all
need the same answer to "can I read the figures now?". A phase is **settled** once the 95%
interval (`ci.py`) of its TTFT p50 and of its requests/s lies within ``tolerance`` (the workload's
`run.settle_tolerance`, default ±5%) of the figure's value, and it has `MIN_SAMPLES` ok requests.
A run without TTFT (not streamed, embeddings) is judged on its latency p50 instead (`judged`).

* `settled_at_s` is the first time that held (seconds after the phase began) and is never
  cleared: the summary says when the figures first became readable.
* The live state has hysteresis: settled is lost again only when the worst spread exceeds
  `LEAVE` times the tolerance (±7.5% at the default), so a figure hovering at ±5% does not make
  the console flicker, while a real change inside a phase (the server slowed, a burst of errors
  widened the rate's batches) still shows as `settling` again.
* An interval over the phase so far narrows whether or not the figure is still moving (a queue
  still filling after a change): given the figure over the last seconds (``recent``), a figure
  whose recent interval lies wholly outside ±tolerance of the phase's value has *moved*, and the
  phase is settling while it has.

Pure: the caller passes the phase time and the intervals; no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from oxconsole.base.figures import SETTLING, at
from oxconsole.metrics.ci import (
    BATCH_LATENCIES,
    BatchMeans,
    Interval,
    QuantileSource,
    quantile_interval,
    rate_interval,
)

__all__ = [
    "FIGURES",
    "LEAVE",
    "MIN_SAMPLES",
    "SETTLE_TOLERANCE",
    "Settle",
    "SettleView",
    "ci_block",
    "judged",
    "moved",
    "phase_intervals",
    "settle_from_summary",
]

SETTLE_TOLERANCE = 0.05
"""`run.settle_tolerance`'s default: each judged interval within ±5% of its value."""
LEAVE = 1.5
"""Settled is lost when the worst spread passes this many tolerances (hysteresis)."""
MIN_SAMPLES = 30
"""Ok requests a phase needs before it may settle. The intervals are valid from 6 samples (p50)
and 10 seconds (rate), but identical values (a simulator without jitter) give a zero-width
interval at once; 30 is the fewest a person would read a median from."""

TTFT, LATENCY, RATE = FIGURES = tuple(f.key for f in SETTLING)
"""The figures a phase's `ci` holds (the summary's keys), in the order the console names them."""

State = Literal["settling", "settled"]


def phase_intervals(
    ttft: QuantileSource | None,
    latency: QuantileSource,
    rate: float,
    batches: BatchMeans,
) -> dict[str, Interval | None]:
    """The phase's figures with their intervals, by summary key; None where there is none yet.

    ``ttft`` None (or empty: a run that does not stream) leaves TTFT out. ``rate`` is the phase's
    requests/s (ok requests over its elapsed time), ``batches`` its per-second ok counts; its
    batches are kept `BATCH_LATENCIES` mean latencies long (latencies in ms).
    """
    out: dict[str, Interval | None] = {}
    if ttft is not None and ttft.count > 0:
        out[TTFT] = quantile_interval(ttft, 50.0)
    out[LATENCY] = quantile_interval(latency, 50.0)
    out[RATE] = rate_interval(rate, batches, min_batch_s=BATCH_LATENCIES * latency.mean / 1000.0)
    return out


def judged(intervals: Mapping[str, Interval | None]) -> dict[str, Interval | None]:
    """The figures settled judges: TTFT p50 and requests/s; latency p50 stands in for TTFT when
    the phase has none (requests not streamed, embeddings)."""
    first = TTFT if TTFT in intervals else LATENCY
    return {first: intervals.get(first), RATE: intervals.get(RATE)}


def ci_block(intervals: Mapping[str, Interval | None]) -> dict[str, list[float] | None]:
    """The summary's `ci`: every figure of `FIGURES`, ``[low, high]`` or null."""
    out: dict[str, list[float] | None] = {}
    for key in FIGURES:
        iv = intervals.get(key)
        out[key] = None if iv is None else iv.as_list()
    return out


@dataclass(frozen=True, slots=True)
class SettleView:
    """A phase's settledness now, for the snapshot and the console."""

    state: State
    spread: float | None
    """The worst judged figure's spread (0.03 = ±3%); None while some figure has no interval."""
    worst: str | None
    """The figure holding the phase back (or closest to the tolerance once settled)."""
    settled_at_s: float | None

    def label(self) -> str:
        """``settled ±3%``, ``settling ±12%`` or ``settling`` (no interval yet)."""
        if self.spread is None or math.isinf(self.spread):
            return self.state
        return f"{self.state} ±{max(1, math.ceil(self.spread * 100 - 1e-9))}%"

    def to_dict(self) -> dict[str, Any]:
        spread = None if self.spread is None or math.isinf(self.spread) else round(self.spread, 5)
        return {"state": self.state, "spread": spread, "worst": self.worst, "settled_at_s": self.settled_at_s}

    @classmethod
    def from_dict(cls, d: Any) -> SettleView | None:
        """From `to_dict`'s JSON (a snapshot over the control socket); None for anything else."""
        if not isinstance(d, Mapping) or d.get("state") not in ("settling", "settled"):
            return None
        spread, at = d.get("spread"), d.get("settled_at_s")
        return cls(
            d["state"],
            float(spread) if isinstance(spread, int | float) else None,
            str(d["worst"]) if isinstance(d.get("worst"), str) else None,
            float(at) if isinstance(at, int | float) else None,
        )


class Settle:
    """The settledness of one phase, updated as its figures move.

    `update(t, intervals, samples)`: ``t`` seconds since the phase began, the judged figures'
    intervals (`judged`), ``samples`` its ok requests. Any figure without an interval keeps the
    phase settling (and, once settled, is judged by the others: an interval never disappears as a
    phase grows).
    """

    __slots__ = ("leave", "min_samples", "settled_at_s", "state", "tolerance")

    def __init__(
        self, tolerance: float = SETTLE_TOLERANCE, *, leave: float = LEAVE, min_samples: int = MIN_SAMPLES
    ) -> None:
        if not tolerance > 0.0:
            raise ValueError(f"tolerance must be > 0, got {tolerance!r}")
        self.tolerance = tolerance
        self.leave = leave
        self.min_samples = min_samples
        self.state: State = "settling"
        self.settled_at_s: float | None = None

    def update(
        self,
        t: float,
        intervals: Mapping[str, Interval | None],
        samples: int,
        recent: Mapping[str, Interval | None] | None = None,
    ) -> SettleView:
        """``recent``: the same figures over the last seconds only (the last 10 s), where there are
        some. A figure whose recent interval lies wholly outside ±tolerance of the phase's value
        has moved: the phase does not settle, and a settled one goes back to settling (`moved`)."""
        spread, worst = _worst(intervals)
        drift = _moved(intervals, recent, self.tolerance) if recent else None
        if drift is not None:
            worst = drift
        if self.state == "settling":
            if (
                spread is not None
                and spread <= self.tolerance
                and samples >= self.min_samples
                and drift is None
            ):
                self.state = "settled"
                if self.settled_at_s is None:
                    self.settled_at_s = round(t, 3)
        elif drift is not None or (spread is not None and spread > self.tolerance * self.leave):
            self.state = "settling"
        return SettleView(self.state, spread, worst, self.settled_at_s)


def moved(phase: Interval | None, recent: Interval | None, tolerance: float) -> bool:
    """The recent figure is confidently off the phase's by more than ``tolerance``: its whole
    interval is outside ``value · (1 ± tolerance)``. While it is thin (a wide interval) it never
    is: drift is only seen where there are samples to see it."""
    if phase is None or recent is None:
        return False
    v = phase.value
    return recent.low > v * (1.0 + tolerance) or recent.high < v * (1.0 - tolerance)


def _moved(
    intervals: Mapping[str, Interval | None], recent: Mapping[str, Interval | None], tolerance: float
) -> str | None:
    for k, iv in recent.items():
        if moved(intervals.get(k), iv, tolerance):
            return k
    return None


def _worst(intervals: Mapping[str, Interval | None]) -> tuple[float | None, str | None]:
    """The largest spread among the figures and its key; (None, key) when one has no interval."""
    worst_s, worst_k = -1.0, None
    for k, iv in intervals.items():
        if iv is None:
            return None, k
        s = iv.spread
        if s > worst_s:
            worst_s, worst_k = s, k
    return (worst_s, worst_k) if worst_k is not None else (None, None)


def _spread(value: Any, ci: Any) -> float | None:
    """A summary's figure and its ``[low, high]`` as a spread (`Interval.spread`); None without."""
    if not isinstance(value, int | float) or not isinstance(ci, list) or len(ci) != 2:
        return None
    low, high = ci
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return None
    return Interval(float(value), float(low), float(high)).spread


def _ended(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A summary's phase (or the run) as `Span.live` gives it, from its `settled_at_s` and `ci`."""
    ci = block.get("ci")
    if not isinstance(ci, Mapping):
        return None
    settled_at = block.get("settled_at_s")
    first = TTFT if ci.get(TTFT) is not None else LATENCY
    figures = [(first, at(block, first)), (RATE, at(block, RATE))]
    spreads = [(_spread(v, ci.get(k)), k) for k, v in figures]
    known = [(s, k) for s, k in spreads if s is not None]
    spread, worst = (
        max(known) if len(known) == len(spreads) else (None, next((k for s, k in spreads if s is None), None))
    )
    view = SettleView(
        "settled" if isinstance(settled_at, int | float) else "settling",
        spread,
        worst,
        float(settled_at) if isinstance(settled_at, int | float) else None,
    )
    return {**view.to_dict(), "ci": dict(ci)}


def settle_from_summary(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The snapshot's `settle` of a run already over (its last phase and the run, as the summary
    kept them; a phase that settled once reads settled); None for a summary without `ci`."""
    phases = summary.get("phases") or []
    last = phases[-1] if phases and isinstance(phases[-1], Mapping) else {}
    run = _ended(summary)
    if run is None:
        return None
    return {"phase": _ended(last) or run, "run": run}
