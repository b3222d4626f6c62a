"""The server series beside a journal (`<journal stem>.server.jsonl`): one line per scrape round.

Why this module exists: what the engine showed during a run must outlive it, on the client's
clock, for `oxconsole report` (the summary's `server` blocks, the HTML report's charts) and for
anyone's own plots. A line holds the round's figures in the contract's vocabulary (`t`: unix
time, `endpoint`, `engine`, `running`, `waiting`, `kv_usage`, rates and span figures since the
round before) and, under `sums`, what the span adds to the run's figures (`scrapes.Sums`), so a
report rebuilds the run's and each phase's figures exactly, not as means of means. DCGM rounds
write one line per GPU (`gpu`, `gpu_util`, `gpu_mem_used_mb`, `gpu_power_w`).

A series file is read as hostile input: a line longer than `MAX_LINE`, not JSON, or holding
values of the wrong kind is skipped, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from oxconsole.metrics.server.scrapes import Gpu, Reading, Sums
from oxconsole.metrics.server.spans import GAUGES, Round
from oxconsole.metrics.server.vocabulary import FIGURES, FigureName

__all__ = ["MAX_LINE", "SUFFIX", "gpu_line", "line", "read_series", "round_of", "series_path", "url_of"]

SUFFIX: Final = ".server.jsonl"
MAX_LINE: Final = 1 << 20
"""The longest line read back (a round's line is about 1 KB; per-model figures of many models
make it longer, never this long)."""
_INF: Final = "+Inf"


def series_path(results: Path) -> Path:
    """`results.jsonl` -> `results.server.jsonl` (the journal's name less its suffix)."""
    stem = results.name[: -len(results.suffix)] if results.suffix else results.name
    return results.with_name(stem + SUFFIX)


def line(t: float, endpoint: str, reading: Reading, url: str | list[str] | None = None) -> dict[str, Any]:
    """One round of an endpoint as its series line (`t`: unix time; `url`: what it was read from,
    as shown)."""
    d: dict[str, Any] = {"t": round(t, 3), "endpoint": endpoint, "engine": reading.engine}
    if url is not None:
        d["url"] = url
    d.update(reading.total.as_dict())
    if reading.span_s is not None:
        d["span_s"] = round(reading.span_s, 3)
    if len(reading.models) > 1:
        d["models"] = {m: f.as_dict() for m, f in reading.models.items()}
    if reading.failed:
        d["failed"] = [[url, why] for url, why in reading.failed]
    if not reading.answered:
        d["answered"] = 0
    d["missing"] = list(reading.missing)
    sums = reading.sums
    if sums.counters or sums.buckets:
        d["sums"] = {
            "counters": {f: [n, den] for f, (n, den) in sums.counters.items()},
            "buckets": {
                f: [[_INF if math.isinf(b) else b, c] for b, c in grown]
                for f, grown in sums.buckets.items()
                if grown and grown[-1][1] > 0
            },
        }
    return d


def gpu_line(t: float, url: str, gpu: str, g: Gpu) -> dict[str, Any]:
    """One GPU of a DCGM exporter's round as its series line."""
    d: dict[str, Any] = {"t": round(t, 3), "gpu": gpu, "url": url}
    for k in ("gpu_util", "gpu_mem_used_mb", "gpu_power_w"):
        v = getattr(g, k)
        if v is not None:
            d[k] = v
    return d


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _sums(d: Any) -> Sums | None:
    if d is None:
        return Sums({}, {})
    if not isinstance(d, Mapping):
        return None
    counters: dict[FigureName, tuple[float, float]] = {}
    for f, pair in (d.get("counters") or {}).items():
        if f not in FIGURES:
            continue
        if not (isinstance(pair, list) and len(pair) == 2):
            return None
        n, den = _num(pair[0]), _num(pair[1])
        if n is None or den is None:
            return None
        counters[f] = (n, den)
    buckets: dict[FigureName, tuple[tuple[float, float], ...]] = {}
    for f, pairs in (d.get("buckets") or {}).items():
        if f not in FIGURES:
            continue
        if not isinstance(pairs, list):
            return None
        out: list[tuple[float, float]] = []
        for p in pairs:
            if not (isinstance(p, list) and len(p) == 2):
                return None
            b = math.inf if p[0] == _INF else _num(p[0])
            c = _num(p[1])
            if b is None or c is None:
                return None
            out.append((b, c))
        buckets[f] = tuple(out)
    return Sums(counters, buckets)


def url_of(d: Mapping[str, Any]) -> str | list[str]:
    """The URL (or replicas' URLs) a line says it was read from; "" when it says none."""
    u = d.get("url")
    if isinstance(u, str):
        return u
    if isinstance(u, list) and all(isinstance(x, str) for x in u):
        return list(u)
    return ""


def round_of(d: Any) -> tuple[str, float, Round] | None:
    """(endpoint, unix time, the round) of a series line, or None for a line that is not an
    endpoint's round (a GPU's) or is not one as this module writes it."""
    if not isinstance(d, Mapping):
        return None
    endpoint, t, engine = d.get("endpoint"), _num(d.get("t")), d.get("engine")
    missing = d.get("missing", [])
    if not isinstance(endpoint, str) or t is None or not isinstance(engine, str):
        return None
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        return None
    sums = _sums(d.get("sums"))
    if sums is None:
        return None
    gauges: dict[str, float] = {f: v for f in GAUGES if (v := _num(d.get(f))) is not None}
    answered = d.get("answered", 1) != 0
    return endpoint, t, Round(engine, answered, tuple(missing), gauges, sums)


def read_series(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a series file, in order, skipping what cannot be read (over-long
    lines, lines that are not JSON objects). Raises OSError when the file cannot be opened."""
    with open(path, "rb") as f:
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pass  # the rest of an over-long line
                continue
            try:
                d = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(d, dict):
                yield d
