"""The client's own request path and stream reader, against small loopback servers.

Requests are built once per endpoint by the SDK and sent by aiohttp (tests/engine/test_sdk_contract.py
checks they carry what the SDK's own `post()` sends); these tests check that status errors still
come back as the SDK's, and that the stream reader (with its shortcut for chunks that share the
first chunk's prefix) gives the same counts, timings and text as a full parse of every chunk,
whatever the read boundaries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send import internals
from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.attempt import BadResponse as _BadResponse
from oxconsole.engine.send.client import EndpointClient
from oxconsole.engine.send.stream import _Events
from tests.support.http import chat_server

HEAD = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":['


def chunk(choice: dict[str, Any]) -> bytes:
    return HEAD + orjson.dumps(choice) + b"]}\n\n"


def content(text: str) -> bytes:
    return chunk({"index": 0, "delta": {"content": text}, "finish_reason": None})


ROLE = chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None})
FINISH = chunk({"index": 0, "delta": {}, "finish_reason": "stop"})
USAGE = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n\n'
)
DONE = b"data: [DONE]\n\n"
STREAM = ROLE + content("a") + content('b "quoted"\n') + content("c") + FINISH + USAGE + DONE


def feed_all(parts: list[tuple[bytes, float]], save_text: bool = True) -> AttemptResult:
    res = AttemptResult(ok=False)
    ev = _Events(res, save_text)
    for data, now in parts:
        ev.feed(data, now)
    ev.end(0.0, 10.0)
    return res


def test_whole_stream_in_one_read() -> None:
    res = feed_all([(STREAM, 1.0)])
    assert res.content_chunks == 3
    assert res.text == 'ab "quoted"\nc'
    assert (res.input_tokens, res.output_tokens) == (7, 3)
    assert res.ttft_ms == 1000.0 and res.latency_ms == 10000.0


def test_prefix_shortcut_is_learned_and_used() -> None:
    res = AttemptResult(ok=False)
    ev = _Events(res, True)
    ev.feed(ROLE, 0.5)
    assert ev.prefix == HEAD
    ev.feed(content("x"), 1.0)
    assert ev.n == 1 and ev.first == 1.0


@pytest.mark.parametrize("step", [1, 2, 7, 64])
def test_any_read_boundaries_give_the_same_result(step: int) -> None:
    parts = [(STREAM[i : i + step], float(i)) for i in range(0, len(STREAM), step)]
    res = feed_all(parts)
    assert res.content_chunks == 3 and res.text == 'ab "quoted"\nc' and res.output_tokens == 3
    # TTFT is the read that completed the first content-bearing chunk (not the role-only one)
    first_end = len(ROLE) + len(content("a")) - 2  # its line ends before the blank line
    assert res.ttft_ms == 1000.0 * ((first_end // step) * step)


def test_time_of_first_content_not_of_role_chunk() -> None:
    res = feed_all([(ROLE, 1.0), (content("a"), 2.0), (content("b") + FINISH + DONE, 3.0)])
    assert res.ttft_ms == 2000.0 and res.itl_ms == 1000.0 and res.content_chunks == 2


def test_tool_calls_and_reasoning_count_as_content() -> None:
    tool = chunk({"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t"}]}, "finish_reason": None})
    reasoning = chunk({"index": 0, "delta": {"reasoning_content": "hm"}, "finish_reason": None})
    res = feed_all([(ROLE + reasoning + tool + FINISH, 1.0)])
    assert res.content_chunks == 2 and res.text == "hm"


def test_text_not_kept_unless_asked() -> None:
    res = feed_all([(STREAM, 1.0)], save_text=False)
    assert res.text is None and res.content_chunks == 3


@pytest.mark.parametrize(
    "bad",
    [
        HEAD + b'{"index":0,"delta":{"content":"a"}' + b"]}\n\n",  # choice cut short
        HEAD + b"{]}\n\n",
        b'data: {"choices": [\n\n',  # the simulator's malformed chunk
        HEAD + b'{"index":0},{"index":1}]}\n\n',  # two choices: not one value, full parse accepts
    ],
)
def test_malformed_after_the_prefix_is_learned(bad: bytes) -> None:
    stream = ROLE + content("a") + bad + FINISH + DONE
    if bad.endswith(b'{"index":1}]}\n\n'):
        assert feed_all([(stream, 1.0)]).content_chunks == 1  # valid JSON, just not the shortcut
        return
    with pytest.raises(_BadResponse) as e:
        feed_all([(stream, 1.0)])
    assert e.value.cls == "bad_response"


async def test_wrong_shapes_are_bad_response_not_a_crash() -> None:
    (r,), _ = await run_paced(Paced([b'data: {"choices":[1]}\n\n']))
    assert r.error == "bad_response", r


def test_error_event_and_abort() -> None:
    with pytest.raises(_BadResponse) as e:
        feed_all([(ROLE + b'data: {"error":{"message":"overloaded"}}\n\n', 1.0)])
    assert e.value.cls == "stream_error" and "overloaded" in str(e.value)
    with pytest.raises(_BadResponse) as e:
        feed_all([(ROLE + content("a"), 1.0)])
    assert e.value.cls == "stream_aborted"


def test_usage_after_choices_in_a_chunk_is_read() -> None:
    line = HEAD[:-1] + b'[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":9}}\n\n'
    res = feed_all([(ROLE + content("a") + line + DONE, 1.0)])
    assert res.output_tokens == 9


def test_crlf_lines() -> None:
    res = feed_all([(STREAM.replace(b"\n", b"\r\n"), 1.0)])
    assert res.content_chunks == 3 and res.output_tokens == 3


# -- the request path --------------------------------------------------------------------------


class Server:
    def __init__(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.seen: list[tuple[dict[str, str], bytes]] = []
        self.status = status
        self.headers = headers or {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((dict(request.headers), await request.read()))
        if self.status != 200:
            body = orjson.dumps({"error": {"message": "slow down", "type": "requests"}})
            return web.Response(status=self.status, body=body, headers=self.headers)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for part in (ROLE, content("hi"), FINISH + USAGE, DONE):
            await resp.write(part)
        await resp.write_eof()
        return resp


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def test_status_errors_still_come_from_the_sdk() -> None:
    server = Server(status=429, headers={"retry-after-ms": "1500"})
    async with chat_server(server.handle) as base:
        c = EndpointClient("e", base + "/v1", None, max_connections=4, timeout=5.0)
        res = await c.attempt(BODY, stream=True, timeout=5.0, save_text=False)
        await c.close()
    assert res.error == "http_429" and res.status == 429 and res.retry_after == 1.5
    assert res.detail is not None and "slow down" in res.detail


# -- the tapped reader: each network read handed to the parser as it arrives ----------------------


class Paced:
    """Writes a stream in parts with pauses between them (separate network reads), then `end`."""

    def __init__(self, parts: list[bytes], end: str = "eof", gap: float = 0.05) -> None:
        self.parts = parts
        self.end = end
        self.gap = gap
        self.peers: list[object] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for part in self.parts:
            await resp.write(part)
            await asyncio.sleep(self.gap)
        if self.end == "drop":
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write_eof()
        return resp


async def run_paced(server: Paced, attempts: int = 1) -> tuple[list[AttemptResult], list[int]]:
    """Attempts against `server`, and how many streams were tapped while each was being read."""
    results, tapped = [], []
    async with chat_server(server.handle) as base:
        c = EndpointClient("e", base + "/v1", None, max_connections=4, timeout=5.0)
        try:
            for _ in range(attempts):
                task = asyncio.create_task(c.attempt(BODY, stream=True, timeout=5.0, save_text=True))
                seen = 0
                while not task.done():
                    seen = max(seen, len(internals._TAPS))
                    await asyncio.sleep(0.01)
                results.append(task.result())
                tapped.append(seen)
                assert internals._TAPS == {}, "a finished attempt left its reader registered"
        finally:
            await c.close()
    return results, tapped


async def test_tapped_reads_time_each_chunk_and_reuse_the_connection() -> None:
    server = Paced([ROLE, content("a"), content("b"), FINISH + USAGE + DONE], gap=0.05)
    (r1, r2), tapped = await run_paced(server, attempts=2)
    assert tapped == [1, 1]  # read through the tap, not readany
    for r in (r1, r2):
        assert r.ok and r.text == "ab" and r.content_chunks == 2 and r.output_tokens == 3, r
        assert r.ttft_ms is not None and r.itl_ms is not None and r.latency_ms is not None
        assert 45.0 <= r.ttft_ms < r.latency_ms  # the first content chunk left one gap after the role
        assert r.itl_ms >= 45.0  # the second, one gap later
        assert r.latency_ms >= 3 * 45.0
    assert server.peers[0] == server.peers[1]  # the end of the body gave the connection back


async def test_tapped_stream_dropped_midway_is_stream_aborted() -> None:
    server = Paced([ROLE, content("a"), content("b")], end="drop")
    (r,), tapped = await run_paced(server)
    assert tapped == [1]
    assert not r.ok and r.error in ("stream_aborted", "connection"), r
    assert r.error == "stream_aborted"


@pytest.mark.parametrize(
    "bad, cls",
    [
        (b"data: {not json\n\n", "bad_response"),
        (b'data: {"error": {"message": "overloaded"}}\n\n', "stream_error"),
        (HEAD + b'"not a choice"]}\n\n', "bad_response"),
    ],
)
async def test_tapped_bad_chunk_midway_fails_the_attempt(bad: bytes, cls: str) -> None:
    server = Paced([ROLE, content("a"), bad, content("b"), FINISH + DONE], gap=0.03)
    (r,), tapped = await run_paced(server)
    assert tapped == [1]
    assert not r.ok and r.error == cls, r


async def test_a_reader_that_cannot_be_switched_is_read_with_readany(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where aiohttp's reader does not allow the switch (another layout), the stream is still read."""

    class Other(aiohttp.StreamReader):
        __slots__ = ("extra",)  # another layout: __class__ assignment raises TypeError

    monkeypatch.setattr(internals, "_TapReader", Other)
    server = Paced([ROLE, content("a"), content("b"), FINISH + USAGE + DONE], gap=0.03)
    (r,), tapped = await run_paced(server)
    assert tapped == [0]  # not tapped
    assert r.ok and r.text == "ab" and r.content_chunks == 2 and r.output_tokens == 3, r
    assert r.ttft_ms is not None and r.ttft_ms >= 25.0
