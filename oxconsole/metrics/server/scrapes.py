"""Two successive scrapes of an endpoint's servers read into the contract's figures.

Why this module exists: what the console, the `.server.jsonl` series and the summary need from a
server is one reading per scrape in one vocabulary, whatever the engine and however many replica
URLs stand behind the endpoint. The rules, in one place:

- gauges are the values now, summed across replicas and engine ranks (averaged for fractions
  such as `kv_usage`: `vocabulary.Gauge.combine`);
- counters are their growth since the scrape before, per series and per URL: a counter that went
  down was restarted, and its growth is its new value, never negative; a URL whose scrape before
  failed has no growth this span (its lifetime total is not a span's work);
- histograms give p50 / p90 / p99 of their buckets' growth over the span, in milliseconds;
- a label `model_name` or `model` splits every figure per model (`Reading.models`, empty for an
  engine without such labels: llama.cpp, TGI), `Reading.total` is every series together;
- `missing` lists the figures the engine exposes no series for; a figure that is exposed but has
  nothing to say this span (no request finished, no counter grew, the first scrape) is None and
  not missing.

Pure: a `Scrape` is a monotonic time and each URL's parse (`parse.Exposition`, or `parse.Failed`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Final, Literal

from oxconsole.metrics.server.buckets import Buckets, growth, merge, quantile
from oxconsole.metrics.server.parse import Exposition, Failed, Labels
from oxconsole.metrics.server.vocabulary import (
    DCGM,
    FIGURES,
    CounterDelta,
    CounterRate,
    CounterRatio,
    Engine,
    FigureName,
    Gauge,
    Histogram,
    Profile,
    Source,
    detect_engine,
    profile,
    source_names,
)

__all__ = [
    "QUANTILES",
    "Figures",
    "Gpu",
    "Part",
    "Percentiles",
    "Reading",
    "Scrape",
    "Sums",
    "percentiles",
    "read",
    "read_gpus",
]

QUANTILES: Final = (0.5, 0.9, 0.99)


@dataclass(frozen=True, slots=True)
class Part:
    """One URL's answer to one scrape."""

    url: str
    result: Exposition | Failed


@dataclass(frozen=True, slots=True)
class Scrape:
    """Every URL of an endpoint scraped at one moment (`t`: the monotonic clock, seconds)."""

    t: float
    parts: tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True, slots=True)
class Figures:
    """The contract's figures for one model, or for all (None: nothing to say this span)."""

    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    prefix_hit_rate: float | None = None
    preemptions: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    server_ttft_ms: Percentiles | None = None
    server_queue_ms: Percentiles | None = None
    spec_acceptance: float | None = None

    def as_dict(self) -> dict[str, float | dict[str, float]]:
        """The figures that have a value, in the server series' keys (percentiles as
        {"p50", "p90", "p99"})."""
        out: dict[str, float | dict[str, float]] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, Percentiles):
                out[f.name] = {"p50": v.p50, "p90": v.p90, "p99": v.p99}
            elif v is not None:
                out[f.name] = v
        return out


@dataclass(frozen=True, slots=True)
class Reading:
    """One scrape read against the one before: the engine, the span, the figures of all models
    and of each, what the engine does not expose, and the URLs whose scrape failed (and why)."""

    engine: Engine
    span_s: float | None
    total: Figures
    models: Mapping[str, Figures]
    missing: tuple[FigureName, ...]
    failed: tuple[tuple[str, str], ...]
    answered: int
    """URLs whose answer was read (the others are in `failed`)."""
    sums: Sums


@dataclass(frozen=True, slots=True)
class Sums:
    """What the span adds to the run's figures (all models), so that spans combine exactly: a
    run's prefix hit rate is its hits over its queries, not a mean of each span's rate.
    `counters`: (numerator, denominator) per figure: a rate's growth and span (s), a count's
    growth and 1, a ratio's two growths. `buckets`: a histogram's growth, bounds in ms."""

    counters: Mapping[FigureName, tuple[float, float]]
    buckets: Mapping[FigureName, Buckets]


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU from a DCGM exporter: utilisation (percent), framebuffer used (MiB), power (W)."""

    gpu_util: float | None = None
    gpu_mem_used_mb: float | None = None
    gpu_power_w: float | None = None


Value = float | Percentiles
ByKey = dict[str, Value]
"""A figure's value per split key (a model, a GPU); the total under `_ALL`."""
_ALL: Final = "\x00all"
KeyOf = Callable[[Labels], str]


