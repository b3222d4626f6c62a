"""Multi-turn sessions (`"turns"` in a prompts line), over real HTTP: the history each turn sends,
the ids, a failed turn ending its session, concurrency counting requests, `--resume`."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import Engine
from oxconsole.journal.journal import ok_ids
from oxconsole.workload import Workload, WorkloadError, check_prompts, describe
from tests.support.http import chat_server
from tests.support.workloads import load_workload


def journal(w: Workload) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in w.results_path().read_bytes().splitlines() if x.strip()]


async def run(w: Workload, code: int = 0, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    e = Engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests, **kw)
    out = await e.run()
    assert out.exit_code == code, out
    return journal(w), out.summary


def lines(*objs: dict[str, Any]) -> str:
    return "".join(orjson.dumps(o).decode() + "\n" for o in objs)


def _server(seen: list[list[dict[str, Any]]]) -> Any:
    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        msgs = body["messages"]
        seen.append(msgs)
        last = msgs[-1]["content"]
        if "FAIL" in last:
            return web.json_response({"error": {"message": "no"}}, status=500)
        answer = {
            "choices": [{"message": {"content": f"answer to {last}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 3},
        }
        return web.json_response(answer)

    return handler


def _workload(tmp_path: Path, url: str, prompts: str, *, save_text: bool = False) -> Workload:
    """Two models, "a" and "b", on the test's own server: no streaming, no retries."""
    return load_workload(
        "sim_instant",
        tmp_path,
        {
            "run": {"stream": False},
            "endpoints.default.base_url": f"{url}/v1",
            "models": [{"name": "a"}, {"name": "b"}],
            "retry.max_attempts": 1,
            "prompts": {"file": "prompts.jsonl"},
            "output": {"results": "results.jsonl", "save_text": save_text},
            "sim": None,
        },
        prompts=prompts,
    )


async def test_each_turn_sends_the_whole_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[list[dict[str, Any]]] = []
    async with chat_server(_server(seen)) as url:
        w = _workload(
            tmp_path,
            url,
            lines(
                {"id": "s", "turns": ["one", "two", "three"], "tag": "t"},
                {"id": "single", "prompt": "alone"},
                {"id": "f", "turns": ["hello", "please FAIL", "never sent"]},
            ),
        )
        recs, summary = await run(w, code=1)
    by_id = {r["id"]: r for r in recs}
    assert set(by_id) == {"s#t1", "s#t2", "s#t3", "single", "f#t1", "f#t2"}
    assert [by_id[f"s#t{k}"]["status"] for k in (1, 2, 3)] == ["ok"] * 3
    assert by_id["f#t2"]["status"] == "error"
    assert all("text" not in r for r in recs), [r for r in recs if "text" in r][
        :5
    ]  # save_text off: answers kept only while needed
    third = next(m for m in seen if m[-1]["content"] == "three")
    assert third == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "answer to one"},
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "answer to two"},
        {"role": "user", "content": "three"},
    ]
    assert not any(m[-1]["content"] == "never sent" for m in seen)
    # later turns stay on the model that answered turn 1
    assert len({by_id[f"s#t{k}"]["model"] for k in (1, 2, 3)}) == 1
    assert summary["conversations"] == {
        "total": 2,
        "completed": 1,
        "failed": 1,
        "turns": 5,
        "turns_not_sent": 1,
    }
    assert summary["requests"]["total"] == 6


async def test_sessions_interleave_within_concurrency(tmp_path: Path) -> None:
    sessions: list[dict[str, Any]] = [
        {"id": f"s{i}", "turns": [f"q{i}-{k}" for k in range(4)]} for i in range(12)
    ]
    w = load_workload(
        "sim_instant",
        tmp_path,
        {
            "run.concurrency": 3,
            "sim.models.m": {"ttft": "10ms", "tokens_per_s": 500, "output_tokens": 5, "jitter": 0},
            "prompts": {"file": "prompts.jsonl"},
        },
        prompts=lines(*sessions),
    )
    assert check_prompts(w).total_requests == 48
    recs, summary = await run(w)
    assert len(recs) == 48 and all(r["status"] == "ok" for r in recs)
    assert all(r["ttft_ms"] > 5 for r in recs), [r for r in recs if not (r["ttft_ms"] > 5)][:5]
    assert summary["conversations"]["completed"] == 12 and summary["conversations"]["turns"] == 48
    # each session's turns were sent in order, one after the other's answer
    for s in sessions:
        own = [r for r in recs if r["id"].startswith(s["id"] + "#")]
        assert [r["id"] for r in own] == [f"{s['id']}#t{k}" for k in range(1, 5)]
        for a, b in itertools.pairwise(own):
            assert b["t_sent"] >= a["t_sent"] + a["latency_ms"] / 1000.0 - 0.002
    # concurrency counted requests: more than one session was open at once, never > 3 in flight
    starts = sorted((r["t_sent"], 1) for r in recs) + sorted(
        (r["t_sent"] + r["latency_ms"] / 1000.0, -1) for r in recs
    )
    live = peak = 0
    for _, d in sorted(starts, key=lambda x: (x[0], x[1])):
        live += d
        peak = max(peak, live)
    assert 2 <= peak <= 3


