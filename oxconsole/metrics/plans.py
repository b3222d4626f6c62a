"""The arithmetic of what-if price plans: what the requests of a run would cost under each plan,
per task, and projected to the whole workload.

Why this module exists: a plan prices the very figures the run counted (per model: the requests
that ended ok and their input and output tokens; a request that ended in error costs nothing), so
the live collector, the summary and `oxconsole report --plans` price them with one function and
cannot disagree. Nothing is kept per request: the counters are the collector's own, and a plan is
priced only when a snapshot or a summary is made (exact: integers times prices).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oxconsole.base.figures import COST, COST_PER_TASK, REQUESTS
from oxconsole.metrics.snapshot import PlanCost
from oxconsole.workload.errors import Problems, join_key
from oxconsole.workload.plans import PricePlan, Prices, parse_plans

__all__ = [
    "PlanCost",
    "Usage",
    "at_pace",
    "cheapest",
    "cost_block",
    "model_cost_block",
    "per_task",
    "plan_costs",
    "plan_total",
    "price",
    "project",
    "project_costs",
    "stored_plans",
    "summary_per_task",
    "unit_cost",
    "unused_overrides",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """What one model's finished requests are billed on: those that ended ok, and their tokens."""

    requests: float
    """HTTP requests billed: those behind the tasks that ended ok (errors cost nothing); with
    `[packing]` a packed task is a share of its pack's request."""
    input_tokens: float
    """Input tokens of the tasks that ended ok (a count; a mean in a projection's average)."""
    output_tokens: float
    """Output tokens of the tasks that ended ok."""
    finished: int = 0
    """Every finished task, ok or not (a projection's pace counts errors too)."""
    ok: int = 0
    """Tasks that ended ok (`requests` without packing)."""
    cached_tokens: float = 0
    """Of `input_tokens`, those the server said it served from its prefix cache."""


def price(p: Prices, u: Usage) -> float:
    """The cost of `u` at prices `p` (cached input at `per_1m_cached_input`, else the input price)."""
    cached_price = p.per_1m_input if p.per_1m_cached_input is None else p.per_1m_cached_input
    input_cost = (u.input_tokens - u.cached_tokens) * p.per_1m_input + u.cached_tokens * cached_price
    return u.requests * p.per_request + (input_cost + u.output_tokens * p.per_1m_output) / 1e6


def plan_total(plan: PricePlan, usage: Mapping[str, Usage]) -> float:
    """The cost of every model's usage under `plan`."""
    return sum((price(plan.prices(m), u) for m, u in usage.items()), 0.0)


def per_task(total: float, tasks: int) -> float:
    """`total` per finished task (0 before any)."""
    return total / tasks if tasks else 0.0


def summary_per_task(summary: Mapping[str, Any]) -> float | None:
    """A summary's `cost.per_task`; for one written before plans, its cost over the tasks that
    ended (None when none did)."""
    v = COST_PER_TASK.value(summary)
    if v is None:
        n = int(REQUESTS.value(summary) or 0)
        v = (COST.value(summary) or 0.0) / n if n else None
    return v


def project(
    so_far: float,
    done: int,
    remaining: int,
    unit_of: Callable[[str], float | None],
    weights: Mapping[str, float],
) -> float | None:
    """Cost so far plus `remaining` requests at the expected cost per request.

    The expected cost per request mixes the models by `weights` (those > 0), each at `unit_of(name)`
    (None: unknown, left out of the mix); with no model to mix, the run's own average so far
    (`so_far / done`). None when nothing tells the cost of a request yet.
    """
    if remaining <= 0:
        return so_far
    weighted = 0.0
    weight_sum = 0.0
    for name, w in weights.items():
        if w <= 0:
            continue
        c = unit_of(name)
        if c is not None:
            weighted += w * c
            weight_sum += w
    if weight_sum > 0:
        unit = weighted / weight_sum
    elif done:
        unit = so_far / done
    else:
        return None
    return so_far + remaining * unit


def unit_cost(prices: Prices, u: Usage | None, avg: Usage) -> float:
    """A model's expected cost per finished task: its average so far, or, before it finished
    any, its prices at the run's average per ok task (`avg`: requests and tokens per task)."""
    if u is not None and u.finished:
        return price(prices, u) / u.finished
    return price(prices, avg)


def _money(v: float) -> float:
    return round(v, 9)


def _unit(v: float) -> float:
    return round(v, 12)


