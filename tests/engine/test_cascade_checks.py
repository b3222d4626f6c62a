"""Each `[quality]` check over real HTTP, and the cascade beside retries, fallbacks, packing,
sessions, workers and resume: a loopback server of the test's own answers each model's prompts as
the test says, so every verdict, escalation and cost is known request by request.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import make_engine
from oxconsole.journal.journal import ok_ids
from oxconsole.reports.summary import summary_from_journal
from oxconsole.workload import Workload, check_prompts, parse_pack
from tests.support.http import chat_server
from tests.support.workloads import load_workload

pytestmark = pytest.mark.asyncio

Behave = Callable[[str, str], "str | int"]
"""(model, prompt text) -> the answer's text, or an HTTP status to fail with."""


def answering(behave: Behave, seen: list[tuple[str, str]] | None = None) -> Any:
    """A chat server answering by `behave` (a pack: one section per task, each by `behave`)."""

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        model, text = body["model"], body["messages"][-1]["content"]
        if seen is not None:
            seen.append((model, text))
        tasks = parse_pack(text)
        if tasks is not None:
            parts = [f"### Answer {k}\n{behave(model, t)}" for k, t in enumerate(tasks, 1)]
            answer: str | int = "\n\n".join(parts)
        else:
            answer = behave(model, text)
        if isinstance(answer, int):
            return web.json_response({"error": {"message": "no"}}, status=answer)
        usage = {"prompt_tokens": 10, "completion_tokens": 4}
        return web.json_response({"choices": [{"message": {"content": answer}}], "usage": usage})

    return handler


def prompts(n: int, **extra: Any) -> str:
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", **extra}).decode() for i in range(n)
    )


def expecting(n: int) -> str:
    """n prompts, each expecting its own answer ("answer I")."""
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(n)
    )


def qid(text: str) -> int:
    return int(text.removeprefix("question ").removesuffix("?"))


def journal(w: Workload) -> dict[str, dict[str, Any]]:
    lines = w.results_path().read_bytes().splitlines()
    return {d["id"]: d for d in map(orjson.loads, filter(bytes.strip, lines))}


async def run(w: Workload, **kw: Any) -> Any:
    kw.setdefault("total_expected", check_prompts(w).total_requests)
    return await make_engine(w, results_path=w.results_path(), **kw).run()


def sets_for(base: str, **more: Any) -> dict[str, Any]:
    return {"endpoints.default.base_url": base + "/v1", "run.stream": False, "quality.expected": None, **more}


SCHEMA = {"type": "object", "required": ["label"], "properties": {"label": {"enum": ["yes", "no"]}}}


