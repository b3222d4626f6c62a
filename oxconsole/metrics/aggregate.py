"""Counters and histograms over a set of finished requests, and the summary blocks built from them.

Why this module exists: the live collector (whole run, each model, each phase) and
`oxconsole report` (a journal replayed) must compute the very same figures, or a summary printed at
the end of a run would disagree with the one rebuilt from its journal. Both feed `RunStats` and
format it with the functions below; neither knows about the engine or the UI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oxconsole.base.figures import (
    ITL,
    LATENCY,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    SUMMARY_TIMINGS,
    TTFT,
    Figure,
)
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.goodput import goodput_entry
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.media import MediaStats, media_entry
from oxconsole.metrics.packing import PackCounts, packing_block
from oxconsole.metrics.plans import Usage, cost_block, model_cost_block
from oxconsole.metrics.quality import QualityCounts, add_per_valid, quality_entry
from oxconsole.metrics.reasoning import ReasoningStats
from oxconsole.metrics.reasoning import into as with_reasoning

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = [
    "CANCELLED",
    "METRICS",
    "RunStats",
    "Tally",
    "build_summary",
    "count_answers",
    "count_fallbacks",
    "error_details",
    "iso_time",
    "phase_summary",
    "timing",
    "timing_blocks",
]

CANCELLED = "cancelled"
"""The error class of a request a stop cancelled before it finished (`RunStats.cancelled`)."""

METRICS = tuple(f.key for f in SUMMARY_TIMINGS)
"""The timing metrics kept as histograms, over `ok` requests only, by their summary keys."""

_JOURNALED = tuple((f.key, f.journal) for f in SUMMARY_TIMINGS)
"""Each timing's summary key and the record field it is measured in."""

MODEL_TIMINGS: tuple[Figure, ...] = (LATENCY, TTFT, ITL)
"""The timings a model's block of the summary holds."""
SPAN_TIMINGS: tuple[Figure, ...] = (LATENCY, TTFT)
"""The timings a phase's and a stage's block hold."""


