"""Immutable snapshots of a run: what the console (and `oxconsole attach`) renders.

Why this module exists: the engine and the console run on different threads (or processes, when
attached). Handing the UI a frozen value built fresh on demand means it can never see a
half-updated counter or hold a lock the engine needs; `to_dict`/`from_dict` let the same value
cross a socket as JSON. Nothing here is shared with the collector after it is built: mappings are
fresh dicts typed read-only, sequences are tuples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from oxconsole.base.figures import (
    COST,
    LATENCY,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    SUMMARY_TIMINGS,
    TOKENS_IN,
    TOKENS_OUT,
    TTFT,
)
from oxconsole.metrics.goodput import Goodput
from oxconsole.metrics.media import MediaLive
from oxconsole.metrics.reasoning import ReasoningLive

__all__ = [
    "Bins",
    "Counts",
    "ErrorStat",
    "Gauges",
    "ModelGauge",
    "ModelStats",
    "PlanCost",
    "Series",
    "Snapshot",
]

Bins = tuple[tuple[float, float, int], ...]
"""Coarse histogram bins: (lo, hi, count), log-spaced."""


@dataclass(frozen=True, slots=True)
class ModelGauge:
    """A model's live routing state, as the engine sees it."""

    weight: float
    enabled: bool
    in_flight: int
    cooled_down: bool = False


@dataclass(frozen=True, slots=True)
class Gauges:
    """The engine's instantaneous state; the engine fills it, the collector passes it through."""

    state: str  # "starting" | "running" | "paused" | "draining" | "done"
    elapsed_s: float
    total_expected: int | None
    dispatched: int
    in_flight: int
    waiting_slot: int
    waiting_bucket: int
    backing_off: int
    concurrency: int
    rate: float  # requests/s; 0 = unlimited
    achieved_rate: float  # dispatches/s over the last few seconds
    loop_lag_ms: float
    models: Mapping[str, ModelGauge] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    """What the engine warned about so far (open-files limit, TLS off, resume notes...)."""
    tpm: float = 0.0
    """The token budget: tokens per minute for the whole run; 0 = none."""
    tpm_used: float = 0.0
    """Tokens in the budget's current window (the last minute's sends: finished requests at their
    actual usage, requests in flight at their reservation)."""
    waiting_tpm: int = 0
    """Requests waiting for the token budget (also counted in `waiting_bucket`)."""
    auto: bool = False
    """The concurrency is set by the auto controller (`run.concurrency = "auto"`, key `a`)."""
    ratelimit: Mapping[str, Mapping[str, Any]] | None = None
    """Endpoint -> its provider rate-limit figures (`metrics/ratelimit.py`); None = none heard."""
    server: Mapping[str, Mapping[str, Any]] | None = None
    """Endpoint -> what its server says of itself now (`metrics/server/live.py`: running, waiting,
    kv_usage, ..., `queued_share`, `age_s`); None = no server's metrics asked for."""
    gpus: Mapping[str, Mapping[str, float]] | None = None
    """GPU -> its DCGM figures now (`gpu_util` %, `gpu_mem_used_mb`, `gpu_power_w`); None = none."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gauges:
        te = d.get("total_expected")
        return cls(
            state=str(d["state"]),
            elapsed_s=float(d["elapsed_s"]),
            total_expected=None if te is None else int(te),
            dispatched=int(d["dispatched"]),
            in_flight=int(d["in_flight"]),
            waiting_slot=int(d["waiting_slot"]),
            waiting_bucket=int(d["waiting_bucket"]),
            backing_off=int(d["backing_off"]),
            concurrency=int(d["concurrency"]),
            rate=float(d["rate"]),
            achieved_rate=float(d["achieved_rate"]),
            loop_lag_ms=float(d["loop_lag_ms"]),
            models={k: ModelGauge(**v) for k, v in d.get("models", {}).items()},
            warnings=tuple(str(w) for w in d.get("warnings", ())),
            tpm=float(d.get("tpm", 0.0)),
            tpm_used=float(d.get("tpm_used", 0.0)),
            waiting_tpm=int(d.get("waiting_tpm", 0)),
            auto=bool(d.get("auto", False)),
            ratelimit=d.get("ratelimit"),
            server=_mapping(d.get("server")),
            gpus=_mapping(d.get("gpus")),
        )


def _mapping(v: Any) -> Any:
    """A mapping of mappings as it came over the socket; anything else (an older engine's, a
    damaged message) as none."""
    if isinstance(v, Mapping) and all(isinstance(x, Mapping) for x in v.values()):
        return v
    return None


@dataclass(frozen=True, slots=True)
class Counts:
    total: int = 0
    ok: int = 0
    error: int = 0
    retried: int = 0


@dataclass(frozen=True, slots=True)
class ErrorStat:
    count: int
    detail: str
    """The latest detail seen for this class."""


@dataclass(frozen=True, slots=True)
class ModelStats:
    """One model's figures: whole run, plus ok/error and req/s over the rolling window."""

    name: str
    gauge: ModelGauge | None
    counts: Counts
    ok_10s: int
    error_10s: int
    req_per_s_10s: float
    share: float
    """This model's fraction of all finished requests (compare with its weight)."""
    latency_p50: float
    latency_p99: float
    ttft_p50: float
    ttft_p99: float
    input_tokens: int
    output_tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class PlanCost:
    """One what-if price plan's figures now (`metrics/plans.py` prices them)."""

    name: str
    total: float
    """The requests finished so far at the plan's prices (errors cost nothing)."""
    per_task: float
    """`total` over the requests finished (tasks)."""
    projected: float | None
    """At the current pace, for the whole workload; None when its size is unknown."""


