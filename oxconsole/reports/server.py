"""The server's side in the reports: `report`'s summary rebuilt with it, the summary table's lines,
the HTML report's charts and the figures `report A B` compares.

Why this module exists: what the engine said during a run (`<journal stem>.server.jsonl`, one line
per scrape round, `metrics/server/series.py`) belongs in every report of the run, beside the
client's figures and on the client's clock: the summary's `server` blocks rebuilt from the series
(exactly, from each round's sums), its lines in the text table, running and waiting drawn against
the client's own in flight and the KV usage over time with the live changes marked, and the engine's
figures compared across runs. A run without a series (scraping off, an older run) shows none of it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from oxconsole.base.figures import (
    GENERATION_TOKENS_PER_S,
    KV_USAGE,
    PREEMPTIONS,
    PREFIX_HIT_RATE,
    PROMPT_TOKENS_PER_S,
    RUNNING,
    SERVER_COMPARED,
    SERVER_PERCENTILES,
    SPEC_ACCEPTANCE,
    WAITING,
    Figure,
)
from oxconsole.base.units import fmt_num
from oxconsole.metrics.server.series import read_series, round_of, series_path, url_of
from oxconsole.metrics.server.spans import GpuSummary, ServerSummary
from oxconsole.reports.svg import PALETTE, Line, Marker, line_chart

__all__ = [
    "FIGURES",
    "server_figures",
    "server_lines",
    "server_rows",
    "server_section",
    "with_server",
]

FIGURES: tuple[tuple[str, str], ...] = tuple(
    (f"server.{f.key}", f"srv {f.short}" + (" %" if f.kind == "fraction" else "")) for f in SERVER_COMPARED
)
"""The figures `report A B ...` adds for runs whose server was read, as `oxconsole.base.figures`
declares them (labels fit its 16 columns); each run's first endpoint by name (a run has one
endpoint, usually)."""


_VALUES = (PROMPT_TOKENS_PER_S, GENERATION_TOKENS_PER_S, PREFIX_HIT_RATE, PREEMPTIONS, SPEC_ACCEPTANCE)
"""The single figures of the text table's second line, in its order."""


def _read(d: Mapping[str, Any]) -> bool:
    """Whether an endpoint's block has the figures of a round that was read."""
    return RUNNING.key in d or WAITING.key in d


# --- the summary, rebuilt ---------------------------------------------------------------------
def with_server(summary: dict[str, Any], results: str | os.PathLike[str]) -> dict[str, Any]:
    """`summary` with its `server` (and `gpus`) rebuilt from the series beside the journal
    `results`; a run of one phase without its own server figures gets the whole run's. Unchanged
    when there is no series or it cannot be read."""
    path = series_path(Path(results))
    runs: dict[str, ServerSummary] = {}
    gpus = GpuSummary()
    try:
        for d in read_series(path):
            gpu = d.get("gpu")
            if isinstance(gpu, str):
                gpus.add(gpu, {k: _num(d.get(k)) for k in ("gpu_util", "gpu_mem_used_mb", "gpu_power_w")})
                continue
            got = round_of(d)
            if got is None:
                continue
            endpoint, _, rnd = got
            s = runs.get(endpoint)
            if s is None:
                s = runs[endpoint] = ServerSummary(url_of(d))
            s.add(rnd)
    except OSError:
        return summary
    if runs:
        summary["server"] = {name: s.as_dict() for name, s in sorted(runs.items())}
        phases = summary.get("phases")
        if isinstance(phases, list) and len(phases) == 1 and isinstance(phases[0], dict):
            phases[0].setdefault("server", summary["server"])
    if gpus.as_dict():
        summary["gpus"] = gpus.as_dict()
    return summary


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


# --- the text table -----------------------------------------------------------------------------
def _pct(v: Any) -> str:
    return f"{100 * float(v):.1f}%" if isinstance(v, int | float) else "–"


def _pair(d: Any, unit: str = "") -> str:
    if not isinstance(d, Mapping):
        return "–"
    p50, top = d.get("p50"), d.get("max")
    return f"{fmt_num(p50)}{unit} (max {fmt_num(top)}{unit})"


def _value(f: Figure, v: float) -> str:
    """A single figure in the text table: tokens/s, a percentage or a count."""
    return f"{fmt_num(v)} tok/s" if f.kind == "rate" else _pct(v) if f.kind == "fraction" else f"{int(v)}"