class RunStats:
    """Everything the summary needs about a set of finished requests, in O(1) per record.

    `per_model`: the requests that ended on one model. Then `retried` counts only requests that
    model itself took more than one attempt at (a model that never failed shows none, whatever the
    models a request fell back from went through), and `fallbacks` counts the requests that fell
    back *from* this model (`left`, counted by `count_fallbacks`); otherwise `fallbacks` counts the
    requests that used a fallback at all.
    """

    __slots__ = (
        "attempt_errors",
        "backoff_ms",
        "backoff_requests",
        "cancelled",
        "cost",
        "error",
        "error_detail",
        "errors",
        "fell_back",
        "good",
        "input_tokens",
        "judged",
        "left",
        "media",
        "ok",
        "ok_input_tokens",
        "ok_output_tokens",
        "ok_packed",
        "ok_repacked",
        "output_tokens",
        "packs",
        "passed",
        "per_model",
        "quality",
        "reason",
        "retried",
        "timings",
        "tokens_source",
        "total",
    )

    def __init__(self, *, per_model: bool = False) -> None:
        self.per_model = per_model
        self.fell_back = 0
        """Requests counted here that moved to a fallback model on the way."""
        self.left = 0
        """Requests that fell back from this model to another (per model only)."""
        self.total = 0
        self.ok = 0
        self.error = 0
        self.cancelled = 0
        """Requests cancelled by a stop before they finished: neither ok nor an error (their records'
        `error = "cancelled"` makes `--resume` send them again), and not judged by `[slo]`."""
        self.retried = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.ok_input_tokens = 0
        self.ok_output_tokens = 0
        self.ok_packed: dict[int, int] = {}
        """Tasks that ended ok after going in a pack, by pack size (what a plan bills per request)."""
        self.ok_repacked = 0
        """Of those, tasks re-sent alone (their own request besides their share of the pack)."""
        self.cost = 0.0
        self.backoff_ms = 0.0
        self.backoff_requests = 0
        self.timings = {f.key: LogHistogram() for f in SUMMARY_TIMINGS}
        """The timings of ok requests, by their summary keys (`METRICS`)."""
        self.errors: dict[str, int] = {}
        self.error_detail: dict[str, str] = {}
        self.attempt_errors: dict[str, int] = {}
        self.tokens_source: dict[str, int] = {}
        self.judged = 0
        """Requests whose record carries `slo_ok` (`[slo]` judged them); `good`: those that met it."""
        self.good = 0
        self.packs = PackCounts()
        """Tasks sent in packs (`[packing]`): the summary's `packing` block."""
        self.reason = ReasoningStats()
        """TTFOT, reasoning and cached tokens, tool calls (`metrics/reasoning.py`)."""
        self.quality: QualityCounts | None = None
        """With `[quality]`: valid answers and the cascade (`metrics/quality.py`)."""
        self.media = MediaStats()
        """Images, audio, documents and the real-time factor (`metrics/media.py`)."""
        self.passed = 0
        """Per model: requests it answered whose answer did not stand (a cascade moved on from
        it, or it judged an answer), counted in `total` and `ok` beside the requests that ended
        here (`count_answer`)."""

    @property
    def ttft(self) -> LogHistogram:
        """The TTFT histogram (what the confidence intervals read, `metrics/confidence.py`)."""
        return self.timings[TTFT.key]

    @property
    def latency(self) -> LogHistogram:
        """The latency histogram."""
        return self.timings[LATENCY.key]

    def hist(self, metric: str) -> LogHistogram:
        """The histogram of the timing whose summary key is `metric` (one of `METRICS`)."""
        return self.timings[metric]

    def record(self, rec: RequestRecord) -> None:
        self.count(rec)
        if rec.status == "ok":
            hists = self.timings
            for key, attr in _JOURNALED:
                v = getattr(rec, attr)
                if v is not None:
                    hists[key].record(v)

    def count(self, rec: RequestRecord) -> None:
        """Everything in `record` but the timing histograms (the caller files those)."""
        self.total += 1
        if rec.models_tried and (not rec.escalations or rec.fell_back_from()):
            self.fell_back += 1
        tried = rec.model_attempts  # with a fallback: retried only where a model took 2+ attempts
        if tried:
            most = tried[-1] if self.per_model else max(tried)
        else:
            most = rec.attempts
        if most > 1:
            self.retried += 1
        self.input_tokens += rec.input_tokens
        self.output_tokens += rec.output_tokens
        self.cost += rec.cost
        src = rec.tokens_source
        self.tokens_source[src] = self.tokens_source.get(src, 0) + 1
        if rec.status == "ok":
            self.ok += 1
            self.ok_input_tokens += rec.input_tokens
            self.ok_output_tokens += rec.output_tokens
            if rec.pack is not None:
                self._bill_pack(rec)
        elif rec.error == CANCELLED:
            self.cancelled += 1
        else:
            self.error += 1
            cls = rec.error or "unknown"
            self.errors[cls] = self.errors.get(cls, 0) + 1
            if rec.error_detail and cls not in self.error_detail:
                self.error_detail[cls] = rec.error_detail  # the first says why (later ones repeat it)
        if rec.slo_ok is not None and rec.error != CANCELLED:
            self.judged += 1
            self.good += rec.slo_ok
        if rec.backoff_ms:
            self.backoff_ms += rec.backoff_ms
            self.backoff_requests += 1
        if rec.pack is not None:
            self.packs.count(rec)
        if (
            rec.ttfot_ms is not None
            or rec.cached_tokens is not None
            or rec.reasoning_tokens is not None
            or rec.tool_calls
        ):
            self.reason.count(rec)
        if rec.api is not None or rec.images_in is not None or rec.audio_in_s is not None:
            self.media.count(rec)
        judged = rec.valid is not None or rec.answers or rec.judge_error
        if judged and not self.per_model:  # the run's block, not a model's
            (self.quality or self._judged()).count(rec)
        if rec.attempt_errors:
            ae = self.attempt_errors
            for cls, n in rec.attempt_errors.items():
                ae[cls] = ae.get(cls, 0) + int(n)

    def count_answer(self, a: Mapping[str, Any]) -> None:
        """Per model: one request it answered that did not stand (an entry of a record's
        `answers`): a request it served, with its tokens, cost and timings when the entry has
        them. The record's own model paid it so far (`count_answers` moves the cost here)."""
        self.passed += 1
        self.total += 1
        self.ok += 1
        inp, out = _count(a.get("input_tokens")), _count(a.get("output_tokens"))
        self.input_tokens += inp
        self.output_tokens += out
        self.ok_input_tokens += inp
        self.ok_output_tokens += out
        self.cost += _amount(a.get("cost"))
        for f in (LATENCY, TTFT):  # what an entry of `answers` times (engine/send/cascade.py)
            v = _number(a.get(f.journal))
            if v is not None:
                self.hist(f.key).record(v)

    def _judged(self) -> QualityCounts:
        self.quality = QualityCounts()
        return self.quality

    # -- summary blocks ----------------------------------------------------------------------

    def requests_block(self) -> dict[str, int]:
        block = {
            "total": self.total,
            "ok": self.ok,
            "error": self.error,
            "cancelled": self.cancelled,
            "retried": self.retried,
            "fallbacks": self.left if self.per_model else self.fell_back,
        }
        if self.passed:  # a model of a cascade (or a judge): of `total`, the answers passed on
            block["passed_on"] = self.passed
        return block

    def backoff_block(self) -> dict[str, float]:
        """Time spent waiting between attempts: never part of `latency_ms`, reported here instead."""
        n = self.backoff_requests
        return {
            "requests": n,
            "total_s": round(self.backoff_ms / 1000.0, 3),
            "mean_ms": round(self.backoff_ms / n, 3) if n else 0.0,
        }

    def throughput_block(self, duration_s: float | None) -> dict[str, float | None]:
        """The rates over `duration_s` (0 when none passed; null for a span whose time is not
        known: a stage rebuilt from a journal)."""
        counts = ((REQUESTS_PER_S, self.ok), (OUTPUT_TOKENS_PER_S, self.ok_output_tokens))
        if duration_s is None:
            return {f.leaf: None for f, _ in counts}
        if duration_s <= 0:
            return {f.leaf: 0.0 for f, _ in counts}
        return {f.leaf: round(n / duration_s, 3) for f, n in counts}

    def _bill_pack(self, rec: RequestRecord) -> None:
        packed = self.ok_packed
        packed[rec.pack_size] = packed.get(rec.pack_size, 0) + 1
        if rec.repacked:
            self.ok_repacked += 1

    def usage(self) -> Usage:
        """What a price plan bills of these requests (`metrics/plans.py`): the HTTP requests behind
        the tasks that ended ok (a packed task is 1/pack_size of its pack's, plus its own when it
        was re-sent alone), and their tokens."""
        packed = self.ok_packed
        requests = (
            self.ok - sum(packed.values()) + self.ok_repacked + sum(n / size for size, n in packed.items())
        )
        md = self.media
        tasks = self.ok - self.passed  # the answers that did not stand are requests, not tasks
        return Usage(
            requests,
            self.ok_input_tokens,
            self.ok_output_tokens,
            self.total - self.passed,
            tasks,
            self.reason.ok_cached,
            md.billed_images,
            md.billed_audio_s,
            md.billed_chars,
        )

    def model_block(
        self,
        duration_s: float,
        slo_target: float | None = None,
        name: str = "",
        plans: Mapping[str, PricePlan] | None = None,
    ) -> dict[str, Any]:
        block = {
            "requests": self.requests_block(),
            "throughput": self.throughput_block(duration_s),
            **timing_blocks(self, MODEL_TIMINGS),
            "cost": model_cost_block(self.cost, self.total, name, self.usage(), plans),
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            **goodput_entry(self.good, self.judged, duration_s, slo_target),
            **media_entry(self.media, duration_s),
        }
        return with_reasoning(block, self.reason, self.input_tokens)


