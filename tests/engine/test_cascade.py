"""The cascade over real HTTP: each answer judged under `[quality]`, a wrong one sent on to the next
model, every model asked billed into the record, and the summary's `quality`, `cascade` and
`cost.per_valid` equal to what the journal says.

Two servers play the models: the embedded simulator (`quality = 0.8`: right for the prompts its
seeded draw says) and a loopback server of the test's own that is right exactly for a known set of
ids, so the escalations and costs are known request by request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import make_engine
from oxconsole.metrics.histogram import DEFAULT_ALPHA
from oxconsole.reports.summary import summary_from_journal
from oxconsole.sim.quality import draw
from oxconsole.workload import Workload, check_prompts
from tests.support.http import chat_server
from tests.support.workloads import load_workload, write_workload

N = 40


def prompts(n: int = N) -> str:
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(n)
    )


def journal(w: Workload) -> dict[str, dict[str, Any]]:
    lines = w.results_path().read_bytes().splitlines()
    return {d["id"]: d for d in map(orjson.loads, filter(bytes.strip, lines))}


async def run(w: Workload) -> Any:
    engine = make_engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    return await engine.run()


async def test_simulated_small_model_escalates_exactly_its_wrong_answers(tmp_path: Path) -> None:
    w = load_workload("cascade", tmp_path, prompts=prompts())
    out = await run(w)
    recs = journal(w)
    wrong = {f"q{i}" for i in range(N) if draw(3, "small", f"q{i}") >= 0.8}
    assert 0 < len(wrong) < N / 2, f"a quality of 0.8 over {N} prompts gave {len(wrong)} wrong"
    escalated = {k for k, r in recs.items() if r.get("escalations")}
    assert escalated == wrong, f"escalated {sorted(escalated)} != small's wrong answers {sorted(wrong)}"
    for k, r in recs.items():
        assert r["status"] == "ok" and r["valid"] is True, r
        if k in wrong:
            assert r["models_tried"] == ["small", "big"] and r["model"] == "big", r
            assert r["escalations"] == 1
            assert r["cost"] == pytest.approx(0.021), r
        else:
            assert r["model"] == "small" and "models_tried" not in r, r
            assert r["cost"] == pytest.approx(0.001), r

    s = out.summary
    q = s["quality"]
    assert q["valid"] == N and q["fraction"] == 1.0, q
    assert q["models"]["small"] == {
        "asked": N,
        "valid": N - len(wrong),
        "fraction": round((N - len(wrong)) / N, 6),
    }
    assert q["models"]["big"] == {"asked": len(wrong), "valid": len(wrong), "fraction": 1.0}
    final = {"big": len(wrong), "small": N - len(wrong)}
    assert s["cascade"] == {"escalated": len(wrong), "final": final, "steps": ["small", "big"]}, s["cascade"]
    bill = sum(r["cost"] for r in recs.values())
    assert s["cost"]["total"] == pytest.approx(bill)
    assert s["cost"]["per_valid"] == pytest.approx(bill / N)

    rebuilt = summary_from_journal(w.results_path())
    lat, lat_back = q.pop("latency_ms"), rebuilt["quality"].pop("latency_ms")
    # the steps in force are the run's own (kept beside the journal by a headless run's end)
    assert rebuilt["quality"] == q and rebuilt["cascade"] == {"escalated": len(wrong), "final": final}
    # what a valid answer took, escalations included: two histograms of the same samples (the
    # journal keeps each to 3 decimals), each percentile within alpha of a sample of its rank
    for k, v in lat.items():
        bound = 2 * DEFAULT_ALPHA * abs(v) * 1.01 + 0.002
        assert abs(lat_back[k] - v) <= bound, (k, lat_back[k], v, bound)
    assert lat["p99"] >= s["latency_ms"]["p50"], (lat, s["latency_ms"])
    assert all(r["cascade_ms"] >= r["latency_ms"] for r in recs.values() if r.get("escalations"))
    assert rebuilt["cost"]["per_valid"] == pytest.approx(s["cost"]["per_valid"])


RIGHT = {"q1", "q2", "q5", "q8", "q13", "q21"}
"""The ids the test's own small model answers right."""


