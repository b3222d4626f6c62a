"""Servers that answer differently from what was asked: the engine accepts what it can and says
what it could not measure; for what it cannot accept, the error says what is likely wrong.

Each server is a small aiohttp app on loopback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from oxconsole.engine.runner import RunOutcome
from tests.support import journal, run
from tests.support.http import Handler, chat_server
from tests.support.workloads import load_workload


async def run_against(
    handler: Handler, tmp_path: Path, path: str = "/v1"
) -> tuple[RunOutcome, list[dict[str, Any]]]:
    async with chat_server(handler) as base:
        w = load_workload("server", tmp_path, {"endpoints.default.base_url": f"{base}{path}"})
        out = await run(w)
    return out, journal(w)


async def json_answer(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    assert body["stream"] is True
    answer = {
        "id": "x",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def test_a_server_that_does_not_stream_is_read_as_json(tmp_path: Path) -> None:
    out, recs = await run_against(json_answer, tmp_path)
    assert out.summary["requests"]["ok"] == 6
    assert all(r["status"] == "ok" and r["output_tokens"] == 1 and r.get("ttft_ms") is None for r in recs), [
        r
        for r in recs
        if not (r["status"] == "ok" and r["output_tokens"] == 1 and (r.get("ttft_ms") is None))
    ][:5]
    assert all(r["latency_ms"] > 0 for r in recs), [r for r in recs if not (r["latency_ms"] > 0)][:5]
    notes = [w for w in out.warnings if "does not stream" in w]
    assert len(notes) == 1 and "endpoint default" in notes[0]


async def test_404_says_base_url_may_lack_v1(tmp_path: Path) -> None:
    out, recs = await run_against(json_answer, tmp_path, path="")
    assert out.summary["requests"]["error"] == 6
    assert all(r["error"] == "http_404" for r in recs), [r for r in recs if r["error"] != "http_404"][:5]
    assert "missing /v1?" in recs[0]["error_detail"]

    # with /v1 in the URL, a 404 carries no such hint
    async def not_found(request: web.Request) -> web.StreamResponse:
        return web.Response(
            status=404, body=b'{"error": {"message": "model m not found"}}', content_type="application/json"
        )

    out, recs = await run_against(not_found, tmp_path)
    recs = recs[6:]  # the engine appends to the first run's journal
    assert all(r["error"] == "http_404" and "/v1?" not in r["error_detail"] for r in recs), [
        r for r in recs if not (r["error"] == "http_404" and "/v1?" not in r["error_detail"])
    ][:5]
    assert "model m not found" in recs[0]["error_detail"]