def read(now: Scrape, before: Scrape | None = None, engine: Engine | None = None) -> Reading:
    """The reading of `now` against `before` (None for the first scrape: gauges only). The engine
    is recognised from `now`'s metric names unless given."""
    ok_now = _ok(now)
    failed = tuple((p.url, p.result.reason) for p in now.parts if isinstance(p.result, Failed))
    if engine is None:
        engine = detect_engine(n for e in ok_now.values() for n in e.names)
    prof = profile(engine)
    span = None if before is None else now.t - before.t
    ok_before = {} if before is None else _ok(before)
    values: dict[str, ByKey] = {}
    counters: dict[FigureName, tuple[float, float]] = {}
    buckets: dict[FigureName, Buckets] = {}
    missing: list[FigureName] = []
    if prof is None and ok_now:
        missing.extend(FIGURES)  # an engine the table does not know: nothing can be read
    elif prof is not None and ok_now:
        key = _key_of(prof)
        for figure in FIGURES:
            source = _exposed(prof.figures.get(figure, ()), ok_now.values())
            if source is None:
                missing.append(figure)
                continue
            values[figure], counter, grown = _evaluate(source, ok_now, ok_before, span, key)
            if counter is not None:
                counters[figure] = counter
            if grown is not None:
                buckets[figure] = grown
    keys = sorted({k for by in values.values() for k in by if k not in (_ALL, "")})
    models = {k: _figures(values, k) for k in keys}
    sums = Sums(counters, buckets)
    return Reading(engine, span, _figures(values, _ALL), models, tuple(missing), failed, len(ok_now), sums)


def read_gpus(now: Scrape) -> Mapping[str, Gpu]:
    """Each GPU's figures from DCGM exporters, keyed by the GPU's UUID (else its index)."""
    ok_now = _ok(now)
    key = _key_of(DCGM)
    values: dict[str, ByKey] = {}
    for figure, sources in DCGM.figures.items():
        source = _exposed(sources, ok_now.values())
        if isinstance(source, Gauge):
            values[figure] = _gauge(source, ok_now.values(), key)
    gpus = sorted({k for by in values.values() for k in by if k != _ALL})
    out: dict[str, Gpu] = {}
    for g in gpus:
        util, mem, power = (
            _float(values.get(f, {}).get(g)) for f in ("gpu_util", "gpu_mem_used_mb", "gpu_power_w")
        )
        out[g] = Gpu(util, mem, power)
    return out


def _ok(scrape: Scrape) -> dict[str, Exposition]:
    return {p.url: p.result for p in scrape.parts if isinstance(p.result, Exposition)}


def _key_of(prof: Profile) -> KeyOf:
    split = prof.split

    def key(labels: Labels) -> str:
        for name in split:
            v = labels.get(name)
            if v is not None:
                return v
        return ""

    return key


def _exposed(sources: Iterable[Source], parts: Iterable[Exposition]) -> Source | None:
    """The first source every series of which some URL exposes."""
    parts = list(parts)
    for s in sources:
        names = source_names(s)
        if any(all(n in p.series for n in names) for p in parts):
            return s
    return None


Evaluated = tuple[ByKey, tuple[float, float] | None, Buckets | None]
"""A figure's values by key, and what the span adds to the run's (`Sums`): (numerator,
denominator) for counters, the grown buckets (bounds in ms) for histograms."""


def _evaluate(
    source: Source,
    now: Mapping[str, Exposition],
    before: Mapping[str, Exposition],
    span: float | None,
    key: KeyOf,
) -> Evaluated:
    match source:
        case Gauge():
            return _gauge(source, now.values(), key), None, None
        case CounterRate(metric=m):
            if span is None or span <= 0:
                return {}, None, None
            grown = _counter_growth(m, now, before, key)
            return {k: g / span for k, g in grown.items()}, (grown.get(_ALL, 0.0), span), None
        case CounterDelta(metric=m):
            grown = _counter_growth(m, now, before, key)
            return dict(grown), (grown.get(_ALL, 0.0), 1.0) if before else None, None
        case CounterRatio(numerator=num, denominator=den):
            top = _summed(num, now, before, key)
            bottom = _summed(den, now, before, key)
            ratios: ByKey = {k: top.get(k, 0.0) / d for k, d in bottom.items() if d > 0}
            return ratios, (top.get(_ALL, 0.0), bottom.get(_ALL, 0.0)) if before else None, None
        case Histogram(metric=m, scale=scale):
            return _histogram(m + "_bucket", now, before, key, scale)


def _gauge(g: Gauge, parts: Iterable[Exposition], key: KeyOf) -> ByKey:
    found: dict[str, list[float]] = defaultdict(list)
    for p in parts:
        for labels, v in p.series.get(g.metric, ()):
            if g.match and any(labels.get(k) != want for k, want in g.match):
                continue
            if not math.isfinite(v) or v == g.unused:
                continue
            if g.bounds is not None and not g.bounds[0] <= v <= g.bounds[1]:
                continue
            v *= g.scale
            found[key(labels)].append(v)
            found[_ALL].append(v)
    combine = _COMBINE[g.combine]
    return {k: combine(vs) for k, vs in found.items()}


_COMBINE: Final[dict[Literal["sum", "mean"], Callable[[list[float]], float]]] = {
    "sum": math.fsum,
    "mean": lambda vs: math.fsum(vs) / len(vs),
}


SeriesKey = frozenset[tuple[str, str]]

KEY_MEMO_MAX: Final = 8192
"""Label sets whose keys are remembered. The parser hands back the same label mapping for the
same label block scrape after scrape (`parse.LABEL_CACHE_MAX`), so a series' identity is worked
out once, not at every scrape: reading a 200-series scrape went from ~440 to ~310 us."""
_key_memo: dict[int, tuple[Labels, SeriesKey, SeriesKey, float | None]] = {}