def timing(h: LogHistogram) -> dict[str, float | None]:
    """A timing block of the summary: every key present, each null when nothing was measured
    (every request failed, or no stream to time a first token in); never a made-up 0.0."""
    if h.n == 0:
        return dict.fromkeys(h.summary())
    return dict(h.summary())


def timing_blocks(stats: RunStats, figures: Iterable[Figure]) -> dict[str, dict[str, float | None]]:
    """The timing blocks of `figures` (in that order), by their summary keys."""
    return {f.key: timing(stats.hist(f.key)) for f in figures}


def count_fallbacks(rec: RequestRecord, stats_of: Callable[[str], RunStats]) -> None:
    """Count `rec` at each model it fell back from (`stats_of(name)` is that model's stats)."""
    for name in rec.fell_back_from():
        stats_of(name).left += 1


def count_answers(rec: RequestRecord, stats_of: Callable[[str], RunStats]) -> None:
    """Count each request in `rec.answers` (answers that did not stand, judge requests) at the
    model that answered it, with its cost: the record's `cost` is every model's, so its own
    model keeps only what its own answer cost. A cascade's first step then has a row counting
    every request it answered, not only those whose answer stood."""
    own = stats_of(rec.model)
    for a in rec.answers or ():
        name = a.get("model")
        if isinstance(name, str):
            own.cost -= _amount(a.get("cost"))
            stats_of(name).count_answer(a)


def _count(v: Any) -> int:
    return v if type(v) is int and v >= 0 else 0


def _number(v: Any) -> float | None:
    """`v` when it is a finite number >= 0 (a journal's entry is read, not trusted), else None."""
    return float(v) if type(v) in (int, float) and 0 <= v < math.inf else None


def _amount(v: Any) -> float:
    return _number(v) or 0.0


class Tally:
    """The whole run's and each model's figures from finished records, counted as the live
    collector counts them: per-model retries, and a fallback charged to each model it left. What
    `oxconsole report` and a run whose journal failed both rebuild a summary from."""

    def __init__(self) -> None:
        self.overall = RunStats()
        self.models: dict[str, RunStats] = {}

    def of(self, model: str) -> RunStats:
        st = self.models.get(model)
        if st is None:
            st = self.models[model] = RunStats(per_model=True)
        return st

    def count(self, rec: RequestRecord) -> None:
        if rec.warmup:  # [[stages]] warm-up: journaled, left out of the figures
            return
        self.overall.record(rec)
        self.of(rec.model).record(rec)
        if rec.models_tried:
            count_fallbacks(rec, self.of)
        if rec.answers:
            count_answers(rec, self.of)


