"""The live metrics collector: the engine records into it, the console pulls snapshots from it.

Why this module exists: the engine must account for each finished request in O(1) and move on,
while the console wants rich, consistent views (whole run, current phase, last 10 s, per model)
several times a second. The collector keeps only counters, histograms and fixed-size rings, and
builds an immutable `Snapshot` only when asked. Each control change (concurrency, rate, weight,
...) starts a new phase, so the console can show what that change did and the summary can list
the figures of each phase.

Not thread-safe by itself: call it from the engine's loop (the console asks the engine for
snapshots, or the engine publishes them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oxconsole.base.figures import ITL, LATENCY, QUEUE, TTFT
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.aggregate import (
    CANCELLED,
    METRICS,
    RunStats,
    build_summary,
    count_answers,
    count_fallbacks,
    error_details,
    phase_summary,
)
from oxconsole.metrics.confidence import Confidence, run_blocks
from oxconsole.metrics.due import DueStats
from oxconsole.metrics.goodput import Goodput
from oxconsole.metrics.histogram import LogHistogram, record_into
from oxconsole.metrics.media import MediaLive
from oxconsole.metrics.packing import live_packing
from oxconsole.metrics.plans import PlanCost, Usage, plan_costs, project
from oxconsole.metrics.quality import live_quality, with_steps
from oxconsole.metrics.reasoning import ReasoningLive
from oxconsole.metrics.settle import SETTLE_TOLERANCE
from oxconsole.metrics.snapshot import (
    Bins,
    Counts,
    ErrorStat,
    Gauges,
    ModelStats,
    Series,
    Snapshot,
)
from oxconsole.metrics.stages import StageLog, fold_change
from oxconsole.metrics.steady import Timeline
from oxconsole.metrics.stepresponse import StepTracker
from oxconsole.metrics.window import RollingHistogram, SecondSeries

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = ["Collector"]

Prices = tuple[float, float, float]
"""(per_request, per_1m_input, per_1m_output)"""

_Targets = tuple[
    "_ModelAcc",
    tuple[LogHistogram, ...],
    tuple[LogHistogram, ...],
    tuple[LogHistogram, ...],
    tuple[LogHistogram, ...],
]

RECORDED = (LATENCY, TTFT, ITL, QUEUE)
"""The timings `record` files, in the order of its targets (`_Targets`): one line each in its
hot path rather than a loop, so a timing added to the summary's must be added there too (a test
holds `RECORDED` to `metrics.aggregate.METRICS`)."""

PHASE_FOLD_S = 1.0
"""Changes this soon after the previous one, before any request finished, join its phase."""


class _ModelAcc:
    __slots__ = ("err_s", "ok_s", "stats")

    def __init__(self, ring: int) -> None:
        self.stats = RunStats(per_model=True)
        self.ok_s = SecondSeries(ring)
        self.err_s = SecondSeries(ring)


class Collector:
    """Accumulates finished requests; hands out snapshots and the final summary."""

    packing_size = 1
    """The run's `[packing] size` (set by the engine): tasks per request, for the summary."""
    cascade: tuple[str, ...] | None = None
    """With `[quality]` (set by the engine): the cascade's steps in force, kept by its changes."""

    def __init__(
        self,
        model_names: Sequence[str],
        started_at: float,
        prices: dict[str, tuple[float, float, float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        window_s: int = 10,
        series_s: int = 300,
        ring_s: int = 600,
        slo_target: float | None = None,
        plans: Mapping[str, PricePlan] | None = None,
        settle_tolerance: float = SETTLE_TOLERANCE,
    ) -> None:
        self.started_at = started_at
        self.slo_target = slo_target
        """The `[slo]` target (None: no SLO), for the goodput blocks and the snapshot's goodput."""
        self._plans = dict(plans or {})
        self._clock = clock
        self._t0 = clock()
        self._prices = dict(prices or {})
        self._window_s = window_s
        self._series_s = min(series_s, ring_s)
        self._all = RunStats()
        self._models: dict[str, _ModelAcc] = {}
        for m in model_names:
            self._model(m)
        self._roll = {m: RollingHistogram(window_s) for m in METRICS}
        self._ok_s = SecondSeries(ring_s)
        self._out_s = SecondSeries(ring_s)
        self._err_s = SecondSeries(ring_s)
        self._good_s = SecondSeries(ring_s)
        self._live_attempts: dict[str, int] = {}
        self._targets: dict[str, _Targets] = {}
        self._targets_sec = -1
        self._attempt_detail: dict[str, str] = {}
        self.changes: list[dict[str, Any]] = []
        self._phase = self._all  # until the first change; then a RunStats of its own
        self._phase_t = 0.0
        self._phase_settings: list[dict[str, Any]] = []
        self._phases: list[dict[str, Any]] = []
        self.stage_log = StageLog()
        """[[stages]]: each stage's figures; warm-up records are counted there only."""
        self.steps = StepTracker()
        """Changes that at least double concurrency or rate, and what they did to TTFT."""
        self.due: DueStats | None = None
        """Open-loop runs (set by the engine): the figures from each request's due time."""
        self.confidence = Confidence(self._all, settle_tolerance)
        """The run's and its phase's intervals and settledness, by each request's end time."""
        self.timeline = Timeline()
        """Requests in flight per second, for the summary's `steady` window."""

    def _model(self, name: str) -> _ModelAcc:
        acc = self._models.get(name)
        if acc is None:
            acc = self._models[name] = _ModelAcc(max(2 * self._window_s, 16))
        return acc

    def elapsed(self) -> float:
        """Seconds since the collector was created (the run's start), on its clock."""
        return self._clock() - self._t0

    # -- engine side -------------------------------------------------------------------------

    def record(self, rec: RequestRecord) -> None:
        """A finished request (final attempt). O(1): ~8 µs."""
        if rec.status == "ok":
            self.steps.sample(rec.t_sent, rec.ttft_ms, rec.model)
        if rec.stage is not None:
            self.stage_log.record(rec)
            if rec.warmup:
                return
        if self.due is not None:
            self.due.record(rec)
        sent = rec.t_sent - self.started_at
        end = sent + (rec.latency_ms or 0.0) / 1000.0  # binned by its end, as a journal's replay is
        ok = rec.status == "ok"
        self.confidence.record(end, ok)  # before it is counted: a second is judged on those before
        self.timeline.add(sent, end, ok, rec.output_tokens)
        sec = int(self._clock() - self._t0)
        if sec < 0:
            sec = 0
        if sec != self._targets_sec:
            self._targets.clear()
            self._targets_sec = sec
        t = self._targets.get(rec.model)
        if t is None:
            t = self._targets_for(rec.model, sec)
        acc, lat, ttft, itl, queue = t
        self._all.count(rec)
        acc.stats.count(rec)
        ph = self._phase
        if ph is not self._all:  # until the first change the phase is the whole run
            ph.count(rec)
        if rec.models_tried:
            count_fallbacks(rec, self._model_stats_of)
        if rec.answers:  # each model that answered counts it, a cascade's first step included
            count_answers(rec, self._model_stats_of)
            for a in rec.answers:
                name = a.get("model")
                if isinstance(name, str):
                    self._model(name).ok_s.add(sec)
        if rec.slo_ok:
            self._good_s.add(sec)
        if rec.status == "ok":
            acc.ok_s.add(sec)
            self._ok_s.add(sec)
            self._out_s.add(sec, rec.output_tokens)
            # each value goes to run, model, phase and the rolling window (its second + merge)
            v = rec.latency_ms
            if v is not None:
                record_into(lat, v)
            v = rec.ttft_ms
            if v is not None:
                record_into(ttft, v)
            v = rec.itl_ms
            if v is not None:
                record_into(itl, v)
            record_into(queue, rec.queue_ms)
        elif rec.error != CANCELLED:  # a stop's cancellation is not an error of the server's
            acc.err_s.add(sec)
            self._err_s.add(sec)
        if rec.attempt_errors and self._live_attempts:
            # these attempts were (probably) counted live already: move them from live to final
            live = self._live_attempts
            for cls, n in rec.attempt_errors.items():
                left = live.get(cls, 0)
                if left:
                    live[cls] = left - min(left, int(n))

    def _model_stats_of(self, name: str) -> RunStats:
        return self._model(name).stats

    def _targets_for(self, model: str, sec: int) -> _Targets:
        """The model's accumulator and, per timing metric, the histograms a value of ``sec`` goes
        to; kept until the second or the phase changes."""
        acc = self._models.get(model) or self._model(model)
        run, st, ph = self._all, acc.stats, self._phase
        stats = (run, st) if ph is run else (run, st, ph)
        lat, ttft, itl, queue = (
            (*(x.timings[key] for x in stats), *self._roll[key].targets(sec))
            for key in (f.key for f in RECORDED)
        )
        t: _Targets = (acc, lat, ttft, itl, queue)
        self._targets[model] = t
        return t

    def record_attempt_error(self, model: str, error_class: str, detail: str) -> None:
        """A failed attempt that will be retried (or fall back); counted in attempt_errors now.

        When the request finishes, its record's ``attempt_errors`` replaces these live counts,
        so an attempt is never counted twice.
        """
        self._live_attempts[error_class] = self._live_attempts.get(error_class, 0) + 1
        if detail and error_class not in self._attempt_detail:  # the first says why
            self._attempt_detail[error_class] = f"{model}: {detail}" if model else detail

    @property
    def phase_index(self) -> int:
        """The current phase's place in the summary's `phases` (0 until a change starts another)."""
        return len(self._phases)

    def change(
        self, t: float, what: str, frm: Any, to: Any, model: str | None = None, by: str = "command"
    ) -> None:
        """Log a control change at ``t`` seconds since start, made ``by`` a key, a command, a stage
        or the auto controller, and start a new phase."""
        in_force = self.cascade  # the steps of the phase this change may end
        if what == "cascade" and isinstance(to, list | tuple):
            self.cascade = tuple(to)
        c: dict[str, Any] = {"t": round(t, 3), "what": what, "from": frm, "to": to}
        if model is not None:
            c["model"] = model
        c["by"] = by
        self.changes.append(c)
        self.steps.change(c, self.started_at + t)
        since = t - self._phase_t
        if fold_change(
            c, self._phase.total, since, PHASE_FOLD_S, bool(self._phase_settings), bool(self._phases)
        ):
            self._phase_settings.append(c)  # e.g. several weights edited at once: one phase
            return
        ended = phase_summary(self._phase, self._phase_t, t, self._phase_settings, self.slo_target)
        self._phases.append(with_steps({**ended, **self.confidence.phase.block(t)}, in_force))
        self._phase = RunStats()
        self.confidence.new_phase(self._phase, t)
        self._targets.clear()
        self._phase_t = t
        self._phase_settings = [c]

    # -- console side ------------------------------------------------------------------------

    def snapshot(self, g: Gauges, *, bins: int = 24) -> Snapshot:
        """The run now, as an immutable value (~100 µs for a few models)."""
        now = max(0.0, self._clock() - self._t0)
        sec = int(now)
        w = self._window_s
        w_start = max(0, sec - w + 1)
        span = max(now - w_start, 1e-3)
        run_span = max(now, 1e-3)
        al = self._all
        window_h = {m: r.view(sec) for m, r in self._roll.items()}
        run_h = {m: al.hist(m) for m in METRICS}
        run = {m: h.summary() for m, h in run_h.items()}
        ph = self._phase
        return Snapshot(
            gauges=g,
            elapsed_s=round(now, 3),
            counts=Counts(al.total, al.ok, al.error, al.retried),
            input_tokens=al.input_tokens,
            output_tokens=al.output_tokens,
            tokens_estimated=al.tokens_source.get("estimate", 0),
            cost=al.cost,
            projected_cost=self._projected_cost(g),
            plans=self._plan_costs(g),
            req_per_s=round(al.ok / run_span, 3),
            output_tokens_per_s=round(al.ok_output_tokens / run_span, 3),
            req_per_s_10s=round(self._ok_s.total(w_start, sec) / span, 3),
            output_tokens_per_s_10s=round(self._out_s.total(w_start, sec) / span, 3),
            errors_per_s_10s=round(self._err_s.total(w_start, sec) / span, 3),
            run=run,
            phase=self._phase_figures(run),
            window={m: h.summary() for m, h in window_h.items()},
            window_s=w,
            bins_run=_bins(run_h, bins),
            bins_window=_bins(window_h, bins),
            phase_index=len(self._phases),
            phase_t_start=self._phase_t,
            phase_settings=tuple(dict(c) for c in self._phase_settings),
            phase_counts=Counts(ph.total, ph.ok, ph.error, ph.retried),
            phase_req_per_s=round(ph.ok / max(now - self._phase_t, 1e-3), 3),
            models=self._model_stats(g, w_start, sec, span),
            series=self._series(sec),
            errors={cls: ErrorStat(n, al.error_detail.get(cls, "")) for cls, n in sorted(al.errors.items())},
            attempt_errors=self._attempt_errors(),
            error_details=error_details(al.error_detail, self._attempt_detail),
            changes=tuple(dict(c) for c in self.changes),
            bursts=self._bursts(),
            goodput=self._goodput(w_start, sec, span, run_span),
            stage=self.stage_log.now(now),
            packing=live_packing(al.packs, al.total, self.packing_size),
            reasoning=ReasoningLive.of(al.reason, al.input_tokens, al.output_tokens),
            quality=live_quality(al.quality, self.cascade),
            media=MediaLive.of(al.media, run_span),
            settle={"phase": self.confidence.phase.live(), "run": self.confidence.run.live()},
        )

    def _bursts(self) -> dict[str, Any] | None:
        """The console's step and schedule-lag figures (`Snapshot.bursts`)."""
        step = self.steps.last(self.started_at + self.elapsed())
        lag = None if self.due is None else self.due.live()
        return None if step is None and lag is None else {"step": step, "lag": lag}

    def _goodput(self, w_start: int, sec: int, span: float, run_span: float) -> Goodput | None:
        """Good requests against the `[slo]`: whole run, the window [w_start, sec] and this phase."""
        if self.slo_target is None:
            return None
        al, ph = self._all, self._phase
        return Goodput(
            target=self.slo_target,
            good=al.good,
            judged=al.judged,
            req_per_s=round(al.good / run_span, 3),
            req_per_s_10s=round(self._good_s.total(w_start, sec) / span, 3),
            phase_good=ph.good,
            phase_judged=ph.judged,
        )

    def _phase_figures(self, run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """The current phase's timing summaries; until the first change the phase is the whole
        run: the same figures (``run``), computed once."""
        ph = self._phase
        if not self._phases and ph.total == self._all.total:
            return run
        return {m: ph.hist(m).summary() for m in METRICS}

    def _model_stats(self, g: Gauges, w_start: int, sec: int, span: float) -> tuple[ModelStats, ...]:
        """Each model's figures, with its live gauge and its rate over the window [w_start, sec]
        (``span`` seconds)."""
        total = self._all.total
        models: list[ModelStats] = []
        for name, acc in self._models.items():
            st = acc.stats
            ok10 = int(acc.ok_s.total(w_start, sec))
            err10 = int(acc.err_s.total(w_start, sec))
            lat = st.hist(LATENCY.key).summary()  # cached until the model finishes another request
            tt = st.hist(TTFT.key).summary()
            models.append(
                ModelStats(
                    name=name,
                    gauge=g.models.get(name),
                    counts=Counts(st.total, st.ok, st.error, st.retried),
                    ok_10s=ok10,
                    error_10s=err10,
                    req_per_s_10s=round(ok10 / span, 3),
                    share=round(st.total / total, 4) if total else 0.0,
                    latency_p50=lat["p50"],
                    latency_p99=lat["p99"],
                    ttft_p50=tt["p50"],
                    ttft_p99=tt["p99"],
                    input_tokens=st.input_tokens,
                    output_tokens=st.output_tokens,
                    cost=st.cost,
                )
            )
        return tuple(models)

    def _series(self, sec: int) -> Series:
        """Per-second rates of the last completed seconds (up to series_s), and the change marks."""
        n_series = min(self._series_s, sec)
        return Series(
            start_s=sec - n_series,
            req_per_s=tuple(self._ok_s.completed(sec, n_series)),
            output_tokens_per_s=tuple(self._out_s.completed(sec, n_series)),
            errors_per_s=tuple(self._err_s.completed(sec, n_series)),
            markers=tuple(float(c["t"]) for c in self.changes),
        )

    def _attempt_errors(self) -> dict[str, int]:
        out = dict(self._all.attempt_errors)
        for cls, n in self._live_attempts.items():
            if n:
                out[cls] = out.get(cls, 0) + n
        return dict(sorted(out.items()))

    def _weights(self, g: Gauges) -> dict[str, float]:
        """The models' routing weights now (disabled models weigh nothing); none with a cascade,
        which sends each request through its steps whatever the weights: the run's own average
        cost per request so far is the projection's then."""
        if self.cascade:
            return {}
        return {name: mg.weight for name, mg in g.models.items() if mg.enabled}

    def _projected_cost(self, g: Gauges) -> float | None:
        """Cost so far plus the remaining requests at the expected cost per request
        (`metrics.plans.project`).

        The expected cost per request mixes the models by their enabled weights; a model with
        finished requests costs its average so far, one without costs its prices at the run's
        average token counts.
        """
        al = self._all
        if g.total_expected is None:
            return None
        remaining = max(0, g.total_expected - al.total)
        avg_in = al.input_tokens / al.total if al.total else 0.0
        avg_out = al.output_tokens / al.total if al.total else 0.0

        def per_request(name: str) -> float | None:
            acc = self._models.get(name)
            if acc is not None and acc.stats.total:
                return acc.stats.cost / acc.stats.total
            p = self._prices.get(name)
            if p is None:
                return None
            return p[0] + avg_in * p[1] / 1e6 + avg_out * p[2] / 1e6

        return project(al.cost, al.total, remaining, per_request, self._weights(g))

    def _plan_costs(self, g: Gauges) -> tuple[PlanCost, ...]:
        """Each what-if plan's total, per task and projection now (none without plans)."""
        if not self._plans:
            return ()
        usage: dict[str, Usage] = {m: acc.stats.usage() for m, acc in self._models.items()}
        remaining = None if g.total_expected is None else max(0, g.total_expected - self._all.total)
        return plan_costs(self._plans.values(), usage, self._all.total, remaining, self._weights(g))

    # -- end of run --------------------------------------------------------------------------

    def summary(self, name: str, duration_s: float) -> dict[str, Any]:
        """The contract's summary object for the run so far, with ``duration_s`` of wall time."""
        end = max(duration_s, self._phase_t)
        last = phase_summary(self._phase, self._phase_t, end, self._phase_settings, self.slo_target)
        phases = [*self._phases, with_steps({**last, **self.confidence.phase.block(end)}, self.cascade)]
        measured_s = duration_s - self.stage_log.warmup_s(duration_s)  # rates leave warm-up out
        whole = self._summary(name, measured_s, phases)
        whole.update(run_blocks(self.confidence.run, self.timeline, measured_s))
        whole = with_steps(whole, self.cascade)
        out = self.stage_log.into(whole, duration_s)
        out["steps"] = self.steps.steps(self.started_at + duration_s)
        if self.due is not None:
            self.due.into(out)
        return out

    def _summary(self, name: str, duration_s: float, phases: list[dict[str, Any]]) -> dict[str, Any]:
        return build_summary(
            name=name,
            started_at=self.started_at,
            duration_s=duration_s,
            overall=self._all,
            models=((m, acc.stats) for m, acc in self._models.items()),
            changes=self.changes,
            phases=phases,
            live_attempt_errors=self._live_attempts,
            attempt_details=self._attempt_detail,
            slo_target=self.slo_target,
            plans=self._plans,
            packing_size=self.packing_size,
        )

    @property
    def plans(self) -> Mapping[str, PricePlan]:
        """The what-if price plans the summary prices (read-only use)."""
        return self._plans

    @property
    def stats(self) -> RunStats:
        """Whole-run counters (read-only use)."""
        return self._all

    def models_stats(self) -> dict[str, RunStats]:
        """Each model's whole-run counters (read-only use, on the engine's loop)."""
        return {m: acc.stats for m, acc in self._models.items()}

    def attempt_error_details(self) -> Mapping[str, str]:
        return dict(self._attempt_detail)


def _bins(hists: Mapping[str, LogHistogram], n: int) -> dict[str, Bins]:
    return {m: tuple(h.bins(n)) for m, h in hists.items()}