def answering(right_for: dict[str, set[str]]) -> Any:
    """A chat server: each model right for its set of ids (the id is read from the prompt)."""

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        text = body["messages"][-1]["content"]
        i = text.removeprefix("question ").removesuffix("?")
        right = f"q{i}" in right_for.get(body["model"], set())
        answer = f"  Answer {i} " if right else f"no idea about {i}"
        usage = {"prompt_tokens": 10, "completion_tokens": 4}
        return web.json_response({"choices": [{"message": {"content": answer}}], "usage": usage})

    return handler


async def test_own_server_escalations_and_costs_equal_the_known_set(tmp_path: Path) -> None:
    everything = {f"q{i}" for i in range(30)}
    async with chat_server(answering({"small": RIGHT, "big": everything})) as base:
        sets = {"endpoints.default.base_url": base + "/v1", "run.stream": False}
        w = load_workload("cascade", tmp_path, sets, prompts=prompts(30))
        out = await run(w)
    recs = journal(w)
    escalated = {k for k, r in recs.items() if r.get("escalations")}
    assert escalated == everything - RIGHT
    for k, r in recs.items():
        want = 0.001 if k in RIGHT else 0.021
        assert r["cost"] == pytest.approx(want, abs=1e-12), (k, r)
        assert r["valid"] is True and "invalid_reason" not in r
        if k not in RIGHT:
            [answer] = r["answers"]
            took = answer.pop("latency_ms", None)  # the step's own time, shown in its model's row
            assert took is not None and 0 < took < r["cascade_ms"], (took, r)
            assert answer == {
                "model": "small",
                "valid": False,
                "invalid_reason": "expected",
                "input_tokens": 10,
                "output_tokens": 4,
                "cost": 0.001,
            }, r
    s = out.summary
    assert s["cascade"]["escalated"] == 30 - len(RIGHT)
    assert s["quality"]["models"]["small"]["valid"] == len(RIGHT)
    assert s["cost"]["total"] == pytest.approx(len(RIGHT) * 0.001 + (30 - len(RIGHT)) * 0.021)
    assert summary_from_journal(w.results_path())["cost"] == s["cost"]


async def test_simulator_answers_a_schema_with_a_valid_instance_or_text(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "required": ["label", "score", "tags"],
        "properties": {
            "label": {"enum": ["yes", "no"]},
            "score": {"type": "integer", "minimum": 3},
            "tags": {"type": "array", "minItems": 2, "items": {"type": "string", "minLength": 2}},
        },
    }
    sets = {"quality.expected": None, "quality.json_schema": schema, "run.stream": False}
    body = "\n".join(orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?"}).decode() for i in range(N))
    w = load_workload("cascade", tmp_path, sets, prompts=body)
    out = await run(w)
    recs = journal(w)
    wrong = {f"q{i}" for i in range(N) if draw(3, "small", f"q{i}") >= 0.8}
    assert {k for k, r in recs.items() if r.get("escalations")} == wrong
    for k in wrong:
        assert recs[k]["answers"][0]["invalid_reason"] == "json", recs[k]
    right = next(r for k, r in recs.items() if k not in wrong)
    assert orjson.loads(right["text"]) == {"label": "yes", "score": 3, "tags": ["xx", "xx"]}, right
    assert out.summary["quality"]["valid"] == N


def test_validate_describes_the_checks_and_the_cascade(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oxconsole.cli.main import main

    path = write_workload("cascade", tmp_path, {"quality.regex": "^a"}, prompts=prompts(3))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "an answer is valid when it matches '^a'; equals the prompt's \"expected\"" in out, out
    assert "cascade: small -> big" in out