def iso_time(unix: float) -> str:
    """ISO-8601 in UTC with milliseconds, e.g. ``2025-01-31T12:00:00.123+00:00``."""
    return datetime.fromtimestamp(unix, tz=UTC).isoformat(timespec="milliseconds")


def phase_summary(
    stats: RunStats,
    t_start: float,
    t_end: float,
    settings: Sequence[Mapping[str, Any]],
    slo_target: float | None = None,
) -> dict[str, Any]:
    block = {
        "t_start": round(t_start, 3),
        "t_end": round(t_end, 3),
        "settings": [dict(c) for c in settings],
        "requests": stats.requests_block(),
        "throughput": stats.throughput_block(t_end - t_start),
        **timing_blocks(stats, SPAN_TIMINGS),
        **goodput_entry(stats.good, stats.judged, t_end - t_start, slo_target),
        **quality_entry(stats.quality),
        **media_entry(stats.media, t_end - t_start),
    }
    return with_reasoning(block, stats.reason, stats.input_tokens)


def error_details(final: Mapping[str, str], attempts: Mapping[str, str] | None = None) -> dict[str, str]:
    """The first detail of each error class, by class: the detail of the first request that ended
    in it, else of the first failed attempt (a hint such as "is base_url missing /v1?" is in it)."""
    out = {cls: d for cls, d in (attempts or {}).items() if d}
    out.update((cls, d) for cls, d in final.items() if d)
    return dict(sorted(out.items()))


def build_summary(
    *,
    name: str,
    started_at: float,
    duration_s: float,
    overall: RunStats,
    models: Iterable[tuple[str, RunStats]],
    changes: Sequence[Mapping[str, Any]],
    phases: Sequence[Mapping[str, Any]],
    live_attempt_errors: Mapping[str, int] | None = None,
    attempt_details: Mapping[str, str] | None = None,
    sessions: int = 1,
    slo_target: float | None = None,
    plans: Mapping[str, PricePlan] | None = None,
    packing_size: int | None = None,
) -> dict[str, Any]:
    """The summary object of the contract (plus ``attempt_errors``, ``error_details``, ``phases``).

    ``models`` with no finished request are left out (unless requests fell back from them), so a
    live summary and one rebuilt from the journal list the same models. ``attempt_details`` are the
    first details of failed attempts (the journal does not keep them), used for classes no request
    ended in. ``sessions``: how many sessions wrote the requests counted (a live collector's are
    one session's). ``slo_target``: the `[slo]` target, for each `goodput` block (metrics/goodput.py).
    ``plans``: what-if price plans, priced in ``cost.plans`` (`metrics/plans.py`).
    ``packing_size``: the run's `[packing] size` (None: the largest pack recorded).
    """
    models = [(m, st) for m, st in models if st.total or st.left]
    attempt_errors = dict(overall.attempt_errors)
    for cls, n in (live_attempt_errors or {}).items():
        if n:
            attempt_errors[cls] = attempt_errors.get(cls, 0) + n
    src = overall.tokens_source
    usage = {m: st.usage() for m, st in models}
    cost = cost_block(overall.cost, overall.total, usage, plans)
    add_per_valid(cost, overall.quality)
    summary = {
        "name": name,
        "started_at": iso_time(started_at),
        "duration_s": round(duration_s, 3),
        "requests": {**overall.requests_block(), "sessions": sessions},
        "throughput": overall.throughput_block(duration_s),
        **goodput_entry(overall.good, overall.judged, duration_s, slo_target),
        **timing_blocks(overall, SUMMARY_TIMINGS),
        "tokens": {"input": overall.input_tokens, "output": overall.output_tokens},
        "tokens_source": {"usage": src.get("usage", 0), "estimate": src.get("estimate", 0)},
        "cost": cost,
        "errors": dict(sorted(overall.errors.items())),
        "attempt_errors": dict(sorted(attempt_errors.items())),
        "error_details": error_details(overall.error_detail, attempt_details),
        "backoff": overall.backoff_block(),
        "models": {m: st.model_block(duration_s, slo_target, m, plans) for m, st in models},
        "changes": [dict(c) for c in changes],
        "phases": [dict(p) for p in phases],
        **packing_block(overall.packs, overall.total, packing_size),
        **quality_entry(overall.quality),
        **media_entry(overall.media, duration_s),
    }
    return with_reasoning(summary, overall.reason, overall.input_tokens)
