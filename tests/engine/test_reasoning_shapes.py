"""The shapes reasoning models, cached prompts and tool calls take on the wire, each played by a
small loopback server the simulator is not: chat's `reasoning` field, `<think>` tags split across
chunks, tool-call deltas, usage with and without its details, errors mid-stream, and the
Responses API's events (summaries, function calls, failures) streamed and answered whole. Each is
read through the real client over real HTTP, timed as it is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.client import EndpointClient
from oxconsole.engine.send.stream import _Events
from tests.support import journal, run
from tests.support.workloads import load_workload

GAP = 0.04
"""Seconds between two timed writes."""

HEAD = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":['
DONE = b"data: [DONE]\n\n"


def delta(**fields: Any) -> bytes:
    return HEAD + orjson.dumps({"index": 0, "delta": fields, "finish_reason": None}) + b"]}\n\n"


FINISH = HEAD + b'{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'


def usage(**u: Any) -> bytes:
    return b'data: {"id":"c1","choices":[],"usage":' + orjson.dumps(u) + b"}\n\n"


def event(kind: str, **fields: Any) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"


SEEN: list[dict[str, Any]] = []
"""The bodies the server was sent."""

Script = list[bytes]
"""Each item one timed write, GAP apart."""


@asynccontextmanager
async def server(script: Script, whole: dict[str, Any] | None = None) -> AsyncIterator[EndpointClient]:
    """A loopback server answering /v1/chat/completions and /v1/responses with `script` (streamed,
    one write every GAP s) or `whole` (one JSON body); yields a client for it."""

    async def handler(request: web.Request) -> web.StreamResponse:
        SEEN.append(await request.json())
        if whole is not None:
            return web.json_response(whole)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, data in enumerate(script):
            if i:
                await asyncio.sleep(GAP)
            await resp.write(data)
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post("/v1/responses", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = EndpointClient("e", f"http://127.0.0.1:{port}/v1", None, max_connections=2, timeout=10.0)
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()


async def attempt(script: Script, api: str = "chat", whole: dict[str, Any] | None = None) -> AttemptResult:
    async with server(script, whole) as c:
        return await c.attempt({"model": "m"}, stream=whole is None, timeout=10.0, save_text=True, api=api)


def writes_between(res: AttemptResult, k: int) -> None:
    """TTFOT came k writes after TTFT (each GAP apart, a loaded machine late by at most one)."""
    assert res.ttft_ms is not None and res.ttfot_ms is not None, res
    gap = (res.ttfot_ms - res.ttft_ms) / 1000
    assert k * GAP * 0.9 <= gap <= (k + 1) * GAP, (gap, k, res)


@pytest.mark.timing  # TTFOT - TTFT counted in the server's write gaps
async def test_chat_reasoning_field_with_usage_details() -> None:
    script = [
        delta(role="assistant", content=""),
        delta(reasoning="let"),
        delta(reasoning=" me"),
        delta(reasoning=" think"),
        delta(content="Paris"),
        delta(content="."),
        FINISH
        + usage(
            prompt_tokens=40,
            completion_tokens=5,
            prompt_tokens_details={"cached_tokens": 32},
            completion_tokens_details={"reasoning_tokens": 3},
        )
        + DONE,
    ]
    res = await attempt(script)
    assert res.ok, res
    writes_between(res, 3)
    assert (res.reasoning_tokens, res.cached_tokens, res.reasoning_estimate) == (3, 32, 3), res
    assert res.content_chunks == 5 and res.text == "Paris.", res
    # ITL over every token, reasoning included: 4 gaps from the first reasoning to the last answer
    assert res.itl_ms is not None and res.itl_ms >= GAP * 1000 * 0.9, res


async def test_usage_without_details_leaves_them_unknown() -> None:
    script = [
        delta(reasoning_content="hm"),
        delta(content="ok"),
        FINISH + usage(prompt_tokens=4, completion_tokens=2, prompt_tokens_details=None) + DONE,
    ]
    res = await attempt(script)
    assert res.ok and res.cached_tokens is None and res.reasoning_tokens is None, res
    assert res.reasoning_estimate == 1 and res.output_tokens == 2, res


@pytest.mark.timing  # TTFOT - TTFT counted in the server's write gaps
async def test_think_tags_split_across_chunks() -> None:
    script = [
        delta(role="assistant", content=""),
        delta(content="<th"),
        delta(content="ink>step"),
        delta(content=" one</th"),
        delta(content="ink>"),
        delta(content="\n\n"),
        delta(content="Hello"),
        delta(content=" world") + FINISH + DONE,
    ]
    res = await attempt(script)
    assert res.ok, res
    writes_between(res, 5)
    assert res.text == "Hello world", res
    assert res.reasoning_estimate == 4, res  # the four chunks from <think> to </think>
    assert res.content_chunks == 7 and res.output_tokens is None, res


@pytest.mark.parametrize("step", [1, 3, 7, 50])
def test_think_tags_read_the_same_whatever_the_read_boundaries(step: int) -> None:
    body = b"".join(
        [delta(content="<think>a"), delta(content=" b</think>"), delta(content="c"), FINISH, DONE]
    )
    res = AttemptResult(ok=False)
    ev = _Events(res, True)
    for i in range(0, len(body), step):
        ev.feed(body[i : i + step], float(i))
    ev.end(0.0, 1e6)
    assert res.text == "c" and res.reasoning_estimate == 2 and res.content_chunks == 3, res
    third = body.index(delta(content="c")) + len(delta(content="c")) - 2  # where its line ends
    assert res.ttfot_ms == 1000.0 * ((third // step) * step), (res.ttfot_ms, third, step)


async def test_plain_content_starting_like_a_tag_is_answer() -> None:
    res = await attempt([delta(content="<"), delta(content="b>bold</b>") + FINISH + DONE])
    assert res.ok and res.text == "<b>bold</b>" and res.reasoning_estimate is None, res
    assert res.ttfot_ms == res.ttft_ms, res


async def test_tool_call_deltas_count_as_output_and_are_counted() -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": ""}}
    script = [
        delta(role="assistant", content=None),
        delta(tool_calls=[{"index": 0, "id": "a", **call}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"x":'}}]),
        delta(tool_calls=[{"index": 1, "id": "b", **call}]),
        delta(tool_calls=[{"index": 1, "function": {"arguments": "1}"}}]) + FINISH + DONE,
    ]
    res = await attempt(script)
    assert res.ok and res.tool_calls == 2 and res.content_chunks == 4, res
    assert res.ttft_ms is not None and res.ttfot_ms == res.ttft_ms, res
    assert res.itl_ms is not None and res.itl_ms >= GAP * 1000 * 0.9, res


async def test_an_error_mid_stream_is_a_stream_error() -> None:
    script = [delta(reasoning_content="a"), b'data: {"error": {"message": "overloaded"}}\n\n']
    res = await attempt(script)
    assert not res.ok and res.error == "stream_error" and "overloaded" in (res.detail or ""), res


# -- the Responses API ---------------------------------------------------------------------------

DONE_USAGE = {
    "input_tokens": 50,
    "input_tokens_details": {"cached_tokens": 48},
    "output_tokens": 6,
    "output_tokens_details": {"reasoning_tokens": 2},
}


@pytest.mark.timing  # TTFOT - TTFT counted in the server's write gaps
async def test_responses_stream_summaries_text_and_function_calls() -> None:
    script = [
        event("response.created", response={"status": "in_progress"}),
        event("response.reasoning_summary_text.delta", delta="think"),
        event("response.reasoning_text.delta", delta="ing"),
        event("response.output_text.delta", delta="Hi"),
        event("response.output_item.added", item={"type": "function_call", "name": "f"}),
        event("response.function_call_arguments.delta", delta="{}"),
        event("response.completed", response={"status": "completed", "usage": DONE_USAGE}),
    ]
    res = await attempt(script, "responses")
    assert res.ok, res
    writes_between(res, 2)
    assert (res.input_tokens, res.output_tokens) == (50, 6), res
    assert (res.cached_tokens, res.reasoning_tokens, res.tool_calls) == (48, 2, 1), res
    assert res.text == "Hi" and res.content_chunks == 4, res


async def test_responses_incomplete_is_an_answer_with_its_usage() -> None:
    script = [
        event("response.output_text.delta", delta="a"),
        event("response.incomplete", response={"status": "incomplete", "usage": DONE_USAGE}),
    ]
    res = await attempt(script, "responses")
    assert res.ok and res.output_tokens == 6 and res.ttfot_ms == res.ttft_ms, res


@pytest.mark.parametrize(
    ("last", "cls", "words"),
    [
        (
            event("response.failed", response={"error": {"message": "server_error here"}}),
            "stream_error",
            "server_error here",
        ),
        (event("error", code="rate_limit", message="slow down"), "stream_error", "slow down"),
        (b"", "stream_aborted", "without response.completed"),
    ],
)
async def test_responses_failures_have_a_class(last: bytes, cls: str, words: str) -> None:
    res = await attempt([event("response.output_text.delta", delta="a"), last], "responses")
    assert not res.ok and res.error == cls and words in (res.detail or ""), res


async def test_responses_whole_body() -> None:
    whole = {
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "x" * 40}], "content": []},
            {"type": "function_call", "name": "f", "arguments": "{}"},
            {"type": "message", "content": [{"type": "output_text", "text": "answer"}]},
        ],
        "usage": DONE_USAGE,
    }
    res = await attempt([], "responses", whole)
    assert res.ok and res.text == "answer" and res.tool_calls == 1, res
    assert (res.cached_tokens, res.reasoning_tokens, res.reasoning_estimate) == (48, 2, 10), res
    assert res.ttft_ms is None and res.ttfot_ms is None, res


async def test_chat_whole_body_with_think_tags_and_details() -> None:
    whole = {
        "choices": [{"message": {"content": "<think>" + "y" * 80 + "</think>\n\nfine"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 23, "prompt_tokens_details": {"cached_tokens": 0}},
    }
    res = await attempt([], "chat", whole)
    assert res.ok and res.text == "fine" and res.reasoning_estimate == 20 and res.cached_tokens == 0, res


async def test_tools_in_extra_body_reach_the_server_and_calls_are_journaled(tmp_path: Path) -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": "{}"}}
    script = [
        delta(tool_calls=[{"index": 0, "id": "a", **call}]),
        delta(tool_calls=[{"index": 1, "id": "b", **call}]) + FINISH + DONE,
    ]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    async with server(script) as c:
        sets = {
            "endpoints.default.base_url": str(c.sdk.base_url).rstrip("/"),
            "models.0.extra_body": {"tools": tools, "tool_choice": "required"},
            "run.requests": 2,
            "prompts.synthetic.count": 2,
        }
        w = load_workload("reasoning", tmp_path, sets)
        SEEN.clear()
        await run(w)
    recs = journal(w)
    assert [r.get("tool_calls") for r in recs] == [2, 2], recs
    assert all(r["ttft_ms"] == r["ttfot_ms"] for r in recs), recs
    assert [(b["tools"], b["tool_choice"]) for b in SEEN] == [(tools, "required")] * 2, SEEN


async def test_deepseek_and_llama_cpp_cache_fields() -> None:
    deepseek = usage(
        prompt_tokens=30, completion_tokens=1, prompt_cache_hit_tokens=16, prompt_cache_miss_tokens=14
    )
    res = await attempt([delta(content="a"), FINISH + deepseek + DONE])
    assert res.ok and res.cached_tokens == 16, res
    llama = (
        b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":1},'
        b'"timings":{"cache_n":24,"prompt_n":6}}\n\n'
    )
    res = await attempt([delta(content="a"), FINISH + llama + DONE])
    assert res.ok and res.cached_tokens == 24, res