async def test_json_schema_from_a_file_with_a_fence_and_each_reason(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_bytes(orjson.dumps(SCHEMA))

    def behave(model: str, text: str) -> str:
        i = qid(text)
        return [
            '```json\n{"label": "yes"}\n```',  # valid, fenced
            '{"label": "no"}',  # valid, bare
            "yes",  # not JSON
            '{"label": "maybe"}',  # JSON, not the schema's
        ][i % 4]

    async with chat_server(answering(behave)) as base:
        sets = sets_for(
            base, **{"quality.json_schema": "schema.json", "routing.cascade": None, "models.1.weight": 0}
        )
        w = load_workload("cascade", tmp_path, sets, prompts=prompts(12))
        out = await run(w)
    recs = journal(w)
    for i in range(12):
        r = recs[f"q{i}"]
        want = [None, None, "json", "schema"][i % 4]
        assert r["valid"] is (want is None) and r.get("invalid_reason") == want, r
        assert "escalations" not in r and r["cost"] == pytest.approx(0.001)
    assert out.summary["quality"]["valid"] == 6 and out.summary["quality"]["fraction"] == 0.5
    assert out.summary["cost"]["per_valid"] == pytest.approx(12 * 0.001 / 6)


async def test_regex_and_expected_must_both_pass(tmp_path: Path) -> None:
    def behave(model: str, text: str) -> str:
        i = qid(text)
        if model == "big":
            return "yes"
        return "Yes " if i % 3 == 0 else "no" if i % 3 == 1 else "yeah"

    async with chat_server(answering(behave)) as base:
        sets = sets_for(base, **{"quality.regex": "^[Yy]", "quality.expected": True})
        w = load_workload("cascade", tmp_path, sets, prompts=prompts(9, expected="yes"))
        await run(w)
    recs = journal(w)
    for i in range(9):
        r = recs[f"q{i}"]
        if i % 3 == 0:
            assert r["model"] == "small" and "answers" not in r, r
        else:
            assert r["models_tried"] == ["small", "big"], r
            assert r["answers"][0]["invalid_reason"] == ("regex" if i % 3 == 1 else "expected"), r
        assert r["valid"] is True


async def test_judge_decides_and_is_billed(tmp_path: Path) -> None:
    (tmp_path / "judge.txt").write_text("Question: {prompt}\nAnswer: {answer}\nSay PASS or FAIL.")
    seen: list[tuple[str, str]] = []

    def behave(model: str, text: str) -> str:
        if model == "judge":
            return "PASS" if "good" in text.split("Answer: ")[1] else "FAIL"
        i = qid(text)
        return "good" if model == "big" or i % 2 == 0 else "bad"

    async with chat_server(answering(behave, seen)) as base:
        sets = sets_for(
            base,
            **{
                "models": [
                    {"name": "small", "price_per_request": 0.001},
                    {"name": "big", "price_per_request": 0.02},
                    {"name": "judge", "price_per_request": 0.005, "weight": 0},
                ],
                "quality.judge": {"model": "judge", "prompt": "judge.txt", "pass": "^PASS"},
            },
        )
        w = load_workload("cascade", tmp_path, sets, prompts=prompts(6))
        out = await run(w)
    recs = journal(w)
    judged = [t for m, t in seen if m == "judge"]
    assert "Question: question 0?\nAnswer: good" in judged[0] or any("question 0?" in t for t in judged)
    for i in range(6):
        r = recs[f"q{i}"]
        assert r["valid"] is True
        if i % 2 == 0:  # small, one judge request
            assert r["cost"] == pytest.approx(0.001 + 0.005), r
            assert [a["model"] for a in r["answers"]] == ["judge"]
        else:  # small judged bad, big judged good: two judge requests
            assert r["cost"] == pytest.approx(0.001 + 0.005 + 0.02 + 0.005), r
            assert [a.get("judge", False) for a in r["answers"]] == [True, False, True], r
    assert len(judged) == 9
    assert out.summary["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs.values()))
    assert out.summary["quality"]["models"]["small"] == {"asked": 6, "valid": 3, "fraction": 0.5}
    assert "judge" not in out.summary["quality"]["models"]  # asked to judge, not to answer


async def test_an_error_is_retried_and_falls_back_but_only_a_wrong_answer_escalates(tmp_path: Path) -> None:
    attempts: dict[str, int] = {}

    def behave(model: str, text: str) -> str | int:
        if model == "broken":
            return 500
        i = qid(text)
        key = f"{model}{i}"
        attempts[key] = attempts.get(key, 0) + 1
        if model == "small" and i % 2 == 0 and attempts[key] == 1:
            return 503  # retried on small
        return f"answer {i}" if model == "big" or i % 3 else "wrong"

    body = [
        orjson.dumps(
            {
                "id": f"q{i}",
                "prompt": f"question {i}?",
                "expected": f"answer {i}",
                **({"tag": "t"} if i < 3 else {}),
            }
        ).decode()
        for i in range(9)
    ]
    async with chat_server(answering(behave)) as base:
        sets = sets_for(
            base,
            **{
                "quality.expected": True,
                "models": [
                    {"name": "small", "price_per_request": 0.001},
                    {"name": "big", "price_per_request": 0.02},
                    {"name": "broken", "price_per_request": 1.0, "weight": 0},
                ],
                "routing.rules": [{"tag": "t", "models": ["broken"], "fallback": ["small"]}],
                "retry.max_attempts": 2,
            },
        )
        w = load_workload("cascade", tmp_path, sets, prompts="\n".join(body))
        out = await run(w)
    recs = journal(w)
    for i in range(9):
        r = recs[f"q{i}"]
        wrong = i % 3 == 0
        tried = (["broken"] if i < 3 else []) + ["small"] + (["big"] if wrong else [])
        assert r.get("models_tried", tried if len(tried) > 1 else None) == (
            tried if len(tried) > 1 else None
        ), r
        assert r.get("escalations", 0) == (1 if wrong else 0), r
        assert r["cost"] == pytest.approx(0.001 + (0.02 if wrong else 0.0)), r  # errors cost nothing
        assert r["valid"] is True
    assert out.summary["cascade"]["escalated"] == 3
    assert out.summary["requests"]["error"] == 0


async def test_packed_tasks_are_judged_on_their_own_sections(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def behave(model: str, text: str) -> str:
        i = qid(text)
        return f"answer {i}" if model == "big" or i % 4 else "wrong"

    async with chat_server(answering(behave, seen)) as base:
        sets = sets_for(base, **{"quality.expected": True, "packing.size": 4, "run.concurrency": 1})
        w = load_workload("cascade", tmp_path, sets, prompts=expecting(8))
        out = await run(w)
    recs = journal(w)
    # two packs to small, then each wrong task alone to big
    assert sorted(t for m, t in seen if m == "big") == ["question 0?", "question 4?"], seen
    assert [parse_pack(t) is not None for m, t in seen if m == "small"] == [True, True], seen
    for i in range(8):
        r = recs[f"q{i}"]
        assert r["valid"] is True and r["pack_size"] == 4, r
        if i % 4 == 0:
            assert r["model"] == "big" and r["models_tried"] == ["small", "big"], r
            assert r["cost"] == pytest.approx(0.001 / 4 + 0.02), r
            assert r["answers"][0]["invalid_reason"] == "expected"
        else:
            assert r["model"] == "small" and r["cost"] == pytest.approx(0.001 / 4), r
    assert out.summary["cost"]["total"] == pytest.approx(2 * 0.001 + 2 * 0.02)
    assert out.summary["packing"]["requests_sent"] == 2


async def test_each_turn_of_a_session_is_judged(tmp_path: Path) -> None:
    def behave(model: str, text: str) -> str:
        return "ok" if model == "big" or text != "two" else "nope"

    lines = "\n".join(
        orjson.dumps({"id": f"s{i}", "turns": ["one", "two", "three"]}).decode() for i in range(3)
    )
    async with chat_server(answering(behave)) as base:
        sets = sets_for(base, **{"quality.regex": "^ok$"})
        w = load_workload("cascade", tmp_path, sets, prompts=lines)
        await run(w, total_expected=9)
    recs = journal(w)
    assert len(recs) == 9
    for i in range(3):
        assert recs[f"s{i}#t1"]["model"] == "small" and recs[f"s{i}#t1"]["valid"] is True
        two = recs[f"s{i}#t2"]
        assert two["models_tried"] == ["small", "big"] and two["valid"] is True, two


async def test_workers_and_resume_record_every_final_answer_once(tmp_path: Path) -> None:
    def behave(model: str, text: str) -> str:
        i = qid(text)
        return f"answer {i}" if model == "big" or i % 2 else "wrong"

    async with chat_server(answering(behave)) as base:
        sets = sets_for(base, **{"quality.expected": True, "run.workers": 2})
        w = load_workload("cascade", tmp_path, sets, prompts=expecting(20))
        assert (await run(w)).exit_code == 0  # the whole run, on two workers
        recs = journal(w)
        assert len(recs) == 20 and sum(1 for r in recs.values() if r.get("escalations")) == 10
        # a journal cut to its first 7 lines: --resume sends exactly the other 13
        lines = w.results_path().read_bytes().splitlines()[:7]
        w.results_path().write_bytes(b"\n".join(lines) + b"\n")
        done, _ = ok_ids(w.results_path())
        out = await run(w, skip_ids=done, total_expected=20 - len(done))
    recs = journal(w)
    assert len(recs) == 20 and len(w.results_path().read_bytes().splitlines()) == 20
    assert all(r["valid"] is True for r in recs.values())
    s = summary_from_journal(w.results_path())
    assert s["cascade"]["escalated"] == 10 and s["quality"]["valid"] == 20, s["cascade"]
    assert s["cost"]["total"] == pytest.approx(20 * 0.001 + 10 * 0.02)
    assert out.summary["quality"]["valid"] == 20 - len(done) == 13  # this session's part
