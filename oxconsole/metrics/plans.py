"""The arithmetic of what-if price plans: what the requests of a run would cost under each plan,
per task, and projected to the whole workload.

Why this module exists: a plan prices the very figures the run counted (per model: the requests
that ended ok and their input and output tokens; a request that ended in error costs nothing), so
the live collector, the summary and `oxconsole report --plans` price them with one function and
cannot disagree. Nothing is kept per request: the counters are the collector's own, and a plan is
priced only when a snapshot or a summary is made (exact: integers times prices).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oxconsole.metrics.snapshot import PlanCost
from oxconsole.workload.plans import PricePlan, Prices

__all__ = [
    "PlanCost",
    "Usage",
    "at_pace",
    "cost_block",
    "model_cost_block",
    "per_task",
    "plan_costs",
    "plan_total",
    "price",
    "project",
    "project_costs",
    "unit_cost",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """What one model's finished requests are billed on: those that ended ok, and their tokens."""

    requests: int
    """Requests that ended ok (errors cost nothing)."""
    input_tokens: int
    """Input tokens of those requests."""
    output_tokens: int
    """Output tokens of those requests."""
    finished: int = 0
    """Every finished request, ok or not (a projection's pace counts errors too)."""


def price(p: Prices, u: Usage) -> float:
    """The cost of `u` at prices `p`."""
    return (
        u.requests * p.per_request
        + (u.input_tokens * p.per_1m_input + u.output_tokens * p.per_1m_output) / 1e6
    )


def plan_total(plan: PricePlan, usage: Mapping[str, Usage]) -> float:
    """The cost of every model's usage under `plan`."""
    return sum((price(plan.prices(m), u) for m, u in usage.items()), 0.0)


def per_task(total: float, tasks: int) -> float:
    """`total` per finished task (0 before any)."""
    return total / tasks if tasks else 0.0


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


def unit_cost(prices: Prices, u: Usage | None, avg_in: float, avg_out: float) -> float:
    """A model's expected cost per finished request: its average so far, or, before it finished
    any, its prices at the run's average token counts."""
    if u is not None and u.finished:
        return price(prices, u) / u.finished
    return prices.per_request + (avg_in * prices.per_1m_input + avg_out * prices.per_1m_output) / 1e6


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
    billed = max(1, sum(u.requests for u in usage.values()))
    avg_in = sum(u.input_tokens for u in usage.values()) / billed
    avg_out = sum(u.output_tokens for u in usage.values()) / billed
    out: list[PlanCost] = []
    for plan in plans:

        def unit_of(model: str, plan: PricePlan = plan) -> float:
            return unit_cost(plan.prices(model), usage.get(model), avg_in, avg_out)

        total = plan_total(plan, usage)
        projected = None if remaining is None else project(total, finished, remaining, unit_of, weights)
        out.append(PlanCost(plan.name, total, per_task(total, tasks), projected))
    return tuple(out)
