"""Step response over real HTTP: a `[[stages]]` burst on the simulator, with and without cold
starts (jitter 0, so the penalty and recovery follow from the replica rule, docs/simulator.md)."""

from __future__ import annotations

import asyncio
import math
from html import escape
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.engine.commands import SetConcurrency
from oxconsole.metrics.stepresponse import is_step, step_figures, step_sentence
from oxconsole.workload import Workload, WorkloadError
from tests.support import engine_for, oxconsole, run, until
from tests.support.workloads import Sets, load_workload, write_workload


def burst(low: int, high: int, capacity: int, before: float, after: float, **replicas: float) -> Sets:
    """A burst: `before` s at `low` in flight, then `after` s at `high`, on a model answering 32
    tokens 100 ms after admission at 50 a second, `capacity` at once per replica (`replicas`: the
    sim.models.m keys about them)."""
    return {
        "name": "burst",
        "run.concurrency": low,
        "models.0.max_tokens": 32,
        "prompts.synthetic.output_tokens": 32,
        "sim.models.m": {
            "ttft": "100ms",
            "tokens_per_s": 50,
            "output_tokens": 32,
            "jitter": 0,
            "capacity": capacity,
            **replicas,
        },
        "stages": [
            {"duration": f"{before}s", "concurrency": low},
            {"duration": f"{after}s", "concurrency": high},
        ],
    }


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
    step: dict[str, Any] = steps[0]
    return step


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.timing
async def test_cold_start_penalty_and_recovery_follow_replicas(tmp_path: Path) -> None:
    w = load_workload("sim_short", tmp_path, burst(10, 40, 20, 10, 16, max_replicas=2, cold_start=8))
    penalty, recovery = expected(w, 40)
    assert (round(penalty), recovery) == (720, 8.0)  # the formula's values for these numbers
    s = (await run(w, sim="process")).summary  # the simulator's clock apart from the client's loop
    st = the_step(s)
    assert (st["what"], st["from"], st["to"], st["by"]) == ("concurrency", 10, 40, "stage"), st
    assert abs(st["t"] - 10.0) < 0.5, st
    assert abs(st["ttft_before_ms"] - 100.0) < 15.0, st
    assert abs(st["penalty_ms"] - penalty) <= 0.1 * penalty, (st, penalty)
    assert st["recovery_s"] is not None and abs(st["recovery_s"] - recovery) <= 0.1 * recovery, (st, recovery)


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.timing
async def test_without_cold_starts_a_burst_costs_nothing(tmp_path: Path) -> None:
    w = load_workload("sim_short", tmp_path, burst(10, 40, 64, 3, 4))
    st = the_step((await run(w, sim="process")).summary)
    assert st["to"] == 40 and st["ttft_after_ms"] is not None, st
    # nothing beside the cold-start test's 720 ms: 40 ms is what a loaded 2-core client adds
    # to TTFT at 40 in flight (24 ms seen beside a full suite and three other runs)
    assert abs(st["penalty_ms"]) < 40.0, st


def test_a_step_at_least_doubles_concurrency_or_rate() -> None:
    c = {"what": "concurrency", "from": 10, "to": 20}
    assert is_step(c) and not is_step({**c, "to": 19}) and not is_step({**c, "what": "weight"})
    assert not is_step({"what": "rate", "from": 5.0, "to": 0}), "no rate doubled: the concurrency bounds it"
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
    # a queue that builds up only after the first instants: calm, then slow, then calm again
    late = [100.0 if t < 11.15 or t >= 16 else 900.0 for t in ts]
    assert step_figures(ts, late, 10.0, 0.0, 30.0)["recovery_s"] == pytest.approx(7.0, abs=0.01)
    short = step_figures(ts[:115], vs[:115], 10.0, 0.0, 30.0)
    assert short["recovery_s"] is None, f"15 requests after the step make no rolling 20: {short}"


@pytest.mark.asyncio
@pytest.mark.slow
async def test_a_key_and_a_command_that_double_are_steps_and_smaller_ones_are_not(
    tmp_path: Path,
) -> None:
    w = load_workload("sim_short", tmp_path, {"run.duration": "4s"})
    e = engine_for(w)

    async def drive() -> None:
        await until(lambda: e.state == "running", timeout=10)
        await asyncio.sleep(1.0)
        e.apply(SetConcurrency(12), "key")  # x3: a step
        await asyncio.sleep(1.0)
        e.apply(SetConcurrency(18))  # x1.5 by a command: not a step
        await asyncio.sleep(0.5)
        e.apply(SetConcurrency(40))  # x2.2 by a command: a step

    d = asyncio.create_task(drive())
    s = (await run(w, e)).summary
    await d
    got = [(st["from"], st["to"], st["by"]) for st in s["steps"]]
    assert got == [(4, 12, "key"), (18, 40, "command")], (got, s["changes"])
    live = e.latest.bursts if e.latest is not None else None  # what the console was shown last
    assert live is not None and live["step"]["to"] == 40 and live["lag"] is None, live
    for st in s["steps"]:
        assert st["ttft_before_ms"] >= 50.0 and st["ttft_after_ms"] >= 50.0, st  # the sim's ttft
        assert "recovery_s" in st and "penalty_ms" in st, st  # their values: the cold-start test