@dataclass(frozen=True, slots=True)
class Series:
    """Per-second throughput for completed seconds ``start_s .. start_s + len - 1``."""

    start_s: int = 0
    req_per_s: tuple[float, ...] = ()
    output_tokens_per_s: tuple[float, ...] = ()
    errors_per_s: tuple[float, ...] = ()
    markers: tuple[float, ...] = ()
    """``t`` (seconds since start) of each change, to draw on the series."""


_SERIES = ("req_per_s", "output_tokens_per_s", "errors_per_s", "markers")
"""`Series`' fields after `start_s`, in order, as the socket's JSON names them."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The whole run at one instant. Summaries are ``{"mean","p50","p90","p95","p99","max"}``
    per metric (``latency_ms``, ``ttft_ms``, ``itl_ms``, ``queue_ms``), over ok requests."""

    gauges: Gauges
    elapsed_s: float
    counts: Counts
    input_tokens: int
    output_tokens: int
    tokens_estimated: int
    """Finished requests whose token counts are estimates (no ``usage`` in the response)."""
    cost: float
    projected_cost: float | None
    """Cost once ``total_expected`` requests are done, at the rates seen so far; None if unknown."""
    req_per_s: float
    output_tokens_per_s: float
    req_per_s_10s: float
    output_tokens_per_s_10s: float
    errors_per_s_10s: float
    run: Mapping[str, Mapping[str, float]]
    phase: Mapping[str, Mapping[str, float]]
    window: Mapping[str, Mapping[str, float]]
    """Over the last ``window_s`` seconds (locust's "current")."""
    window_s: int
    bins_run: Mapping[str, Bins]
    bins_window: Mapping[str, Bins]
    phase_index: int
    phase_t_start: float
    phase_settings: tuple[Mapping[str, Any], ...]
    phase_counts: Counts
    phase_req_per_s: float
    models: tuple[ModelStats, ...]
    series: Series
    errors: Mapping[str, ErrorStat]
    attempt_errors: Mapping[str, int]
    error_details: Mapping[str, str]
    """The first detail of each error class, final or retried (the summary's ``error_details``)."""
    changes: tuple[Mapping[str, Any], ...]
    goodput: Goodput | None = None
    """Good requests against the `[slo]` (metrics/goodput.py); None when the run has no SLO."""
    stage: Mapping[str, Any] | None = None
    """With [[stages]]: the stage now, {"index", "count", "t_start", "duration_s", "warmup", "ramp",
    "total_s"} (`metrics/stages.StageLog.now`); None without stages."""
    plans: tuple[PlanCost, ...] = ()
    """Each [plans.NAME] what-if plan, in the workload's order (none without plans)."""
    packing: Mapping[str, float] | None = None
    """With `[packing]`: size, requests_sent, repacked and tasks (the summary's block, live)."""
    sweep: Mapping[str, Any] | None = None
    """In `oxconsole sweep`: where the sweep is, {"key", "index", "count" (None for a search),
    "value", "eta_s", "point_s", "knee", "done": [{"index", "value", "req_per_s", "goodput_per_s",
    "p99_ms", "slo_met"}], "locked", "held"} (`sweep/gauge.py`); None outside a sweep."""
    bursts: Mapping[str, Any] | None = None
    """{"step": the last step's figures so far (`metrics/stepresponse.py`) or None, "lag": {"p50", "p99",
    "within_10ms"} of an open-loop run's sends against their due times (`metrics/due.py`) or None};
    None when the run has neither."""
    reasoning: ReasoningLive | None = None
    """TTFOT, reasoning share of output, cache hit rate (`metrics/reasoning.py`); None when no
    record carried reasoning, cached tokens or tool calls."""
    quality: Mapping[str, Any] | None = None
    """With `[quality]`: valid answers so far, per model asked, escalations and the cascade's steps
    in force (`metrics/quality.live_quality`); None without."""
    media: MediaLive | None = None
    """Images and audio per second, the real-time factor (`metrics/media.py`); None when no record
    carried a media key."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (dicts, lists, str, int, float, bool, None); orjson-ready."""
        out = _plain(self)
        assert isinstance(out, dict)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        def summaries(m: Mapping[str, Any]) -> dict[str, dict[str, float]]:
            return {k: {kk: float(vv) for kk, vv in v.items()} for k, v in m.items()}

        def bins(m: Mapping[str, Any]) -> dict[str, Bins]:
            return {k: tuple((float(lo), float(hi), int(c)) for lo, hi, c in v) for k, v in m.items()}

        def model(m: Mapping[str, Any]) -> ModelStats:
            kw = dict(m)
            kw["gauge"] = None if m["gauge"] is None else ModelGauge(**m["gauge"])
            kw["counts"] = Counts(**m["counts"])
            return ModelStats(**kw)

        s = d["series"]
        pc = d.get("projected_cost")
        return cls(
            gauges=Gauges.from_dict(d["gauges"]),
            elapsed_s=float(d["elapsed_s"]),
            counts=Counts(**d["counts"]),
            input_tokens=int(d["input_tokens"]),
            output_tokens=int(d["output_tokens"]),
            tokens_estimated=int(d["tokens_estimated"]),
            cost=float(d["cost"]),
            projected_cost=None if pc is None else float(pc),
            req_per_s=float(d["req_per_s"]),
            output_tokens_per_s=float(d["output_tokens_per_s"]),
            req_per_s_10s=float(d["req_per_s_10s"]),
            output_tokens_per_s_10s=float(d["output_tokens_per_s_10s"]),
            errors_per_s_10s=float(d["errors_per_s_10s"]),
            run=summaries(d["run"]),
            phase=summaries(d["phase"]),
            window=summaries(d["window"]),
            window_s=int(d["window_s"]),
            bins_run=bins(d["bins_run"]),
            bins_window=bins(d["bins_window"]),
            phase_index=int(d["phase_index"]),
            phase_t_start=float(d["phase_t_start"]),
            phase_settings=tuple(dict(c) for c in d["phase_settings"]),
            phase_counts=Counts(**d["phase_counts"]),
            phase_req_per_s=float(d["phase_req_per_s"]),
            models=tuple(model(m) for m in d["models"]),
            series=Series(int(s["start_s"]), *(tuple(s[k]) for k in _SERIES)),
            errors={k: ErrorStat(**v) for k, v in d["errors"].items()},
            attempt_errors={k: int(v) for k, v in d["attempt_errors"].items()},
            error_details={k: str(v) for k, v in d.get("error_details", {}).items()},
            changes=tuple(dict(c) for c in d["changes"]),
            goodput=Goodput.from_dict(d.get("goodput")),
            stage=d.get("stage"),
            plans=tuple(_plan_cost(p) for p in d.get("plans") or ()),
            packing=d.get("packing"),
            sweep=d.get("sweep"),
            bursts=d.get("bursts"),
            reasoning=ReasoningLive.from_dict(d.get("reasoning")),
            quality=d.get("quality"),
            media=MediaLive.from_dict(d.get("media")),
        )

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Snapshot:
        """The end of a run as far as its summary tells it: counts, timings, models, errors and
        changes, the cascade's figures, in state "done". What a summary does not keep is left
        empty: the live settings (``gauges.concurrency`` is 0, no model gauges), the per-second
        series, histogram bins and the last-10-s figures. For a console that opens on a run already over."""
        get = partial(_at, summary)
        total = _counts(summary.get("requests"))
        duration = float(summary.get("duration_s") or 0.0)
        # a timing with nothing measured (every request failed) is null in a summary: left out here
        run = {m: {k: float(v) for k, v in (summary.get(m) or {}).items() if v is not None} for m in _METRICS}
        phases = summary.get("phases") or [{}]
        last = phases[-1]
        details = {str(k): str(v) for k, v in (summary.get("error_details") or {}).items()}
        models = tuple(
            _model_from_summary(str(n), m, total.total) for n, m in (summary.get("models") or {}).items()
        )
        return cls(
            gauges=Gauges("done", duration, total.total, total.total, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0),
            elapsed_s=duration,
            counts=total,
            input_tokens=int(TOKENS_IN.value(summary) or 0),
            output_tokens=int(TOKENS_OUT.value(summary) or 0),
            tokens_estimated=int(get("tokens_source", "estimate") or 0),
            cost=COST.value(summary) or 0.0,
            projected_cost=None,
            req_per_s=REQUESTS_PER_S.value(summary) or 0.0,
            output_tokens_per_s=OUTPUT_TOKENS_PER_S.value(summary) or 0.0,
            req_per_s_10s=0.0,
            output_tokens_per_s_10s=0.0,
            errors_per_s_10s=0.0,
            run=run,
            phase={m: _figures(last[m]) for m in _METRICS if isinstance(last.get(m), Mapping)},
            window={},
            window_s=0,
            bins_run={},
            bins_window={},
            phase_index=max(0, len(phases) - 1),
            phase_t_start=float(last.get("t_start") or 0.0),
            phase_settings=tuple(dict(c) for c in last.get("settings") or ()),
            phase_counts=_counts(last.get("requests")),
            phase_req_per_s=REQUESTS_PER_S.value(last) or 0.0,
            models=models,
            series=Series(),
            errors={
                str(k): ErrorStat(int(n), details.get(str(k), ""))
                for k, n in (summary.get("errors") or {}).items()
            },
            attempt_errors={str(k): int(n) for k, n in (summary.get("attempt_errors") or {}).items()},
            error_details=details,
            changes=tuple(dict(c) for c in summary.get("changes") or ()),
            goodput=Goodput.from_summary(summary),
            plans=tuple(
                _plan_cost({"name": n, **p})
                for n, p in (get("cost", "plans") or {}).items()
                if isinstance(p, Mapping)
            ),
            reasoning=ReasoningLive.from_summary(summary),
            quality=_quality_from_summary(summary),
            media=MediaLive.from_summary(summary),
        )


