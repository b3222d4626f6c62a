"""The summary's steady window on real runs (the engine and the simulator over HTTP): a ramped
run's window is its high stage, with that stage's throughput; an open loop's spans the run but
its ramp-up and drain; in both, the window's rates are the requests that ended in it, over its
length, as a reader of the journal computes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.workload import Workload
from tests.support import journal, run
from tests.support.workloads import load_workload

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.timing]


def ended_in(records: list[dict[str, Any]], started_at: float, a: float, b: float) -> tuple[int, int]:
    """Ok requests (and their output tokens) whose end falls in [a, b) seconds after the start."""
    n = tokens = 0
    for r in records:
        if r["status"] != "ok" or r.get("warmup"):
            continue
        end = r["t_sent"] + r["latency_ms"] / 1000.0 - started_at
        if a <= end < b:
            n += 1
            tokens += r["output_tokens"]
    return n, tokens


def start_of(w: Workload) -> float:
    """When the run's clock started (its session, in the journal's manifest)."""
    manifest = w.results_path().with_name(w.results_path().name + ".meta.json")
    return float(orjson.loads(manifest.read_bytes())["sessions"][0]["started_at"])


async def test_a_ramped_run_is_steady_in_its_high_stage(tmp_path: Path) -> None:
    stages = [
        {"duration": "3s", "concurrency": 2},
        {"duration": "10s", "concurrency": 24},
        {"duration": "3s", "concurrency": 2},
    ]
    w = load_workload("sim_stages", tmp_path, {"stages": stages, "sim.models.m.ttft": "200ms"})
    s = (await run(w)).summary
    steady = s["steady"]
    assert steady is not None and 3.0 <= steady["from_s"] <= 6.0 and 10.0 <= steady["to_s"] <= 13.5, steady
    high = s["stages"][1]["throughput"]["requests_per_s"]
    assert abs(steady["requests_per_s"] / high - 1) < 0.1, (steady, high)
    assert steady["requests_per_s"] > 1.3 * s["throughput"]["requests_per_s"], (steady, s["throughput"])
    n, tokens = ended_in(journal(w), start_of(w), steady["from_s"], steady["to_s"])
    length = steady["to_s"] - steady["from_s"]
    assert steady["requests_per_s"] == pytest.approx(n / length, abs=1e-3), (steady, n, length)
    assert steady["output_tokens_per_s"] == pytest.approx(tokens / length, abs=1e-3), (steady, tokens)


async def test_an_open_loop_is_steady_from_its_ramp_to_its_drain(tmp_path: Path) -> None:
    sets = {
        "run.arrival": "poisson",
        "run.rate": 80,
        "run.duration": "10s",
        "run.concurrency": 500,
        "sim.models.m.ttft": "500ms",
        "sim.models.m.jitter": 0.3,
    }
    w = load_workload("sim_stages", tmp_path, sets)
    s = (await run(w)).summary
    steady = s["steady"]
    assert steady is not None, s
    # the ramp is measured from the first send, not the clock's start: on a loaded machine the
    # first of 800 Poisson arrivals can leave a second late, and the whole run with it
    records = journal(w)
    first = min(r["t_sent"] for r in records) - start_of(w)
    last = max(r["t_sent"] for r in records) - start_of(w)
    ramp, drain = steady["from_s"] - first, last - steady["to_s"]
    assert ramp <= 2.0 and drain <= 2.0, (steady, first, last)
    assert abs(steady["requests_per_s"] / 80.0 - 1) < 0.15, steady
    n, _ = ended_in(journal(w), start_of(w), steady["from_s"], steady["to_s"])
    assert steady["requests_per_s"] == pytest.approx(n / (steady["to_s"] - steady["from_s"]), abs=1e-3)