def _keys(labels: Labels) -> tuple[SeriesKey, SeriesKey, float | None]:
    """A series' identity, its histogram's (its labels less `le`) and its bucket's bound (None
    without a readable `le`). Remembered by the mapping's identity; the entry holds the mapping,
    so that identity cannot be another's while remembered."""
    hit = _key_memo.get(id(labels))
    if hit is not None and hit[0] is labels:
        return hit[1], hit[2], hit[3]
    whole = frozenset(labels.items())
    le = labels.get("le")
    less_le = whole if le is None else frozenset(i for i in whole if i[0] != "le")
    bound: float | None = None
    if le is not None:
        try:
            bound = float(le)
        except ValueError:
            bound = None
    if len(_key_memo) >= KEY_MEMO_MAX:
        _key_memo.clear()
    _key_memo[id(labels)] = (labels, whole, less_le, bound)
    return whole, less_le, bound


def _series_key(labels: Labels) -> SeriesKey:
    return _keys(labels)[0]


def _counter_growth(
    metric: str, now: Mapping[str, Exposition], before: Mapping[str, Exposition], key: KeyOf
) -> dict[str, float]:
    """Each key's growth of `metric` since `before`, summed over series and URLs. A series absent
    before (created since, or its server restarted) grew by its value; one that went down was
    restarted and grew by its new value. URLs without a reading before are left out."""
    out: dict[str, float] = defaultdict(float)
    for url, exp in now.items():
        prev = before.get(url)
        if prev is None:
            continue
        old = {_series_key(labels): v for labels, v in prev.series.get(metric, ())}
        for labels, v in exp.series.get(metric, ()):
            if not math.isfinite(v):
                continue
            o = old.get(_series_key(labels))
            g = v if o is None or not math.isfinite(o) or v < o else v - o
            out[key(labels)] += g
            out[_ALL] += g
    return out


def _summed(
    metrics: tuple[str, ...], now: Mapping[str, Exposition], before: Mapping[str, Exposition], key: KeyOf
) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for m in metrics:
        for k, g in _counter_growth(m, now, before, key).items():
            out[k] += g
    return out


def _histograms(exp: Exposition, name: str, key: KeyOf) -> dict[SeriesKey, tuple[str, Buckets]]:
    """A bucket series grouped into histograms: by its labels less `le`, with its split key."""
    grouped: dict[SeriesKey, tuple[str, list[tuple[float, float]]]] = {}
    for labels, v in exp.series.get(name, ()):
        _, rest, bound = _keys(labels)
        if bound is None or not math.isfinite(v):
            continue
        entry = grouped.get(rest)
        if entry is None:
            entry = grouped[rest] = (key(labels), [])
        entry[1].append((bound, v))
    return {k: (model, tuple(sorted(b))) for k, (model, b) in grouped.items()}


def _histogram(
    name: str, now: Mapping[str, Exposition], before: Mapping[str, Exposition], key: KeyOf, scale: float
) -> Evaluated:
    grown: dict[str, list[Buckets]] = defaultdict(list)
    for url, exp in now.items():
        prev = before.get(url)
        if prev is None:
            continue
        old = _histograms(prev, name, key)
        for series, (k, buckets) in _histograms(exp, name, key).items():
            o = old.get(series)
            g = growth(None if o is None else o[1], buckets)
            grown[k].append(g)
            grown[_ALL].append(g)
    out: ByKey = {}
    total: Buckets | None = None
    for k, parts in grown.items():
        merged = merge(parts)
        if k == _ALL:
            total = tuple((b * scale, c) for b, c in merged)
        p = percentiles(merged, scale)
        if p is not None:
            out[k] = p
    return out, None, total if before else None


def percentiles(buckets: Buckets, scale: float = 1.0) -> Percentiles | None:
    """p50 / p90 / p99 of cumulative buckets, times `scale`; None when they hold nothing."""
    qs = [quantile(q, buckets) for q in QUANTILES]
    if any(q is None for q in qs):
        return None
    p50, p90, p99 = (float(q) * scale for q in qs if q is not None)
    return Percentiles(p50, p90, p99)


def _float(v: Value | None) -> float | None:
    return v if isinstance(v, float) else None


def _figures(values: Mapping[str, ByKey], k: str) -> Figures:
    def f(name: str) -> float | None:
        return _float(values.get(name, {}).get(k))

    def p(name: str) -> Percentiles | None:
        v = values.get(name, {}).get(k)
        return v if isinstance(v, Percentiles) else None

    return Figures(
        running=f("running"),
        waiting=f("waiting"),
        kv_usage=f("kv_usage"),
        prefix_hit_rate=f("prefix_hit_rate"),
        preemptions=f("preemptions"),
        prompt_tokens_per_s=f("prompt_tokens_per_s"),
        generation_tokens_per_s=f("generation_tokens_per_s"),
        server_ttft_ms=p("server_ttft_ms"),
        server_queue_ms=p("server_queue_ms"),
        spec_acceptance=f("spec_acceptance"),
    )