def server_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary table's lines for `server` (none without it): per endpoint, the engine and what
    it said over the run, the figures it lacks, and the rounds read."""
    server = summary.get("server")
    if not isinstance(server, Mapping) or not server:
        return []
    out = ["server (the engine's own /metrics, over the run)"]
    for name, d in server.items():
        if not isinstance(d, Mapping):
            continue
        out.append(
            f"  {name}: {d.get('engine', 'unknown')}, {d.get('scrapes', 0)} scrapes"
            f" ({d.get('failed_scrapes', 0)} failed)"
        )
        if _read(d):
            parts = [f"{f.label} {_pair(f.of(d))}" for f in (RUNNING, WAITING)]
            kv = KV_USAGE.of(d)
            if isinstance(kv, Mapping):
                parts.append(f"{KV_USAGE.label} {_pct(kv.get('p50'))} (max {_pct(kv.get('max'))})")
            out.append("    " + " · ".join(parts))
        values = [(f, v) for f in _VALUES if isinstance(v := f.of(d), int | float)]
        rates = [
            f"{f.label} "
            + (
                f"{fmt_num(v)} tok/s"
                if f.kind == "rate"
                else _pct(v)
                if f.kind == "fraction"
                else f"{int(v)}"
            )
            for f, v in values
        ]
        if rates:
            out.append("    " + " · ".join(rates))
        lat = [
            f"{f.label} p50 {fmt_num(t['p50'])} p99 {fmt_num(t['p99'])} {f.unit}"
            for f in SERVER_PERCENTILES
            if isinstance(t := f.of(d), Mapping) and "p50" in t
        ]
        if lat:
            out.append("    " + " · ".join(lat))
        missing = d.get("missing")
        if isinstance(missing, list) and missing:
            out.append("    not exposed: " + ", ".join(str(m) for m in missing))
    return out


# --- report A B ---------------------------------------------------------------------------------
def _first(s: Mapping[str, Any]) -> Mapping[str, Any] | None:
    server = s.get("server")
    if not isinstance(server, Mapping) or not server:
        return None
    d = server[sorted(server, key=str)[0]]
    return d if isinstance(d, Mapping) else None


def server_figures(s: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures a comparison adds for a run (none for a run whose server was not read)."""
    d = _first(s)
    if d is None or not _read(d):
        return {}
    return {key: f.scaled(f.value(d)) for (key, _), f in zip(FIGURES, SERVER_COMPARED, strict=True)}


def server_rows(runs: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(figure, label) rows when any compared run has them."""
    return FIGURES if any(FIGURES[0][0] in figs for figs in runs) else ()


# --- the HTML report ----------------------------------------------------------------------------
def _series(results: str | os.PathLike[str]) -> dict[str, list[tuple[float, Mapping[str, Any]]]]:
    """Each endpoint's rounds that read an answer: (unix time, line)."""
    out: dict[str, list[tuple[float, Mapping[str, Any]]]] = {}
    try:
        for d in read_series(series_path(Path(results))):
            got = round_of(d)
            if got is not None and got[2].answered:
                out.setdefault(got[0], []).append((got[1], d))
    except OSError:
        return {}
    return out


def _binned(
    rounds: Sequence[tuple[float, Mapping[str, Any]]],
    key: str,
    t0: float,
    step: float,
    n: int,
    scale: float = 1.0,
) -> list[float | None]:
    """`key`'s mean in each of `n` slots of `step` seconds from `t0` (None where no round read it)."""
    sums = [0.0] * n
    counts = [0] * n
    for t, d in rounds:
        v = d.get(key)
        i = int((t - t0) // step)
        if isinstance(v, int | float) and 0 <= i < n:
            sums[i] += float(v) * scale
            counts[i] += 1
    return [sums[i] / counts[i] if counts[i] else None for i in range(n)]


def server_section(
    summary: Mapping[str, Any],
    results: str | os.PathLike[str],
    xs: Sequence[float],
    t0: float,
    step: float,
    span: float,
    in_flight: Sequence[float],
    markers: Sequence[Marker],
) -> str:
    """The "Server" section: per endpoint, the engine's running and waiting against the client's in
    flight, and its KV usage, over the journal's time slots (`xs`, from `t0`), with the markers;
    then the table's lines. Empty for a run whose server was not read."""
    series = _series(results)
    if not series:
        return ""
    figs = []
    n = len(xs)
    for i, (name, rounds) in enumerate(sorted(series.items())):
        lines = [
            Line(f"engine {f.label}", _binned(rounds, f.key, t0, step, n), colour)
            for f, colour in ((RUNNING, PALETTE[0]), (WAITING, PALETTE[2]))
        ]
        if i == 0:  # the client's in flight is the whole run's (every endpoint)
            lines.append(Line("client in flight", list(in_flight), PALETTE[1], dashed=True))
        figs.append(
            _figure(
                f"{name}: requests in the engine and in flight",
                line_chart("requests", xs, lines, x_max=span, y_unit="req", markers=markers),
            )
        )
        kv = _binned(rounds, KV_USAGE.key, t0, step, n, 100.0)
        if any(v is not None for v in kv):
            figs.append(
                _figure(
                    f"{name}: KV cache usage (%)",
                    line_chart(
                        "KV usage",
                        xs,
                        [Line("KV usage", kv, PALETTE[3])],
                        x_max=span,
                        y_unit="%",
                        markers=markers,
                    ),
                )
            )
    note = (
        "What the engine said of itself on its /metrics, one round a second by default, on the "
        "client's clock: requests waiting in the engine while the client's in flight stays flat "
        "mean the queue is in the engine; in flight above running + waiting, requests in transit."
    )
    table = escape("\n".join(server_lines(summary)[1:]))
    return (
        f'<section id="server"><h2>Server</h2><p class="note">{escape(note)}</p>'
        f'<div class="charts">{"".join(figs)}</div><pre>{table}</pre></section>'
    )


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"
