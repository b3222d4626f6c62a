"""Where a sweep's knee is, and which value an automatic search measures next, from run summaries.

Why this module exists: the knee rule (the contract's "highest goodput with the SLO met; without
`[slo]`, the highest throughput before p99 latency doubles from the first point's") and the search
for it (doubling, then bisection) are arithmetic on summary dicts alone, so they are the same for a
sweep in progress, a sweep resumed from its manifest and a test that hands them made-up summaries.
A summary with a `goodput` object is judged by it; one without, by throughput and p99 latency.
It lives with the metrics (not in `oxconsole.sweep`) so that the HTML report, a layer below the
sweep, marks the very knee the sweep's table does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oxconsole.base.figures import GOODPUT, LATENCY, OK, REQUESTS_PER_S

__all__ = [
    "LATENCY_BREAK",
    "LOAD_KEYS",
    "TIE",
    "has_slo",
    "knee_index",
    "next_auto_value",
    "offered",
    "score",
    "slo_met",
]

Summary = Mapping[str, Any]

TIE = 0.03
"""Scores within 3% of each other are a tie, won by the lower load (noise must not move the knee)."""
GAIN = 0.5
"""Without `[slo]`, past the knee more load buys little: a higher load is a better knee only when
its throughput rises by at least half its load's rise (twice the concurrency, half again the
throughput). A server that queues beyond its capacity still gains a little throughput there (the
client's gap between one request's end and the next's start is hidden), which "the highest
throughput before p99 doubles" alone would take. With `[slo]` the SLO decides: a point past the
knee is one that misses it, and a CPU engine that gains 28-48% a doubling while meeting it (a
llama.cpp server on 4 slots) has its knee at the highest such point."""
LATENCY_BREAK = 2.0
"""Without `[slo]`, a point whose p99 latency is more than this many times the first point's is
past the knee."""
LOAD_KEYS = frozenset({"concurrency", "rate", "run.concurrency", "run.rate"})
"""`--over` keys whose values are the offered load (`knee_index(load=True)`)."""
RISE = 0.1
"""The search doubles the load while the score rises by at least this share; below it the score
"stops rising"."""


def offered(load: Mapping[str, Any]) -> str:
    """The load a point offered (`{"rate", "concurrency"}`, as a sweep's manifest keeps it): its
    rate when it had one, else its concurrency."""
    rate, conc = load.get("rate"), load.get("concurrency")
    if rate:
        return f"{float(rate):g}/s"
    return f"c={conc}" if conc is not None else "-"


def has_slo(summaries: Sequence[Summary]) -> bool:
    return any(isinstance(s.get("goodput"), Mapping) for s in summaries)


def slo_met(summary: Summary) -> bool | None:
    """The point met `[slo]` (its `goodput.met`); None when the run had no `[slo]`."""
    g = summary.get("goodput")
    return bool(g.get("met")) if isinstance(g, Mapping) else None


def score(summary: Summary) -> float:
    """What the knee maximises: goodput (good requests per second) with `[slo]`, else throughput."""
    rate = GOODPUT if isinstance(summary.get("goodput"), Mapping) else REQUESTS_PER_S
    return rate.value(summary) or 0.0


def _p99(summary: Summary) -> float:
    return LATENCY.at("p99").value(summary) or 0.0


def _ok(summary: Summary) -> int:
    return int(OK.value(summary) or 0)


def _eligible(order: Sequence[int], summaries: Sequence[Summary]) -> list[int]:
    """The points that may be the knee, in load order: with `[slo]` those that met it; without,
    those before the first whose p99 latency is past `LATENCY_BREAK` times the first point's."""
    measured = [i for i in order if _ok(summaries[i]) > 0]
    if has_slo(summaries):
        return [i for i in measured if slo_met(summaries[i])]
    if not measured:
        return []
    base = _p99(summaries[measured[0]])
    out: list[int] = []
    for i in measured:
        if base > 0 and _p99(summaries[i]) > LATENCY_BREAK * base:
            break
        out.append(i)
    return out


def load_order(values: Sequence[Any]) -> list[int]:
    """Point indexes from the lowest load to the highest: by value when every value is a number,
    else in the order given."""
    if values and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return sorted(range(len(values)), key=lambda i: (values[i], i))
    return list(range(len(values)))


def knee_index(values: Sequence[Any], summaries: Sequence[Summary], *, load: bool = True) -> int | None:
    """The knee's point index, or None when no point qualifies (none met the SLO, none finished a
    request). With `[slo]`, the contract's rule: the highest goodput among the points that met the
    SLO (points within `TIE` of it tie, and the lowest load of them wins). Without, among the
    eligible points (`_eligible`), from the lowest load up, a point replaces the knee so far only
    when its throughput rose by at least `GAIN` of its load's rise (`load`: the values are the
    offered load, concurrency or rate); for other keys, when it beats the knee so far by more than
    `TIE`. One point alone is no knee: there is nothing to compare it with (a sweep stopped after
    its first point has not found one)."""
    eligible = _eligible(load_order(values), summaries)
    if not eligible or len(summaries) < 2:
        return None
    if has_slo(summaries):
        best = max(score(summaries[i]) for i in eligible)
        return next(i for i in eligible if score(summaries[i]) * (1.0 + TIE) >= best)
    knee = eligible[0]
    for i in eligible[1:]:
        have, got = score(summaries[knee]), score(summaries[i])
        if load and float(values[knee]) > 0:
            need = have * (1.0 + GAIN * (float(values[i]) / float(values[knee]) - 1.0))
        else:
            need = have * (1.0 + TIE)
        if got > need or (have == 0 and got > 0):
            knee = i
    return knee


def _doubling(measured: Mapping[int, Summary], start: int, cap: int) -> int | None:
    """The next value of the doubling phase, or None once it is over: a point past the knee (SLO
    broken, p99 doubled, nothing finished), a score that rose less than `RISE`, a point that did
    not become the knee (the knee is behind: doubling on would only probe past it), or the cap."""
    v, chain = start, []
    while v in measured:
        s = measured[v]
        chain.append(v)
        if v >= cap or not _is_eligible(s, measured[start]):
            return None
        if v > start and score(s) < (1.0 + RISE) * score(measured[v // 2]):
            return None
        if v > start and knee_index(chain, [measured[c] for c in chain]) != len(chain) - 1:
            return None
        v = min(v * 2, cap)
    return v


def _is_eligible(s: Summary, first: Summary) -> bool:
    """As `_eligible`, for one point against the search's first."""
    if _ok(s) == 0:
        return False
    met = slo_met(s)
    if met is not None:
        return met
    base = _p99(first)
    return not (base > 0 and _p99(s) > LATENCY_BREAK * base)


def _split(lo: int, hi: int, resolution: float) -> int | None:
    """The middle of (lo, hi) when they are further apart than the resolution, else None."""
    return (lo + hi) // 2 if hi - lo > max(1.0, resolution * lo) else None


def next_auto_value(
    measured: Mapping[int, Summary], start: int = 1, cap: int = 1024, resolution: float = 0.1
) -> int | None:
    """The concurrency to measure next in an automatic search for the knee, or None when it is over.

    Doubling from `start` while the score rises (by `RISE`) and the points are eligible; then
    bisection around the knee so far (`knee_index`): between it and the next value measured above
    it, then the one below, until each neighbour is within `resolution` of it (or adjacent). It is
    deterministic in what was measured, so a resumed search replays to the same next value."""
    nxt = _doubling(measured, start, cap)
    if nxt is not None or start not in measured:
        return nxt if nxt is not None else start
    values = sorted(measured)
    k = knee_index(values, [measured[v] for v in values])
    if k is None:
        return None
    knee = values[k]
    above = [v for v in values if v > knee]
    if above and (mid := _split(knee, above[0], resolution)) is not None:
        return mid
    below = [v for v in values if v < knee]
    return _split(below[-1], knee, resolution) if below else None
