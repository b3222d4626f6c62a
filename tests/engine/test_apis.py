"""`[[models]] api`: chat, text completions and embeddings, each on its own endpoint path, over real
HTTP (the simulator, and a recording server of the test's own), and OpenAI Batch input lines for
each API with their Batch output."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import Engine
from oxconsole.workload import Workload, WorkloadError, check_prompts, describe
from tests.support import oxconsole_here
from tests.support.workloads import load_workload, write_workload


def journal(w: Workload) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in w.results_path().read_bytes().splitlines() if x.strip()]


async def run(w: Workload, code: int = 0) -> list[dict[str, Any]]:
    e = Engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    out = await e.run()
    assert out.exit_code == code, out
    return journal(w)


TWO = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


async def test_each_api_against_the_simulator(tmp_path: Path) -> None:
    prompts = [
        {"id": "c", "prompt": "say something", "model": "chat"},
        {"id": "t", "prompt": "say something", "model": "text"},
        {"id": "e", "prompt": "embed this text please", "model": "emb"},
        {"id": "t2", "model": "text", "messages": TWO},
    ]
    w = load_workload(
        "sim_apis",
        tmp_path,
        {"prompts": {"file": "prompts.jsonl"}},
        prompts="".join(orjson.dumps(x).decode() + "\n" for x in prompts),
    )
    recs = {r["id"]: r for r in await run(w)}
    assert all(r["status"] == "ok" for r in recs.values()), recs
    for rid in ("c", "t", "t2"):
        r = recs[rid]
        assert r["output_tokens"] == 8 and r["tokens_source"] == "usage"
        assert r["ttft_ms"] >= 4 and r["itl_ms"] >= 0 and r["text"].split() and len(r["text"].split()) == 8
    e = recs["e"]
    assert "ttft_ms" not in e and "itl_ms" not in e
    assert e["output_tokens"] == 0 and e["input_tokens"] == (len("embed this text please") + 3) // 4
    assert e["tokens_source"] == "usage" and e["latency_ms"] >= 4
    vectors = orjson.loads(e["text"])
    assert len(vectors) == 1 and len(vectors[0]) == 16
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-3
    # the text model got the two messages' text joined by a blank line: (len + 3) // 4 tokens
    assert recs["t2"]["input_tokens"] == (len("be brief\n\nhi") + 3) // 4


def _recorder(seen: list[tuple[str, dict[str, Any]]]) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append((request.path, body))
        if request.path.endswith("/embeddings"):
            return web.json_response(
                {"object": "list", "data": [{"embedding": [0.5, 0.5]}], "usage": {"prompt_tokens": 3}}
            )
        choice = {"index": 0, "text": "two words", "finish_reason": "stop"}
        if request.path.endswith("/chat/completions"):
            choice = {"index": 0, "message": {"content": "two words"}, "finish_reason": "stop"}
        return web.json_response({"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})

    app = web.Application()
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
        app.router.add_post(path, handle)
    return app


async def test_paths_and_bodies_on_the_wire(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    runner = web.AppRunner(_recorder(seen))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        w = load_workload(
            "sim_apis",
            tmp_path,
            {
                "run": {"stream": False},
                "endpoints.default.base_url": f"http://127.0.0.1:{port}/v1",
                "models.chat.max_tokens": 5,
                "models.text.max_tokens": 5,
                "models.text.temperature": 0.5,
                "models.emb.max_tokens": 5,
                "models.emb.extra_body": {"dimensions": 2},
                "routing.strategy": "round_robin",
                "prompts.items": ["hello", "hello", "hello"],
                "sim": None,
            },
        )
        recs = await run(w)
    finally:
        await runner.cleanup()
    by_path = {p: b for p, b in seen}
    assert by_path["/v1/chat/completions"]["messages"] == [{"role": "user", "content": "hello"}]
    assert by_path["/v1/completions"] == {
        "model": "text",
        "prompt": "hello",
        "stream": False,
        "max_tokens": 5,
        "temperature": 0.5,
    }
    assert by_path["/v1/embeddings"] == {"model": "emb", "input": "hello", "dimensions": 2}
    by_model = {r["model"]: r for r in recs}
    assert by_model["text"]["text"] == "two words" and by_model["text"]["output_tokens"] == 2
    assert by_model["emb"]["output_tokens"] == 0 and by_model["emb"]["input_tokens"] == 3


def test_api_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(
        WorkloadError, match=re.escape('models.0.api: expected "chat" | "completions" | "embeddings"')
    ):
        load_workload("minimal", tmp_path, {"models.0.api": "embedding"})


def test_validate_names_each_models_api(tmp_path: Path) -> None:
    w = load_workload("sim_apis", tmp_path)
    text = describe(w, check_prompts(w))
    assert "completions" in text and "embeddings" in text


# --------------------------------------------------------------------------------------------
# OpenAI Batch input lines for each API
# --------------------------------------------------------------------------------------------


def _line(cid: str, url: str, model: str, **body: Any) -> dict[str, Any]:
    return {"custom_id": cid, "method": "POST", "url": url, "body": {"model": model, **body}}


BATCH = {"prompts": {"file": "batch.jsonl", "format": "openai-batch"}}
"""The prompts of tests/workloads/sim_apis.toml as OpenAI Batch input lines, in batch.jsonl."""


def _write(tmp_path: Path, lines: list[dict[str, Any]]) -> None:
    (tmp_path / "batch.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (
            _line("x", "/v1/embeddings", "text", input="a"),
            'line 2: url: expected "/v1/completions" (model text has api = "completions"), '
            'got "/v1/embeddings"',
        ),
        (
            _line("x", "/v1/chat/completions", "emb", messages=[{"role": "user", "content": "a"}]),
            'line 2: url: expected "/v1/embeddings" (model emb has api = "embeddings")',
        ),
        (
            _line("x", "/v1/completions", "text", messages=[]),
            "line 2: body.prompt: expected a non-empty string",
        ),
        (
            _line("x", "/v1/embeddings", "emb", input=[1, "a"]),
            "line 2: body.input: expected a non-empty string",
        ),
        (
            _line("x", "/v1/audio/speech", "chat"),
            'line 2: url: expected "/v1/chat/completions" | "/v1/completions"',
        ),
        (
            _line("x", "/v1/responses", "chat", input="a"),
            'line 2: url: expected "/v1/chat/completions" (model chat has api = "chat")',
        ),
    ],
)
def test_batch_lines_must_match_their_models_api(tmp_path: Path, line: dict[str, Any], fragment: str) -> None:
    _write(tmp_path, [_line("ok", "/v1/completions", "text", prompt="a"), line])
    w = load_workload("sim_apis", tmp_path, BATCH)
    with pytest.raises(WorkloadError, match=re.escape(fragment)):
        check_prompts(w)


def test_batch_completions_and_embeddings_write_their_output(tmp_path: Path) -> None:
    _write(
        tmp_path,
        [
            _line("chat-1", "/v1/chat/completions", "chat", messages=[{"role": "user", "content": "hi"}]),
            _line("text-1", "/v1/completions", "text", prompt="once upon a time", max_tokens=3),
            _line("emb-1", "/v1/embeddings", "emb", input=["first text", "second text"], dimensions=4),
        ],
    )
    write_workload(
        "sim_apis",
        tmp_path,
        {**BATCH, "output": {"results": "out/results.jsonl", "batch_output": "out/batch.jsonl"}},
        file="w.toml",
    )
    r = oxconsole_here("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = {
        x["custom_id"]: x for x in map(orjson.loads, (tmp_path / "out/batch.jsonl").read_bytes().splitlines())
    }
    assert set(out) == {"chat-1", "text-1", "emb-1"}
    chat = out["chat-1"]["response"]["body"]
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["content"]
    text = out["text-1"]["response"]["body"]
    assert text["object"] == "text_completion" and len(text["choices"][0]["text"].split()) == 3
    assert text["usage"]["completion_tokens"] == 3
    emb = out["emb-1"]["response"]["body"]
    assert emb["object"] == "list" and [d["index"] for d in emb["data"]] == [0, 1]
    assert all(len(d["embedding"]) == 4 for d in emb["data"]), [
        d for d in emb["data"] if len(d["embedding"]) != 4
    ][:5]
    assert emb["usage"] == {"prompt_tokens": 3 + 3, "total_tokens": 6}
    modes = {n: oct((tmp_path / "out" / n).stat().st_mode & 0o777) for n in ("batch.jsonl", "results.jsonl")}
    assert modes == {"batch.jsonl": "0o600", "results.jsonl": "0o600"}, modes
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    assert {m: s["requests"]["ok"] for m, s in summary["models"].items()} == {"chat": 1, "text": 1, "emb": 1}


def test_every_bad_batch_line_is_told_up_to_a_screenful(tmp_path: Path) -> None:
    good = _line("ok", "/v1/completions", "text", prompt="a")
    _write(tmp_path, [good, *(_line(f"b{i}", "/v1/embeddings", "text", input="a") for i in range(25))])
    with pytest.raises(WorkloadError) as e:
        check_prompts(load_workload("sim_apis", tmp_path, BATCH))
    told = e.value.errors
    lines = [n for n in range(2, 27) if any(f"line {n}: url" in m for m in told)]
    assert lines == list(range(2, 22)), told
    assert told[-1].endswith("... and 5 more bad lines"), told


def test_embeddings_example_validates() -> None:
    from oxconsole.workload import load_workload

    w = load_workload(Path(__file__).resolve().parents[2] / "examples" / "embeddings.toml")
    stats = check_prompts(w)
    assert stats.count == 4 and {m.api for m in w.models} == {"chat", "completions", "embeddings"}
