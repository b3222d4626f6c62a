"""`[[stages]]`: a load shape, the run's concurrency and rate over time, read from the workload.

Why this module exists: a step, a ramp or a burst is a list of stages run in order (each held for
its `duration`, or ramped to from the stage before), and the run ends after the last one. Here
they are read and checked (every error at once, each naming `stages.K.key`); the engine's
`engine/drivers/stagedriver.py` drives them. A stage leaves a setting it does not name as it was; `ramp` moves
linearly from the values before the stage (the previous stage's, or `[run]`'s for the first) to
the stage's own; `warmup` stages are journaled but left out of the summary's statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oxconsole.workload import bounds as b
from oxconsole.workload.problems import Problems, join_key
from oxconsole.workload.schema import Stage, Workload, toml_keys
from oxconsole.workload.simschema import SimModelProfile
from oxconsole.workload.values import Table, fmt_duration

__all__ = ["Stage", "describe_stages", "parse_stages", "stage_settings", "stages_duration"]

_STAGE = toml_keys(Stage)


def stages_duration(stages: Sequence[Stage]) -> float:
    """How long the stages run, together (seconds)."""
    return sum(s.duration for s in stages)


def stage_settings(stages: Sequence[Stage], concurrency: int, rate: float) -> list[tuple[int, float]]:
    """The (concurrency, rate) each stage holds at its end, starting from `[run]`'s values."""
    out: list[tuple[int, float]] = []
    for s in stages:
        concurrency = s.concurrency if s.concurrency is not None else concurrency
        rate = s.rate if s.rate is not None else rate
        out.append((concurrency, rate))
    return out


def parse_stages(
    errs: Problems, data: Any, run_concurrency: int, run_rate: float, open_loop: bool
) -> tuple[Stage, ...]:
    """The `[[stages]]` array (absent: no stages). `open_loop`: arrival is constant or poisson, so a
    stage's rate must stay > 0. A ramp needs a setting to move, and a rate ramp needs a rate on
    both sides (0 is unlimited: there is no line from it)."""
    if data is None:
        return ()
    if isinstance(data, dict) or not isinstance(data, list):
        errs.bad("stages", "an array of tables (write [[stages]], one table a stage)", data)
        return ()
    out: list[Stage] = []
    rate = run_rate
    for i, value in enumerate(data):
        t = Table(errs, value, join_key("stages", i), _STAGE, "[[stages]]")
        if t.broken:
            continue
        if not t.has("duration"):
            t.required("duration", 'a duration > 0 (such as "30s")')
        stage = Stage(
            duration=t.duration("duration", 1.0, positive=True),
            concurrency=t.opt_int("concurrency", 1, b.MAX_CONCURRENCY, " (requests in flight)"),
            rate=t.opt_num("rate", b.MAX_RATE) if t.has("rate") else None,
            ramp=t.bool_("ramp", False),
            warmup=t.bool_("warmup", False),
        )
        if stage.rate is not None and stage.rate <= 0 and open_loop and t.ok("rate"):
            t.fail("rate", "a number > 0 (open-loop arrival needs a rate)")
        if stage.ramp and stage.concurrency is None and stage.rate is None and t.ok("ramp"):
            t.fail("ramp", "true only with concurrency or rate in the stage (something to ramp to)")
        if stage.ramp and stage.rate is not None and (rate <= 0 or stage.rate <= 0) and t.ok("rate"):
            t.fail(
                "rate", f"a rate > 0 ramped to from a rate > 0 (0 is unlimited; the rate before is {rate:g})"
            )
        if stage.rate is not None:
            rate = stage.rate
        out.append(stage)
    if not data:
        errs.add("stages", "at least one [[stages]] table", "an empty array")
    return tuple(out)


def describe_stages(w: Workload, total_requests: int | None) -> tuple[list[str], list[str]]:
    """What `oxconsole validate` says of the stages: one line each, and warnings (the prompts
    may run out before the stages end, run.duration cuts them short)."""
    if not w.stages:
        return [], []
    lines = ["", f"stages  {len(w.stages)}, {fmt_duration(stages_duration(w.stages))} in all"]
    need: float | None = 0.0
    c, r = w.run.concurrency, w.run.rate
    per_request = _sim_request_s(w)
    for i, (s, (c1, r1)) in enumerate(zip(w.stages, stage_settings(w.stages, c, r), strict=True)):
        shape = "ramp to" if s.ramp else "hold"
        rate = f"{r1:g}/s" if r1 else "unlimited"
        lines.append(
            f"  {i + 1}: {fmt_duration(s.duration)} {shape} concurrency {c1}, rate {rate}"
            + (", warm-up (left out of the summary)" if s.warmup else "")
        )
        c_avg, r_avg = ((c + c1) / 2, (r + r1) / 2) if s.ramp else (c1, r1)
        if need is not None:
            by_rate = r_avg * s.duration if r_avg else None
            by_slots = c_avg * s.duration / per_request if per_request else None
            bounds = [x for x in (by_rate, by_slots) if x is not None]
            need = need + min(bounds) if bounds else None
        c, r = c1, r1
    if need is None:
        lines.append(
            "  requests needed: unknown (a stage without a rate: it depends on the server's latency)"
        )
    else:
        lines.append(
            f"  requests needed: about {need:,.0f}" + (" (at the simulator's speed)" if per_request else "")
        )
    warnings = []
    if need is not None and total_requests is not None and need > total_requests:
        warnings.append(
            f"the prompts ({total_requests:,} requests) may run out before the stages end (about "
            f"{need:,.0f} needed): the run ends then; raise prompts.repeat or run.requests"
        )
    if 0 < w.run.duration < stages_duration(w.stages):
        warnings.append(
            f"run.duration ({fmt_duration(w.run.duration)}) ends the run before the stages "
            f"({fmt_duration(stages_duration(w.stages))})"
        )
    return lines, warnings


def _sim_request_s(w: Workload) -> float | None:
    """Seconds one request takes on the embedded simulator, the slowest model's (None: a real
    endpoint, whose latency validate cannot know)."""
    if any(w.endpoints[m.endpoint].base_url != "sim" for m in w.models if m.endpoint in w.endpoints):
        return None
    slowest = 0.0
    for m in w.models:
        p = w.sim.get(m.name) or SimModelProfile()
        tokens = min(p.output_tokens, m.max_tokens or p.output_tokens)
        syn = w.prompts.synthetic
        if syn is not None and isinstance(syn.output_tokens, int):  # each prompt's max_tokens
            tokens = min(tokens, syn.output_tokens)
        slowest = max(slowest, p.ttft + (tokens / p.tokens_per_s if p.tokens_per_s else 0.0))
    return slowest or None