@pytest.mark.asyncio
@pytest.mark.slow
async def test_auto_concurrency_doubling_is_a_step(tmp_path: Path) -> None:
    sets = {"run.concurrency": "auto", "run.duration": "3s", "slo": {"ttft": "500ms", "target": 0.9}}
    w = load_workload("sim_short", tmp_path, sets)
    s = (await run(w)).summary
    auto = [c for c in s["changes"] if c["by"] == "auto" and c["to"] >= 2 * c["from"]]
    assert auto, f"auto never doubled: {s['changes']}"
    steps = [st for st in s["steps"] if st["by"] == "auto"]
    assert [(st["from"], st["to"]) for st in steps] == [(c["from"], c["to"]) for c in auto], (steps, auto)


def test_a_headless_burst_ends_with_its_sentence_and_report_gives_the_same_steps(tmp_path: Path) -> None:
    stages = [{"duration": "2s", "concurrency": 4}, {"duration": "2.5s", "concurrency": 16}]
    sets = {"stages": stages, "output.results": "runs/{name}/results.jsonl"}  # (the default)
    write_workload("sim_short", tmp_path, sets, file="w.toml")
    res = oxconsole("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    s = orjson.loads((tmp_path / "s.json").read_bytes())
    assert [(st["from"], st["to"]) for st in s["steps"]] == [(4, 16)], s["steps"]
    said = step_sentence(s["steps"][0])
    assert said.startswith("4 → 16 at 2 s: ") and f"oxconsole: {said}\n" in res.stderr, (said, res.stderr)
    assert f"steps\n  {said}" in res.stdout, res.stdout
    results = next(tmp_path.glob("runs/*/results.jsonl"))
    rep = oxconsole("report", str(results), "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert orjson.loads(rep.stdout)["steps"] == s["steps"]
    # the HTML report marks the step with its figures and lists it; a comparison sets them side by side
    html = oxconsole("report", str(results), "--html", "r.html", cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r.html").read_text()
    assert '<section id="steps">' in page and escape(said) in page, page[:2000]
    assert "concurrency 4→16 · TTFT " in page, "the step's marker carries its figures"
    cmp = oxconsole("report", str(results), str(results), "--json", cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    rows = {r["figure"]: r["values"] for r in orjson.loads(cmp.stdout)["figures"]}
    pen = s["steps"][0]["penalty_ms"]
    assert rows["steps.0.penalty_ms"] == [pen, pen], rows.get("steps.0.penalty_ms")
    assert rows["steps.0.recovery_s"] == [s["steps"][0]["recovery_s"]] * 2, rows


def test_max_replicas_below_replicas_is_bad_input(tmp_path: Path) -> None:
    sets = {"sim.models.m.replicas": 3, "sim.models.m.max_replicas": 2}
    with pytest.raises(
        WorkloadError, match=r"sim.models.m.max_replicas: expected 0 or an integer >= replicas \(3\)"
    ):
        load_workload("sim_short", tmp_path, sets)


def test_the_sentence_says_the_penalty_and_the_recovery_or_no_penalty() -> None:
    st = {"t": 30.2, "what": "concurrency", "from": 10, "to": 300, "ttft_before_ms": 150.0}
    hit = {**st, "ttft_after_ms": 1950.0, "penalty_ms": 1800.0, "recovery_s": 12.3}
    assert step_sentence(hit) == "10 → 300 at 30 s: TTFT p50 +1.8 s, recovered in 12 s"
    assert step_sentence({**hit, "recovery_s": None}).endswith("+1.8 s, not recovered by the end")
    calm = {**st, "ttft_after_ms": 154.0, "penalty_ms": 4.0, "recovery_s": 0.0}
    assert step_sentence(calm) == "10 → 300 at 30 s: no penalty"
    rate = {**hit, "what": "rate", "from": 5.0, "to": 0, "penalty_ms": 320.0}
    assert step_sentence(rate) == "rate 5 → unlimited at 30 s: TTFT p50 +320 ms, recovered in 12 s"
    assert step_sentence({**hit, "recovery_s": 8.24}).endswith("recovered in 8.2 s")


@pytest.mark.subprocess
def test_a_rate_made_unlimited_says_unlimited_and_is_no_step(tmp_path: Path) -> None:
    """A run at 9.99/s whose second stage lifts the rate (0: unlimited), its report written: the
    change reads "rate 9.99/s → unlimited" in the summary and on the report's markers and
    phases, never "9.99→0", and it is no step (no rate doubled; concurrency 4 bounds the load)."""
    import orjson

    from tests.support import oxconsole_here
    from tests.support.workloads import write_workload

    sets = {
        "run.requests": 0,
        "prompts.synthetic.count": 400,
        "output.html": True,
        "stages": [{"duration": "2s", "rate": 9.99}, {"duration": "1s", "rate": 0}],
        "sim.models.m.ttft": "50ms",
    }
    path = write_workload("sim_exact", tmp_path, sets)
    r = oxconsole_here(str(path), "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    rates = [c for c in summary["changes"] if c["what"] == "rate"]
    assert [(c["from"], c["to"]) for c in rates][-1:] == [(9.99, 0)], summary["changes"]
    assert summary["steps"] == [], summary["steps"]
    assert "rate 9.99/s → unlimited" in r.stdout, r.stdout
    page = (tmp_path / "report.html").read_text()
    assert "rate 9.99/s→unlimited" in page and "9.99→0" not in page, page[page.find("rate 9.99") - 200 :][
        :400
    ]
