"""A run's (or a phase's) server figures for one endpoint: the summary's `server.X`.

Why this module exists: the summary reports each endpoint's server over the whole run and over
each phase, from its scrape rounds, whether they come live from the scrape task or back from the
`.server.jsonl` series (`oxconsole report`). A `Round` is what one round adds; spans combine
exactly (`scrapes.Sums`): a rate is the run's growth over the run's scraped time, a ratio the
run's numerator over its denominator, percentiles those of the run's summed bucket growth. Gauges
give their median and maximum over the rounds; they are counted by value (rounded to
`GAUGE_DIGITS`), so memory is bounded by the values seen, not by the length of the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from oxconsole.base.figures import SERVER_GAUGES, SERVER_PERCENTILES, SERVER_VALUES
from oxconsole.metrics.server.buckets import Buckets, merge
from oxconsole.metrics.server.scrapes import Reading, Sums, percentiles
from oxconsole.metrics.server.vocabulary import FigureName

__all__ = [
    "GAUGES",
    "GAUGE_DIGITS",
    "PERCENTILES",
    "VALUES",
    "GpuSummary",
    "Round",
    "ServerSummary",
    "phase_delta",
]

GAUGE_DIGITS: Final = 3
"""Gauges are kept to 3 decimals: KV usage to 0.1%, request counts exactly."""

GAUGES: Final = cast(tuple[FigureName, ...], tuple(f.key for f in SERVER_GAUGES))
"""The figures summarised by their median and maximum over the rounds."""
VALUES: Final = cast(tuple[FigureName, ...], tuple(f.key for f in SERVER_VALUES))
"""The figures summarised as one value over the whole span (a ratio, a count or a rate)."""
PERCENTILES: Final = cast(tuple[FigureName, ...], tuple(f.key for f in SERVER_PERCENTILES))
"""The figures summarised as p50 / p90 / p99 of the span's observations."""
_COUNTS = frozenset(f.key for f in SERVER_VALUES if f.kind == "count")
"""The values kept as the span's total, not over its denominator."""


@dataclass(frozen=True, slots=True)
class Round:
    """What one scrape round of an endpoint adds to its summary: the engine, whether any URL
    answered, the figures the engine lacks, the gauges read now, and the span's sums."""

    engine: str
    answered: bool
    missing: tuple[str, ...]
    gauges: Mapping[str, float]
    sums: Sums

    @classmethod
    def of(cls, reading: Reading) -> Round:
        gauges: dict[str, float] = {}
        for f in GAUGES:
            v = getattr(reading.total, f)
            if v is not None:
                gauges[f] = float(v)
        return cls(reading.engine, reading.answered > 0, reading.missing, gauges, reading.sums)


class ServerSummary:
    """Add each round with `add`; `as_dict` is the summary's object for the endpoint. `scrapes`
    counts the rounds, `failed_scrapes` the rounds no URL answered usably (a replica that failed
    while another answered is said in the run's warnings, not counted here); `engine` and
    `missing` are those of the last round that read an answer."""

    def __init__(self, url: str | Sequence[str]) -> None:
        self.url: str | list[str] = url if isinstance(url, str) else list(url)
        self.engine = "unknown"
        self.scrapes = 0
        self.failed_scrapes = 0
        self.missing: tuple[str, ...] = ()
        self._gauges: dict[str, Counter[float]] = {f: Counter() for f in GAUGES}
        self._counters: dict[str, list[float]] = {}
        self._buckets: dict[str, Buckets] = {}

    def add(self, r: Round) -> None:
        self.scrapes += 1
        if not r.answered:
            self.failed_scrapes += 1
            return
        self.engine = r.engine
        self.missing = r.missing
        for f, v in r.gauges.items():
            seen = self._gauges.get(f)
            if seen is not None:
                seen[round(v, GAUGE_DIGITS)] += 1
        for f, (num, den) in r.sums.counters.items():
            acc = self._counters.setdefault(f, [0.0, 0.0])
            acc[0] += num
            acc[1] += den
        for f, grown in r.sums.buckets.items():
            before = self._buckets.get(f)
            self._buckets[f] = grown if before is None else merge([before, grown])

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "engine": self.engine,
            "url": self.url,
            "scrapes": self.scrapes,
            "failed_scrapes": self.failed_scrapes,
        }
        for f in GAUGES:
            seen = self._gauges[f]
            if seen:
                out[f] = {"p50": _median(seen), "max": max(seen)}
        for f in VALUES:
            acc = self._counters.get(f)
            if acc is not None and acc[1] > 0:
                out[f] = acc[0] if f in _COUNTS else acc[0] / acc[1]
        for f in PERCENTILES:
            b = self._buckets.get(f)
            p = None if b is None else percentiles(b)
            if p is not None:
                out[f] = {"p50": p.p50, "p90": p.p90, "p99": p.p99}
        out["missing"] = list(self.missing)
        return out


class GpuSummary:
    """Each GPU's utilisation (percent), memory used (MiB) and power (W) over the run: median and
    maximum of the rounds, counted by value (the summary's `gpus`)."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, Counter[float]]] = {}

    def add(self, gpu: str, figures: Mapping[str, float | None]) -> None:
        seen = self._seen.setdefault(gpu, {})
        for k, v in figures.items():
            if v is not None:
                seen.setdefault(k, Counter())[round(v, 1)] += 1

    def as_dict(self) -> dict[str, dict[str, dict[str, float]]]:
        return {
            gpu: {k: {"p50": _median(c), "max": max(c)} for k, c in figs.items() if c}
            for gpu, figs in self._seen.items()
        }


def phase_delta(before: Mapping[str, Any], now: Mapping[str, Any]) -> dict[str, float]:
    """What a live change did to the engine: each figure of phase `now` less the phase before's
    (gauges and percentiles by their p50), for the figures both phases have."""
    out: dict[str, float] = {}
    for f in (*GAUGES, *VALUES, *PERCENTILES):
        a, b = before.get(f), now.get(f)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            a, b = a.get("p50"), b.get("p50")
        if isinstance(a, int | float) and isinstance(b, int | float):
            out[f] = round(float(b) - float(a), 6)
    return out


def _median(counts: Counter[float]) -> float:
    """The lower median of values counted by value."""
    total = sum(counts.values())
    seen = 0
    for v in sorted(counts):
        seen += counts[v]
        if 2 * seen >= total:
            return v
    raise ValueError("no values")
