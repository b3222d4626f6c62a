"""The cascade on Ray (`run.cluster = "ray"`, two actors): records cross from the actors with their
verdicts and bills, each actor's simulator answers right for the same prompts, and the journal and
summary hold what one process would. Skipped where Ray is not installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.engine.runner import make_engine
from oxconsole.reports.summary import summary_from_journal
from oxconsole.sim.quality import draw
from oxconsole.workload import check_prompts
from tests.support.workloads import load_workload

N = 40


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
@pytest.mark.asyncio
async def test_cascade_on_two_ray_actors(tmp_path: Path, ray_local: Any) -> None:
    body = "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(N)
    )
    w = load_workload("cascade", tmp_path, {"run.cluster": "ray", "run.workers": 2}, prompts=body)
    out = await make_engine(
        w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests
    ).run()
    assert out.exit_code == 0 and out.summary["workers"] == 2
    lines = w.results_path().read_bytes().splitlines()
    recs = {d["id"]: d for d in map(orjson.loads, filter(bytes.strip, lines))}
    wrong = {f"q{i}" for i in range(N) if draw(3, "small", f"q{i}") >= 0.8}
    assert {k for k, r in recs.items() if r.get("escalations")} == wrong
    assert all(r["valid"] is True for r in recs.values())
    assert out.summary["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs.values()))
    # the journal alone has every figure but the steps in force (kept by a headless run's end)
    rebuilt = summary_from_journal(w.results_path())["cascade"]
    assert rebuilt == {k: v for k, v in out.summary["cascade"].items() if k != "steps"}, rebuilt
    assert out.summary["cascade"]["steps"] == ["small", "big"], out.summary["cascade"]