def cost_block(
    cost: float, tasks: int, usage: Mapping[str, Usage], plans: Mapping[str, PricePlan] | None
) -> dict[str, Any]:
    """The summary's `cost`: the actual total and per task, and with plans each plan's total, per
    task and projection (the total: a summary is of what ran; `project_costs` projects a run that
    stopped before the end)."""
    out: dict[str, Any] = {"total": _money(cost), "per_task": _unit(per_task(cost, tasks))}
    if plans:
        block: dict[str, Any] = {}
        for name, plan in plans.items():
            total = plan_total(plan, usage)
            block[name] = {
                "total": _money(total),
                "per_task": _unit(per_task(total, tasks)),
                "projected": _money(total),
            }
        out["plans"] = block
    return out


def model_cost_block(
    cost: float, tasks: int, model: str, u: Usage, plans: Mapping[str, PricePlan] | None
) -> dict[str, Any]:
    """A model's `cost` in the summary: its total and per task, and each plan's."""
    out: dict[str, Any] = {"total": _money(cost), "per_task": _unit(per_task(cost, tasks))}
    if plans:
        out["plans"] = {
            name: {"total": _money(t := price(p.prices(model), u)), "per_task": _unit(per_task(t, tasks))}
            for name, p in plans.items()
        }
    return out


def at_pace(total: float, done: int, remaining: int | None) -> float | None:
    """`total` for `done` requests, projected over `remaining` more at the same cost per request
    (None: not known how many remain, or nothing done to take a pace from)."""
    if remaining is None:
        return None
    return project(total, done, remaining, _unknown, {})


def _unknown(model: str) -> float | None:
    return None


def project_costs(summary: dict[str, Any], remaining: int | None) -> None:
    """Set each plan's `projected` in `summary` for a run that left `remaining` requests unsent:
    at the pace of the requests it finished (their cost per request); None: not known how many."""
    plans = (summary.get("cost") or {}).get("plans")
    if not plans:
        return
    done = int((summary.get("requests") or {}).get("total") or 0)
    for fig in plans.values():
        p = at_pace(float(fig["total"]), done, remaining)
        fig["projected"] = None if p is None else _money(p)


def plan_costs(
    plans: Iterable[PricePlan],
    usage: Mapping[str, Usage],
    tasks: int,
    remaining: int | None,
    weights: Mapping[str, float],
) -> tuple[PlanCost, ...]:
    """Each plan now, for a snapshot: its total, per task, and projected to the whole workload
    (`remaining` requests more, mixed by the routing `weights`; None: unknown)."""
    finished = sum(u.finished for u in usage.values())
    ok = max(1, sum(u.ok for u in usage.values()))
    avg = Usage(
        sum(u.requests for u in usage.values()) / ok,
        sum(u.input_tokens for u in usage.values()) / ok,
        sum(u.output_tokens for u in usage.values()) / ok,
        cached_tokens=sum(u.cached_tokens for u in usage.values()) / ok,
    )
    out: list[PlanCost] = []
    for plan in plans:

        def unit_of(model: str, plan: PricePlan = plan) -> float:
            return unit_cost(plan.prices(model), usage.get(model), avg)

        total = plan_total(plan, usage)
        projected = None if remaining is None else project(total, finished, remaining, unit_of, weights)
        out.append(PlanCost(plan.name, total, per_task(total, tasks), projected))
    return tuple(out)


def cheapest(totals: Mapping[str, float | None]) -> str | None:
    """The name with the lowest figure (the first of equals); None when none has one."""
    best: tuple[float, str] | None = None
    for name, v in totals.items():
        if v is not None and (best is None or v < best[0]):
            best = (v, name)
    return None if best is None else best[1]


def stored_plans(results: Path, manifest: Mapping[str, Any]) -> dict[str, PricePlan]:
    """The plans a journal's run was started with (its manifest's `plans`); none when it has none
    or they no longer read as plans (a manifest edited by hand)."""
    raw = manifest.get("plans")
    if not isinstance(raw, dict) or not raw:
        return {}
    errs = Problems(os.fspath(results))
    plans = parse_plans(errs, raw, None)
    return {} if errs else plans


def unused_overrides(plans: Mapping[str, PricePlan] | None, summary: Mapping[str, Any]) -> list[str]:
    """Warnings for plans' model prices that name no model of the journal (a misspelt name would
    silently leave that model at the plan's default)."""
    if not plans:
        return []
    models = set(summary.get("models") or {})
    out = []
    for name, plan in plans.items():
        for m in plan.models:
            if m not in models:
                where = join_key(join_key(join_key("plans", name), "models"), m)
                out.append(f"{where}: no model of that name in the journal (its prices are unused)")
    return out