_METRICS = tuple(f.key for f in SUMMARY_TIMINGS)
"""The timing summaries a snapshot carries (as `metrics.aggregate.METRICS`, not imported: this
module imports nothing of the collector's)."""


def _quality_from_summary(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The snapshot's `quality` (as `metrics/quality.live_quality` gives it) from a finished run's
    summary, for a console opened on a run already over; None without a `quality` block. (Here and
    not in metrics/quality.py, which imports what imports this module.) The steps in force are the
    summary's `cascade.steps`; a summary written before that key gives them by the last cascade
    change, else by the models asked, most asked first (each step is asked only about what the
    steps before it got wrong)."""
    q, c = summary.get("quality"), summary.get("cascade")
    if not isinstance(q, Mapping):
        return None
    c = c if isinstance(c, Mapping) else {}
    final_block = c.get("final")
    final: Mapping[str, Any] = final_block if isinstance(final_block, Mapping) else {}
    asked = {str(n): m for n, m in (q.get("models") or {}).items() if isinstance(m, Mapping)}
    given = c.get("steps")
    steps: list[str] | None = [str(m) for m in given] if isinstance(given, list) else None
    if steps is None:  # a summary written before `cascade.steps`: the last cascade change's
        changed = [ch.get("to") for ch in summary.get("changes") or () if ch.get("what") == "cascade"]
        steps = [str(m) for m in changed[-1]] if changed and isinstance(changed[-1], list) else None
    if steps is None:
        steps = sorted(asked, key=lambda n: (-_count(asked[n].get("asked")), n))
    return quality_view(
        judged=_count(q.get("judged")),
        valid=_count(q.get("valid")),
        fraction=float(q.get("fraction") or 0.0),
        escalated=_count(c.get("escalated")),
        steps=steps,
        models=[
            (name, _count(m.get("asked")), _count(m.get("valid")), float(m.get("fraction") or 0.0))
            for name, m in asked.items()
        ],
        stood={str(n): _count(v) for n, v in final.items()},
    )


def quality_view(
    *,
    judged: int,
    valid: int,
    fraction: float,
    escalated: int,
    steps: Sequence[str],
    models: Iterable[tuple[str, int, int, float]],
    stood: Mapping[str, int],
) -> dict[str, Any]:
    """The snapshot's `quality`, live (`metrics/quality.live_quality`) or from a summary: the
    run's figures, the steps in force, and each model's (name, asked, valid, fraction) in the
    cascade's order, then the others, with its escalations: its answers that did not stand."""
    order = {name: i for i, name in enumerate(steps)}
    return {
        "judged": judged,
        "valid": valid,
        "fraction": fraction,
        "escalated": escalated,
        "steps": list(steps),
        "models": {
            name: {"asked": n, "valid": ok, "fraction": share, "escalated": max(0, n - stood.get(name, 0))}
            for name, n, ok, share in sorted(models, key=lambda m: (order.get(m[0], len(order)), m[0]))
        },
    }


def _count(v: Any) -> int:
    return v if type(v) is int and v >= 0 else 0


def _plan_cost(d: Mapping[str, Any]) -> PlanCost:
    """A plan's figures from a snapshot's or a summary's JSON."""
    pr = d.get("projected")
    return PlanCost(
        name=str(d["name"]),
        total=float(d.get("total") or 0.0),
        per_task=float(d.get("per_task") or 0.0),
        projected=None if pr is None else float(pr),
    )


def _figures(timing: Mapping[str, Any] | None) -> dict[str, float]:
    """A summary's timing block as figures; those it has no value for (null: nothing measured,
    as when every request failed) are left out."""
    return {k: float(v) for k, v in (timing or {}).items() if v is not None}


def _at(d: Mapping[str, Any], *keys: str) -> Any:
    """``d[k1][k2]...``, or None where a level is missing."""
    cur: Any = d
    for k in keys:
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return cur


def _counts(d: Any) -> Counts:
    """A summary's ``requests`` block as Counts (missing figures 0)."""
    d = d if isinstance(d, Mapping) else {}
    return Counts(*(int(d.get(k) or 0) for k in ("total", "ok", "error", "retried")))


def _model_from_summary(name: str, m: Mapping[str, Any], run_total: int) -> ModelStats:
    """One model's block of a summary as the row a snapshot would carry (no live gauge)."""
    c = _counts(m.get("requests"))
    lat, ttft = LATENCY.of(m) or {}, TTFT.of(m) or {}
    return ModelStats(
        name=name,
        gauge=None,
        counts=c,
        ok_10s=0,
        error_10s=0,
        req_per_s_10s=0.0,
        share=round(c.total / run_total, 4) if run_total else 0.0,
        latency_p50=float(lat.get("p50") or 0.0),
        latency_p99=float(lat.get("p99") or 0.0),
        ttft_p50=float(ttft.get("p50") or 0.0),
        ttft_p99=float(ttft.get("p99") or 0.0),
        input_tokens=int(TOKENS_IN.value(m) or 0),
        output_tokens=int(TOKENS_OUT.value(m) or 0),
        cost=COST.value(m) or 0.0,
    )


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v
