"""A server's `usage` counts are believed only within bounds: negative, huge, non-integer counts and
counts over the request's own cap are not recorded nor priced, whatever the API (chat, text
completions, embeddings, Responses) and whether streamed or not; the run says so once.

A loopback server of the test's own answers each request with the usage its prompt names; the run
goes through the engine over real HTTP, and the journal and the summary are read back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send.usage import USAGE_MAX
from tests.support import journal, run
from tests.support.workloads import load_workload

CAP = 16
"""Every model's max_tokens."""

HOSTILE: dict[str, dict[str, Any]] = {
    "neg-output": {"out": -3000},
    "huge-input": {"in": 10**15},
    "over-cap": {"out": 500_000},  # below USAGE_MAX, far over what max_tokens = 16 allows
    "float-input": {"in": 1e30},
    "string-output": {"out": "12"},
    "neg-total": {"total": -1},
    "neg-cached": {"cached": -5},
    "huge-reasoning": {"reasoning": 10**12},
    "just-over-max": {"in": USAGE_MAX + 1},
}
HONEST = {"in": 7, "out": 3, "cached": 2, "reasoning": 1}
APIS = ("chat", "completions", "embeddings", "responses")


def applies(api: str, name: str) -> bool:
    """An embeddings usage has input and total tokens only."""
    return api != "embeddings" or bool(HOSTILE[name].keys() & {"in", "total"})


def usage_of(api: str, u: dict[str, Any]) -> dict[str, Any]:
    """The usage object `api` answers with, from the counts `u` names."""
    inp, out = ("input", "output") if api == "responses" else ("prompt", "completion")
    d: dict[str, Any] = {f"{inp}_tokens": u.get("in", 7)}
    if api != "embeddings":
        d[f"{out}_tokens"] = u.get("out", 3)
        d[f"{inp}_tokens_details"] = {"cached_tokens": u.get("cached", 0)}
        d[f"{out}_tokens_details"] = {"reasoning_tokens": u.get("reasoning", 0)}
    d["total_tokens"] = u.get("total", 10)
    return d


def sse(*objs: Any) -> bytes:
    return b"".join(b"data: " + (o if isinstance(o, bytes) else orjson.dumps(o)) + b"\n\n" for o in objs)


async def answer(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    body = orjson.loads(raw)
    api = request.path.rsplit("/", 1)[-1]
    api = "chat" if api == "completions" and "chat" in request.path else api
    name = next((k for k in HOSTILE if k.encode() in raw), None)
    u = usage_of(api, HOSTILE[name] if name else HONEST)
    words = "three short words"
    if api == "embeddings":
        return web.json_response({"object": "list", "data": [{"embedding": [0.6, 0.8]}], "usage": u})
    if not body.get("stream"):
        if api == "responses":
            item = {"type": "message", "content": [{"type": "output_text", "text": words}]}
            return web.json_response({"status": "completed", "output": [item], "usage": u})
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        choice.update({"message": {"content": words}} if api == "chat" else {"text": words})
        return web.json_response({"choices": [choice], "usage": u})
    if api == "responses":
        deltas = [{"type": "response.output_text.delta", "delta": w + " "} for w in words.split()]
        data = sse(*deltas, {"type": "response.completed", "response": {"usage": u}})
    else:
        key = "delta" if api == "chat" else "text"
        piece = (lambda w: {"content": w}) if api == "chat" else (lambda w: w)
        pieces = [{"choices": [{"index": 0, key: piece(w)}]} for w in words.split()]
        end = {"choices": [{"index": 0, key: {} if api == "chat" else "", "finish_reason": "stop"}]}
        data = sse(*pieces, end, {"choices": [], "usage": u}, b"[DONE]")
    return web.Response(body=data, content_type="text/event-stream")


@asynccontextmanager
async def usage_server() -> AsyncIterator[str]:
    app = web.Application()
    for path in ("chat/completions", "completions", "embeddings", "responses"):
        app.router.add_post(f"/v1/{path}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def workload(tmp_path: Path, base: str, stream: bool) -> Any:
    lines = []
    for api in APIS:
        for name in [*HOSTILE, "honest"]:
            lines.append({"id": f"{api}:{name}", "prompt": f"please answer {name} now", "model": api})
    (tmp_path / "prompts.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    priced = {"max_tokens": CAP, "price_per_1m_input": 1000, "price_per_1m_output": 2000}
    sets = {
        "run.timeout": "10s",
        "run.stream": stream,
        "endpoints": {"e": {"base_url": base}},  # "e", no API key: the run's warning names it
        "retry": {"max_attempts": 1},
        "models": [{"name": api, "endpoint": "e", "api": api, **priced} for api in APIS],
    }
    return load_workload("upstream", tmp_path, sets)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_usage_out_of_bounds_is_estimated_never_priced(tmp_path: Path, stream: bool) -> None:
    async with usage_server() as base:
        w = workload(tmp_path, base, stream)
        out = await run(w)
    recs = {r["id"]: r for r in journal(w)}
    assert len(recs) == len(APIS) * (len(HOSTILE) + 1), sorted(recs)
    assert all(r["status"] == "ok" for r in recs.values()), [r for r in recs.values() if r["status"] != "ok"]
    for api in APIS:
        honest = recs[f"{api}:honest"]
        assert honest["tokens_source"] == "usage" and honest["input_tokens"] == 7, honest
        for name in HOSTILE:
            r = recs[f"{api}:{name}"]
            where = f"{api}:{name}: {r}"
            assert r["tokens_source"] == ("estimate" if applies(api, name) else "usage"), where
            # the estimates: the prompt's characters / 4, the answer's chunks or words
            assert 0 < r["input_tokens"] <= 10, where
            assert 0 <= r["output_tokens"] <= CAP, where
            assert 0 <= r["cost"] < 0.1, where
            assert 0 <= r.get("cached_tokens", 0) <= r["input_tokens"], where
            assert 0 <= r.get("reasoning_tokens", 0) <= max(r["output_tokens"], 0), where
    s = out.summary
    n_hostile = sum(applies(api, name) for api in APIS for name in HOSTILE)
    want = {"usage": len(recs) - n_hostile, "estimate": n_hostile}
    assert s["tokens_source"] == want, s["tokens_source"]
    most = 20 * len(recs)
    assert 0 < s["tokens"]["input"] < most and 0 <= s["tokens"]["output"] < most, s["tokens"]
    assert 0 < s["cost"]["total"] < 1.0, s["cost"]
    for name, m in s["models"].items():
        assert 0 < m["cost"]["total"] < 0.5, (name, m["cost"])
    said = [x for x in out.warnings if "usage count from the server was not believed" in x]
    assert len(said) == 1, out.warnings
    assert "endpoint e" in said[0] and 'tokens_source = "estimate"' in said[0], said