async def test_resume_skips_complete_sessions_and_restarts_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    seen: list[list[dict[str, Any]]] = []
    async with chat_server(_server(seen)) as url:
        w = _workload(
            tmp_path,
            url,
            lines({"id": "done", "turns": ["x", "y"]}, {"id": "half", "turns": ["p", "FAIL once"]}),
            save_text=True,
        )
        await run(w, code=1)
        seen.clear()
        skip = ok_ids(w.results_path())[0]
        assert "done#t2" in skip and "half#t1" in skip
        _recs, summary = await run(w, code=1, skip_ids=skip)
    assert [m[-1]["content"] for m in seen] == ["p", "FAIL once"]  # "half" again from turn 1
    assert summary["conversations"]["skipped"] == 1
    assert summary["conversations"]["total"] == 1


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ({"turns": []}, "line 1: turns: expected a non-empty array of strings"),
        ({"turns": ["a", 3]}, "line 1: turns.1: expected a non-empty string, got 3"),
        ({"turns": ["a"], "prompt": "b"}, 'line 1: expected only one of "prompt", "messages" or "turns"'),
        ({"turns": "a"}, "line 1: turns: expected a non-empty array"),
    ],
)
def test_turn_errors_are_named(tmp_path: Path, line: dict[str, Any], fragment: str) -> None:
    w = load_workload(
        "sim_instant",
        tmp_path,
        {"prompts": {"file": "prompts.jsonl"}},
        prompts=lines(line),
    )
    with pytest.raises(WorkloadError, match=re.escape(fragment)):
        check_prompts(w)


def test_validate_counts_sessions_and_turns(tmp_path: Path) -> None:
    w = load_workload(
        "sim_instant",
        tmp_path,
        {"prompts": {"file": "prompts.jsonl"}},
        prompts=lines({"turns": ["a", "b", "c"]}, {"turns": ["d"]}, {"prompt": "e"}),
    )
    stats = check_prompts(w)
    assert (stats.sessions, stats.turns, stats.total_requests) == (2, 4, 5)
    assert "2 multi-turn sessions, 4 turns" in describe(w, stats)


@pytest.mark.slow
async def test_sessions_with_worker_processes(tmp_path: Path) -> None:
    from oxconsole.engine.runner import make_engine

    w = load_workload(
        "sim_instant",
        tmp_path,
        {
            "run": {"workers": 2},
            "sim.models.m": {"ttft": "2ms", "tokens_per_s": 0, "output_tokens": 3, "jitter": 0},
            "prompts": {"file": "prompts.jsonl"},
        },
        prompts=lines(*({"id": f"s{i}", "turns": ["a", "b", "c"]} for i in range(6))),
    )
    e = make_engine(w, results_path=w.results_path(), total_expected=18)
    out = await e.run()
    assert out.exit_code == 0, out
    assert sorted(r["id"] for r in journal(w)) == sorted(f"s{i}#t{k}" for i in range(6) for k in (1, 2, 3))
    assert out.summary["conversations"] == {
        "total": 6,
        "completed": 6,
        "failed": 0,
        "turns": 18,
        "turns_not_sent": 0,
    }


def test_sessions_example_validates() -> None:
    from oxconsole.workload import load_workload

    w = load_workload(Path(__file__).resolve().parents[2] / "examples" / "sessions.toml")
    stats = check_prompts(w)
    assert (stats.sessions, stats.turns, stats.total_requests) == (4, 12, 13)


def test_sessions_are_not_packed(tmp_path: Path) -> None:
    w = load_workload(
        "sim_instant",
        tmp_path,
        {"prompts": {"file": "prompts.jsonl"}, "packing.size": 4},
        prompts=lines({"turns": ["a", "b"]}),
    )
    with pytest.raises(WorkloadError, match=re.escape("packing.size: expected 1 (multi-turn sessions")):
        check_prompts(w)
