"""Trials: the same workload run N times; how much its figures vary between runs, and whether two
runs differ beyond that.

Why this module exists: the intervals of `ci.py` say how well one run measured its own figures;
they cannot see what changes from one run to the next (a server's warm caches, a neighbour on the
host, the routing of a new connection pool). `[run] trials = N` repeats the run, and each figure
of the summary's `trials` block is the mean of the N trials' values with its standard deviation,
coefficient of variation and 95% Student-t interval (`t_critical`: exact, no scipy). `overlap`
says in words whether two runs' intervals overlap, as `report A B` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from oxconsole.base.figures import LATENCY, STATISTICS, TTFT
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.aggregate import RunStats, timing
from oxconsole.metrics.ci import CONFIDENCE, t_critical

__all__ = [
    "TRIAL_FIGURES",
    "TrialStats",
    "TrialTally",
    "Verdict",
    "overlap",
    "trial_stats",
    "trials_block",
]

TRIAL_FIGURES = tuple(f.key for f in STATISTICS)
"""The summary keys the `trials` block holds (the contract's list)."""


@dataclass(frozen=True, slots=True)
class TrialStats:
    """One figure over N trials. With one trial only ``mean`` is known."""

    n: int
    mean: float
    stddev: float | None
    """Sample standard deviation (N - 1 in the denominator)."""
    cv: float | None
    """``stddev / mean``; None when the mean is 0."""
    ci: tuple[float, float] | None
    """``mean ± t(N-1) · stddev / sqrt(N)``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": round(self.mean, 3),
            "stddev": None if self.stddev is None else round(self.stddev, 3),
            "cv": None if self.cv is None else round(self.cv, 4),
            "ci": None if self.ci is None else [round(self.ci[0], 3), round(self.ci[1], 3)],
        }


def trial_stats(values: Sequence[float], confidence: float = CONFIDENCE) -> TrialStats | None:
    """Mean, stddev, cv and the t-interval of ``values`` (one per trial); None when empty."""
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n == 1:
        return TrialStats(1, mean, None, None, None)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_critical(n - 1, confidence) * sd / math.sqrt(n)
    return TrialStats(n, mean, sd, sd / mean if mean else None, (mean - half, mean + half))


def _dotted(summary: Mapping[str, Any], key: str) -> float | None:
    node: Any = summary
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


def trials_block(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary's `trials` block from each trial's own summary: ``{"n": N, key: {"mean",
    "stddev", "cv", "ci"}}`` for each of `TRIAL_FIGURES` that some trial has."""
    out: dict[str, Any] = {"n": len(summaries)}
    for key in TRIAL_FIGURES:
        vals = [v for s in summaries if (v := _dotted(s, key)) is not None]
        st = trial_stats(vals)
        if st is not None:
            out[key] = st.to_dict()
    return out


class TrialTally:
    """Each trial's figures from a journal's records (those that carry `trial`): its requests/s
    over the running time of the sessions it was sent in (``slot_of``: a record's due time ->
    its session, `SessionSpans.slot`), its TTFT and latency percentiles."""

    def __init__(self, slot_of: Callable[[float], int]) -> None:
        self._slot_of = slot_of
        self.stats: dict[int, RunStats] = {}
        self.slots: dict[int, set[int]] = {}

    def add(self, rec: RequestRecord) -> None:
        k = rec.trial
        if k is None or rec.warmup:
            return
        st = self.stats.get(k)
        if st is None:
            st = self.stats[k] = RunStats()
            self.slots[k] = set()
        st.record(rec)
        self.slots[k].add(self._slot_of(rec.t_scheduled))

    def block(self, lengths: Sequence[float], ended: Collection[int] | None = None) -> dict[str, Any] | None:
        """The summary's `trials` over the trials that ended (``ended``; None: every trial
        present), each over its sessions' running time (``lengths``, by session); None when no
        record carries a trial."""
        summaries = []
        for k in sorted(self.stats):
            if ended is not None and k not in ended:
                continue
            st = self.stats[k]
            seconds = math.fsum(lengths[i] for i in self.slots[k] if i < len(lengths))
            summaries.append(
                {
                    "throughput": st.throughput_block(seconds),
                    TTFT.key: timing(st.ttft),
                    LATENCY.key: timing(st.latency),
                }
            )
        return trials_block(summaries) if summaries else None


Verdict = Literal["overlap", "higher", "lower", "unknown"]


def overlap(
    a: tuple[float, float] | None,
    b: tuple[float, float] | None,
    *,
    figure: str = "the figure",
    names: tuple[str, str] = ("A", "B"),
) -> tuple[Verdict, str]:
    """Whether ``b``'s interval is apart from ``a``'s, and a sentence saying so.

    Apart intervals are a difference beyond the noise; overlapping ones are *no difference shown*,
    not *the same*: two 95% intervals can overlap a little while a test of the difference would
    still find one (the check is deliberately conservative, as benchstat's is).
    """
    na, nb = names
    if a is None or b is None:
        missing = na if a is None else nb
        return "unknown", f"{figure}: no interval for {missing} (fewer than 2 trials), so no verdict"
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    shown = f"{na} [{_num(a_lo)}, {_num(a_hi)}], {nb} [{_num(b_lo)}, {_num(b_hi)}]"
    mid_a = (a_lo + a_hi) / 2.0
    delta = "" if mid_a == 0 else f" by about {abs(100.0 * ((b_lo + b_hi) / 2.0 - mid_a) / mid_a):.1f}%"
    if b_lo > a_hi:
        return (
            "higher",
            f"{figure}: {nb} is higher than {na}{delta}, beyond the noise (intervals apart: {shown})",
        )
    if b_hi < a_lo:
        return (
            "lower",
            f"{figure}: {nb} is lower than {na}{delta}, beyond the noise (intervals apart: {shown})",
        )
    return "overlap", f"{figure}: the intervals overlap ({shown}): no difference shown at 95%"


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10_000 else f"{v:,.2f}" if abs(v) < 100 else f"{v:,.1f}"
