"""Step response over real HTTP: a `[[stages]]` burst on the simulator, with and without cold
starts (jitter 0, so the penalty and recovery follow from the replica rule, docs/simulator.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from oxconsole.metrics.steps import is_step, step_figures
from oxconsole.workload import Workload

from .conftest import WorkloadFactory
from .support import run

BURST = """
name = "burst"
[run]
concurrency = {low}
seed = 3
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
max_tokens = 32
[prompts]
synthetic = {{ count = 100000, input_tokens = 8, output_tokens = 32 }}
[sim.models.m]
ttft = "100ms"
tokens_per_s = 50
output_tokens = 32
jitter = 0
capacity = {capacity}
{replicas}
[[stages]]
duration = "{before}s"
concurrency = {low}
[[stages]]
duration = "{after}s"
concurrency = {high}
"""


def expected(w: Workload, high: int) -> tuple[float, float]:
    """The replica rule's penalty (ms) and recovery (s) for a closed loop of `high` clients.

    Service time S = ttft + (n - 1) / tokens_per_s. With k slots ready, a closed loop of N > k
    clients (FIFO, exact times) waits (N/k - 1) S before admission: the penalty. Replicas start
    one after another while requests queue, each ready `cold_start` after the previous, until
    ceil(N / capacity) are ready: the recovery."""
    p = w.sim["m"]
    service = p.ttft + (p.output_tokens - 1) / p.tokens_per_s
    slots = p.capacity * p.replicas
    penalty = (high / slots - 1) * service * 1000.0
    needed = min(p.max_replicas, math.ceil(high / p.capacity))
    return penalty, (needed - p.replicas) * p.cold_start


def the_step(s: dict[str, Any]) -> dict[str, Any]:
    steps = s["steps"]
    assert len(steps) == 1, f"expected one step, got {steps} from changes {s['changes']}"
    return steps[0]


@pytest.mark.asyncio
@pytest.mark.slow
async def test_cold_start_penalty_and_recovery_follow_replicas(make_workload: WorkloadFactory) -> None:
    text = BURST.format(
        low=10, high=40, capacity=20, before=10, after=16, replicas="max_replicas = 2\ncold_start = 8"
    )
    w = make_workload(text)
    penalty, recovery = expected(w, 40)
    assert (round(penalty), recovery) == (720, 8.0)  # the formula's values for these numbers
    s = (await run(w)).summary
    st = the_step(s)
    assert (st["what"], st["from"], st["to"], st["by"]) == ("concurrency", 10, 40, "stage"), st
    assert abs(st["t"] - 10.0) < 0.5, st
    assert abs(st["ttft_before_ms"] - 100.0) < 15.0, st
    assert abs(st["penalty_ms"] - penalty) <= 0.1 * penalty, (st, penalty)
    assert st["recovery_s"] is not None and abs(st["recovery_s"] - recovery) <= 0.1 * recovery, (st, recovery)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_without_cold_starts_a_burst_costs_nothing(make_workload: WorkloadFactory) -> None:
    w = make_workload(BURST.format(low=10, high=40, capacity=64, before=3, after=4, replicas=""))
    st = the_step((await run(w)).summary)
    assert st["to"] == 40 and st["ttft_after_ms"] is not None, st
    assert abs(st["penalty_ms"]) < 10.0, st


def test_a_step_at_least_doubles_concurrency_or_rate() -> None:
    c = {"what": "concurrency", "from": 10, "to": 20}
    assert is_step(c) and not is_step({**c, "to": 19}) and not is_step({**c, "what": "weight"})
    assert is_step({"what": "rate", "from": 5.0, "to": 0}), "a limit made unlimited is a burst"
    assert not is_step({"what": "rate", "from": 0, "to": 50.0}), "unlimited to a limit is not"


def test_step_figures_by_hand() -> None:
    # 10 s at 100 ms, then 6 s at 900 ms, then back to 100 ms: the settled state is 100 ms
    ts = [i * 0.1 for i in range(300)]
    vs = [100.0 if t < 10 or t >= 16 else 900.0 for t in ts]
    f = step_figures(ts, vs, 10.0, 0.0, 30.0)
    assert f["ttft_before_ms"] == 100.0 and f["ttft_after_ms"] == 900.0 and f["penalty_ms"] == 800.0, f
    # the rolling 20 holds 11 of 100 ms once the 11th request at 100 ms is sent (t = 17.0)
    assert f["recovery_s"] == pytest.approx(7.0, abs=0.01), f
    calm = step_figures(ts, [100.0] * 300, 10.0, 0.0, 30.0)
    assert (calm["penalty_ms"], calm["recovery_s"]) == (0.0, 0.0), calm
    short = step_figures(ts[:115], vs[:115], 10.0, 0.0, 30.0)
    assert short["recovery_s"] is None, f"15 requests after the step make no rolling 20: {short}"
