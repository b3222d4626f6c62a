"""`oxconsole report A.jsonl B.jsonl ...`: runs side by side, Δ% against the first, and whether
each difference is larger than the noise.

Why this module exists: "is today's run slower than yesterday's?" needs more than two numbers; like
benchstat, a difference only counts when the figures' intervals do not overlap. Each figure gets a
95% bootstrap interval with a fixed seed (so the same journals always give the same verdict):
percentiles are resampled from the journal's ok latencies (`BOOTSTRAP` resamples; above
`EXACT_LIMIT` values the rank of the percentile in a resample is drawn from its normal limit
instead of resorting millions of values, which gives the same interval), and rates from the
journal's per-second throughput. Holds 8 bytes per ok request and timing while comparing.
"""

from __future__ import annotations

import math
import os
import random
import sys
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.base.figures import (
    COMPARED,
    DRAWN,
    ERROR_RATE,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    TIMED,
)
from oxconsole.base.figures import FIGURES as SUMMARY_FIGURES
from oxconsole.base.figures import STEADY as STEADY_RATES
from oxconsole.base.figures import Figure as DeclaredFigure
from oxconsole.base.safetext import shown_lines
from oxconsole.reports.media import media_figures, media_rows
from oxconsole.reports.plans import cost_figures, cost_rows, money_cell
from oxconsole.reports.quality import quality_figures, quality_rows
from oxconsole.reports.reasoning import reasoning_figures, reasoning_rows
from oxconsole.reports.server import server_figures, server_rows
from oxconsole.reports.steps import step_rows, step_values
from oxconsole.reports.summary import read_journal, summary_from_journal
from oxconsole.reports.timeline import build_timeline
from oxconsole.reports.trust import trials_verdicts

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = [
    "FIGURES",
    "Figure",
    "RunFigures",
    "compare",
    "compare_main",
    "load_run",
    "render_compare",
    "short_names",
]

SEED = 13
BOOTSTRAP = 200
"""Resamples per interval: ±1.5% on a 95% interval's edges, under a second for 20k values."""
EXACT_LIMIT = 20_000
CONFIDENCE = 0.95

FIGURES: tuple[tuple[str, str], ...] = tuple((f.id, f.header) for f in SUMMARY_FIGURES)
"""(id, label with its unit) of each figure compared, as `oxconsole.base.figures` declares them."""

STEADY: tuple[tuple[str, str], ...] = tuple((f"steady.{f.id}", f"steady {f.short}") for f in STEADY_RATES)
"""The steady window's rates (`metrics/steady.py`), shown after the whole run's."""

GOODPUT: tuple[tuple[str, str], ...] = tuple((f.id, f.header) for f in COMPARED["goodput"])
"""Rows shown when some run had `[slo]`."""


def short_names(paths: Sequence[str]) -> list[str]:
    """Each journal's column name: the shortest suffix of its path (whole folders and file) that
    tells it from the others (`a.jsonl`, `b.jsonl`; `slo/results.jsonl`, `v2/slo/results.jsonl`);
    the same journal twice is numbered (`#2 a.jsonl`)."""
    parts = [os.path.abspath(p).split(os.sep) for p in paths]
    longest = max((len(x) for x in parts), default=1)
    for k in range(1, longest + 1):
        names = [os.sep.join(x[-k:]).lstrip(os.sep) for x in parts]
        if len(set(names)) == len(names):
            return names
    names = [os.path.basename(p) or p for p in paths]
    return [n if i == 0 else f"#{i + 1} {n}" for i, n in enumerate(names)]


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of one run, with its interval (None: no interval for this figure)."""

    value: float | None
    interval: tuple[float, float] | None


@dataclass(frozen=True, slots=True)
class RunFigures:
    path: str
    name: str
    figures: Mapping[str, Figure]
    trials: Mapping[str, Any] | None = None
    """The summary's `trials` block, for runs of several trials (`reports/trust.py`)."""


def _quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Nearest rank (as the summary's percentiles)."""
    n = len(sorted_vals)
    return sorted_vals[min(n - 1, max(0, math.ceil(q / 100.0 * n) - 1))]


def _edges(samples: list[float]) -> tuple[float, float]:
    samples.sort()
    tail = (1.0 - CONFIDENCE) / 2.0
    return samples[int(tail * len(samples))], samples[min(len(samples) - 1, int((1 - tail) * len(samples)))]


def percentile_intervals(
    values: Sequence[float], qs: Sequence[float], seed: int = SEED
) -> list[tuple[float, float]]:
    """95% bootstrap intervals of the percentiles ``qs`` of ``values`` (fixed seed)."""
    if not values:
        return [(0.0, 0.0) for _ in qs]
    rnd = random.Random(seed)
    n = len(values)
    draws: list[list[float]] = [[] for _ in qs]
    if n <= EXACT_LIMIT:
        for _ in range(BOOTSTRAP):
            sample = sorted(rnd.choices(values, k=n))
            for d, q in zip(draws, qs, strict=True):
                d.append(_quantile(sample, q))
    else:
        ordered = sorted(values)
        for d, q in zip(draws, qs, strict=True):
            p = q / 100.0
            mean, sd = n * p, math.sqrt(n * p * (1 - p))
            for _ in range(BOOTSTRAP):
                k = min(n - 1, max(0, math.ceil(rnd.gauss(mean, sd)) - 1))
                d.append(ordered[k])
    return [_edges(d) for d in draws]


def mean_interval(values: Sequence[float], seed: int = SEED) -> tuple[float, float] | None:
    """95% bootstrap interval of the mean of ``values`` (None with fewer than 3)."""
    if len(values) < 3:
        return None
    rnd = random.Random(seed)
    n = len(values)
    return _edges([sum(rnd.choices(values, k=n)) / n for _ in range(BOOTSTRAP)])


def _timings(path: str | os.PathLike[str]) -> dict[DeclaredFigure, array[float]]:
    """The ok records' timings of each of `DRAWN` (empty when no record carries it)."""
    out = {f: array("d") for f in DRAWN}
    for rec in read_journal(path):
        if rec.status != "ok":
            continue
        for f, values in out.items():
            v = getattr(rec, f.journal)
            if v is not None:
                values.append(v)
    return out


def _with_intervals(figs: dict[str, Figure], metric: str, vals: Sequence[float], qs: Sequence[float]) -> None:
    """Put the bootstrap intervals of ``metric``'s percentiles ``qs`` on the figures already there
    (a figure absent or without a value is left as it is)."""
    keys = [f"{metric}.p{q:.0f}" for q in qs]
    if not vals or not any(figs.get(k, Figure(None, None)).value is not None for k in keys):
        return
    for key, iv in zip(keys, percentile_intervals(vals, qs), strict=True):
        f = figs.get(key)
        if f is not None and f.value is not None:
            figs[key] = Figure(f.value, iv)


def load_run(path: str | os.PathLike[str], plans: Mapping[str, PricePlan] | None = None) -> RunFigures:
    """Every figure of one journal with its interval (and its costs under the run's plans, or
    ``plans``). Raises OSError when unreadable."""
    s = summary_from_journal(path, plans=plans)
    figs: dict[str, Figure] = {}
    tl = build_timeline(path)
    whole = [i for i in range(len(tl.slots)) if tl.width(i) >= tl.step]  # a cut-short last slot is noisier
    for rate, what in ((REQUESTS_PER_S, "ok"), (OUTPUT_TOKENS_PER_S, "output_tokens")):
        rates = tl.rate(what)
        figs[rate.id] = Figure(
            rate.value(s), mean_interval([r for i in whole if (r := rates[i]) is not None])
        )
    for f in TIMED:  # every run's timings, at each percentile `FIGURES` may show
        figs.update((m.id, Figure(m.value(s), None)) for m in (f.at(q) for q in ("p50", "p90", "p99")))
    steady = s.get("steady")
    for key, _ in STEADY:
        v = steady.get(key.partition(".")[2]) if isinstance(steady, Mapping) else None
        figs[key] = Figure(None if v is None else float(v), None)
    req = s["requests"]
    if isinstance(s.get("goodput"), Mapping):
        for f in COMPARED["goodput"]:
            figs[f.id] = Figure(f.scaled(f.value(s)), None)
    figs[ERROR_RATE.id] = Figure(100.0 * req["error"] / req["total"] if req["total"] else None, None)
    figs.update((k, Figure(v, None)) for k, v in cost_figures(s).items())
    figs.update((k, Figure(v, None)) for k, v in step_values(s).items())
    figs.update((k, Figure(v, None)) for k, v in quality_figures(s).items())
    figs.update((k, Figure(v, None)) for k, v in reasoning_figures(s).items())
    figs.update((k, Figure(v, None)) for k, v in media_figures(s).items())
    figs.update((k, Figure(v, None)) for k, v in server_figures(s).items())
    for f, vals in _timings(path).items():  # the others at their rows' (reasoning_figures gave TTFOT's)
        _with_intervals(figs, f.key, vals, (50.0, 90.0, 99.0) if f in TIMED else (50.0, 99.0))
    trials = s.get("trials")
    return RunFigures(
        os.fspath(path), str(s.get("name", "")), figs, trials if isinstance(trials, Mapping) else None
    )


def _delta(base: Figure, other: Figure) -> tuple[float | None, bool | None]:
    """Δ% of ``other`` against ``base``, and whether it is within noise (None: unknown)."""
    if base.value is None or other.value is None:
        return None, None
    delta = None if base.value == 0 else 100.0 * (other.value - base.value) / base.value
    if base.interval is None or other.interval is None:
        return delta, None
    (a_lo, a_hi), (b_lo, b_hi) = base.interval, other.interval
    return delta, not (b_lo > a_hi or b_hi < a_lo)


def compare(runs: Sequence[RunFigures]) -> dict[str, Any]:
    """The comparison as plain JSON types: each figure's values, intervals, Δ% and noise verdict
    (against the first run)."""
    rows = []
    slo = GOODPUT if any(GOODPUT[0][0] in r.figures for r in runs) else ()
    steps = step_rows(r.figures for r in runs)
    quality = quality_rows(r.figures for r in runs)
    answer = reasoning_rows(r.figures for r in runs)
    media = media_rows({k: f.value for k, f in r.figures.items()} for r in runs)
    costs = cost_rows(r.figures for r in runs)
    server = server_rows(r.figures for r in runs)
    steady = (
        STEADY
        if any(r.figures.get(k, Figure(None, None)).value is not None for r in runs for k, _ in STEADY)
        else ()
    )
    keys = (*FIGURES[:2], *steady, *slo, *FIGURES[2:], *answer, *media, *costs, *quality, *steps, *server)
    for key, label in keys:
        figs = [r.figures.get(key, Figure(None, None)) for r in runs]
        deltas = [_delta(figs[0], f) for f in figs[1:]]
        rnd = _round_cost if key.startswith("cost") else _round
        rows.append({
            "figure": key,
            "label": label,
            "values": [rnd(f.value) for f in figs],
            "intervals": [None if f.interval is None else [_round(x) for x in f.interval] for f in figs],
            "delta_pct": [None, *(_round(d) for d, _ in deltas)],
            "within_noise": [None, *(n for _, n in deltas)],
        })  # fmt: skip
    labels = short_names([r.path for r in runs])
    out: dict[str, Any] = {
        "runs": [
            {"path": r.path, "name": r.name, "label": label} for r, label in zip(runs, labels, strict=True)
        ],
        "baseline": runs[0].path,
        "confidence": CONFIDENCE,
        "bootstrap": {"resamples": BOOTSTRAP, "seed": SEED},
        "figures": rows,
    }
    said = [
        line
        for r, label in zip(runs[1:], labels[1:], strict=True)
        for line in trials_verdicts({"trials": runs[0].trials}, {"trials": r.trials}, (labels[0], label))
    ]
    if said:
        out["trials"] = said
    return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _round_cost(v: float | None) -> float | None:
    return None if v is None else round(v, 12)


def _cell(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 10_000 else f"{v:,.2f}" if abs(v) < 100 else f"{v:,.1f}"


def _dcell(delta: float | None, noise: bool | None) -> str:
    if delta is None:
        return "-"
    mark = "~" if noise else "*" if noise is False else " "
    return f"{mark}{delta:+.1f}%"


def render_compare(c: Mapping[str, Any], cell: Callable[[float | None], str] = _cell) -> str:
    """A text table: a column per run (the first is the baseline), Δ% beside each later run;
    `~` = within noise, `*` = a real difference (intervals apart)."""
    names = [str(r.get("label") or r["path"]) for r in c["runs"]]
    w = max(13, *(len(n) + 2 for n in names))  # every column headed by its whole name
    head = f"{'figure':<16}{names[0]:>{w}}" + "".join(f"{n:>{w}}{'Δ%':>10}" for n in names[1:])
    lines = [f"{i}: {r['path']}" for i, r in zip(names, c["runs"], strict=True)]
    lines += ["", head]
    for row in c["figures"]:
        fmt = money_cell if str(row["figure"]).startswith("cost") else cell
        line = f"{row['label']:<16}{fmt(row['values'][0]):>{w}}"
        for v, d, n in zip(row["values"][1:], row["delta_pct"][1:], row["within_noise"][1:], strict=True):
            line += f"{fmt(v):>{w}}{_dcell(d, n):>10}"
        lines.append(line)
    lines += ["", f"~ within noise, * beyond it ({c['confidence']:.0%} bootstrap intervals, seed {SEED})"]
    if c.get("trials"):
        lines += [
            "",
            "over the trials (95% t-intervals of each run's trials):",
            *(f"  {t}" for t in c["trials"]),
        ]
    return "\n".join(lines) + "\n"


def compare_main(
    results: Sequence[str],
    *,
    as_json: bool = False,
    markdown: bool = False,
    html: str | None = None,
    plans: Mapping[str, PricePlan] | None = None,
) -> int:
    """Compare the journals ``results`` (priced under ``plans``, else each under its run's): the
    table (JSON with ``as_json``, Markdown with ``markdown``) on stdout, and an HTML page at
    ``html``; 0, or 2 if unreadable. Told what to show, not handed the command's request: the
    command imports this module, never the other way round."""
    runs = []
    for path in results:
        try:
            runs.append(load_run(path, plans))
        except OSError as e:
            print(
                f"oxconsole report: {path}: cannot read the results journal: {e.strerror or e}",
                file=sys.stderr,
            )
            return 2
    c = compare(runs)
    if as_json:
        sys.stdout.write(orjson.dumps(c, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif markdown:
        from oxconsole.reports.exports import compare_markdown

        sys.stdout.write(compare_markdown(c))
    else:
        sys.stdout.write(shown_lines(render_compare(c)))  # runs' labels and paths are text
    if html:
        from oxconsole.reports.html import write_compare_html

        write_compare_html(c, html)
        print(f"oxconsole report: wrote {html}", file=sys.stderr)
    return 0
