"""Servers that misbehave on purpose, on loopback: what one attempt reads of them, and what it gives.

Why these tests exist: anything a server sends is hostile until read within bounds. Each test plays
one fault with a server of its own (aiohttp's, or raw bytes from an asyncio server where aiohttp
would not misbehave enough) and checks the attempt's class and detail, its memory (tracemalloc
peaks, with bounds set small through `BodyLimits` so nothing here needs much memory) and its time.
The limits are documented in docs/reliability.md, "Hostile servers: limits".
"""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send.client import EndpointClient
from tests.support.http import chat_server, ok_answer, read_request

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
PLAIN = {**BODY, "stream": False}
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"
MIB = 1 << 20

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(script: Script) -> AsyncIterator[str]:
    """An HTTP server that reads one request's head and body, then runs `script` to answer in raw
    bytes; yields the base URL with /v1."""
    writers: list[asyncio.StreamWriter] = []
    tasks: list[asyncio.Task[Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        tasks.append(task)
        try:
            await read_request(reader)
            await script(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for w in writers:
            w.close()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.close()
        await server.wait_closed()


def head(status: int = 200, ctype: str = "text/event-stream", extra: str = "") -> bytes:
    reason = {200: "OK", 500: "Internal Server Error"}.get(status, "X")
    return f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n{extra}\r\n".encode()


def client(url: str, timeout: float = 5.0, **limits: int) -> EndpointClient:
    kwargs: dict[str, Any] = {}
    if limits:
        from oxconsole.engine.send.stream import BodyLimits

        kwargs["limits"] = BodyLimits(**limits)
    key = "sk-test-hostile-0123456789"
    return EndpointClient("e", url, key, max_connections=4, timeout=timeout, **kwargs)


async def attempt(url: str, request: dict[str, Any] = BODY, timeout: float = 5.0, **limits: int) -> Any:
    c = client(url, timeout, **limits)
    try:
        stream = bool(request.get("stream"))
        return await c.attempt(request, stream=stream, timeout=timeout, save_text=True)
    finally:
        await c.close()


async def peak_of(coro: Awaitable[Any]) -> tuple[Any, float]:
    """What `coro` returned, and the peak of Python memory while it ran (MiB)."""
    tracemalloc.start()
    try:
        result = await coro
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak / MIB


# -- redirects -----------------------------------------------------------------------------------


class Elsewhere:
    """Another origin (same host, another port): counts what reaches it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(dict(request.headers))
        await request.read()
        return ok_answer()


@pytest.mark.parametrize("status", [307, 308, 302])
async def test_a_redirect_to_another_origin_is_not_followed(status: int) -> None:
    other = Elsewhere()
    async with chat_server(other.handle) as elsewhere:

        async def redirect(request: web.Request) -> web.StreamResponse:
            await request.read()
            return web.Response(status=status, headers={"Location": elsewhere + "/v1/chat/completions"})

        async with chat_server(redirect) as base:
            c = EndpointClient(
                "e",
                base + "/v1",
                "sk-test-redirect-0123456789",
                max_connections=2,
                timeout=5.0,
                headers={"X-Static": "static-value-1", "X-From-Env": "env-secret-value-2"},
                secrets=["env-secret-value-2"],
            )
            try:
                res = await c.attempt(PLAIN, stream=False, timeout=5.0, save_text=True)
            finally:
                await c.close()
    assert other.seen == [], f"a {status} sent the request (and its headers) to {elsewhere}: {other.seen}"
    assert not res.ok and res.error == f"http_{status}", res
    assert res.detail is not None and "another origin" in res.detail and elsewhere in res.detail, res.detail


async def test_a_same_origin_307_is_followed_with_its_headers() -> None:
    seen: list[tuple[str, Any, bytes]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append((request.path, request.headers.copy(), await request.read()))
        if request.path == "/v1/chat/completions":
            return web.Response(status=307, headers={"Location": "/v1/moved/chat/completions"})
        return ok_answer()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post("/v1/moved/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        c = EndpointClient(
            "e", f"http://127.0.0.1:{port}/v1", "sk-k", max_connections=2, timeout=5.0, headers={"X-A": "b"}
        )
        res = await c.attempt(PLAIN, stream=False, timeout=5.0, save_text=True)
        await c.close()
    finally:
        await runner.cleanup()
    assert res.ok and res.text == "ok", res
    paths = [p for p, _, _ in seen]
    assert paths == ["/v1/chat/completions", "/v1/moved/chat/completions"], paths
    _, moved_headers, moved_body = seen[1]
    assert moved_headers.get("X-A") == "b" and moved_headers.get("Authorization") == "Bearer sk-k"
    assert orjson.loads(moved_body) == PLAIN


# -- bodies without a bound ----------------------------------------------------------------------


async def test_a_huge_error_body_is_cut_and_the_status_kept() -> None:
    """The default error-body bound (1 MiB) against a 16 MiB error body, streamed without a length."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(500, "application/json", "Connection: close\r\n"))
        writer.write(b'{"error": {"message": "')
        piece = b"x" * (64 * 1024)
        for _ in range(256):
            writer.write(piece)
            await writer.drain()

    async with raw_server(script) as url:
        res, peak = await peak_of(attempt(url, PLAIN))
    assert res.error == "http_500" and res.status == 500, res
    assert res.detail is not None and "error body over 1 MiB" in res.detail, res.detail
    assert peak < 6, f"reading a 16 MiB error body peaked at {peak:.1f} MiB of Python memory"


async def test_a_huge_answer_is_bad_response_without_reading_it() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, "application/json", "Connection: close\r\n"))
        piece = b" " * (64 * 1024)
        for _ in range(128):  # 8 MiB of a JSON body that never ends
            writer.write(piece)
            await writer.drain()

    async with raw_server(script) as url:
        res, peak = await peak_of(attempt(url, PLAIN, body=MIB))
    assert res.error == "bad_response" and res.detail == "answer body over 1 MiB", res
    assert peak < 5, f"a 1 MiB bound peaked at {peak:.1f} MiB"


@pytest.mark.timing
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("stream", [False, True])
async def test_an_inflating_body_stops_at_the_bound(encoding: str, stream: bool) -> None:
    """32 MiB of zeros sent as ~32 KiB of gzip or deflate, against a 1 MiB bound."""
    zeros = b"data: " + b"0" * (32 * MIB) if stream else b"0" * (32 * MIB)
    packed = gzip.compress(zeros, 9) if encoding == "gzip" else zlib.compress(zeros, 9)
    del zeros
    ctype = "text/event-stream" if stream else "application/json"

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        extra = f"Content-Encoding: {encoding}\r\nContent-Length: {len(packed)}\r\n"
        writer.write(head(200, ctype, extra) + packed)
        await writer.drain()
        await asyncio.sleep(5)

    t0 = time.perf_counter()
    async with raw_server(script) as url:
        res, peak = await peak_of(attempt(url, {**BODY, "stream": stream}, body=MIB, line=MIB))
    took = time.perf_counter() - t0
    assert res.error == "bad_response" and "over 1 MiB" in (res.detail or ""), res
    assert peak < 6, f"a {len(packed)}-byte {encoding} body inflating to 32 MiB peaked at {peak:.1f} MiB"
    assert took < 3.0, f"stopping the inflation took {took:.2f}s"


@pytest.mark.timing
@pytest.mark.parametrize("status", [200, 500])
async def test_a_slow_endless_body_ends_at_the_timeout(status: int) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, "application/json", "Transfer-Encoding: chunked\r\n"))
        while True:
            writer.write(b"1\r\n \r\n")
            await writer.drain()
            await asyncio.sleep(0.02)

    t0 = time.perf_counter()
    async with raw_server(script) as url:
        res = await attempt(url, PLAIN, timeout=1.0)
    took = time.perf_counter() - t0
    assert res.error == "timeout", res
    assert took < 2.5, f"a 1 s timeout ended the attempt after {took:.2f}s"


# -- streams: long lines, line endings, [DONE] -----------------------------------------------------


@pytest.mark.timing
async def test_a_line_over_the_bound_is_bad_response_and_the_loop_keeps_going() -> None:
    """A 12 MiB line (the default bound is 8 MiB) in 16 KiB writes: the attempt ends with the
    bound's class and the event loop stays responsive while the line comes (a probe ticks every
    5 ms); Python memory stays within a few times the bound."""
    started: list[float] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, "text/event-stream", "Connection: close\r\n") + CHUNK + b'data: {"x": "')
        started.append(time.perf_counter())
        piece = b"a" * (16 * 1024)
        for _ in range(12 * 64):
            writer.write(piece)
            await writer.drain()

    lags: list[tuple[float, float]] = []

    async def probe() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append((t, time.perf_counter() - t - 0.005))

    ticker = asyncio.create_task(probe())
    async with raw_server(script) as url:
        res, peak = await peak_of(attempt(url))
    ticker.cancel()
    assert res.error == "bad_response" and res.detail == "SSE line over 8 MiB", res
    assert peak < 24, f"a 12 MiB line against an 8 MiB bound peaked at {peak:.1f} MiB"
    during = [lag for t, lag in lags if started and t >= started[0]]
    assert during and max(during) < 0.25, f"the event loop stalled {max(during) * 1000:.0f} ms in the line"


@pytest.mark.timing
async def test_a_stop_ends_an_attempt_stuck_in_an_endless_line() -> None:
    """A line that never ends, under the bound (4 KiB every 10 ms): cancelling the attempt (what a
    stop does once its grace is over) ends it at once."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, "text/event-stream", "Connection: close\r\n") + CHUNK + b'data: {"x": "')
        while True:
            writer.write(b"a" * 4096)
            await writer.drain()
            await asyncio.sleep(0.01)

    async with raw_server(script) as url:
        c = client(url, timeout=30.0)
        task = asyncio.create_task(c.attempt(BODY, stream=True, timeout=30.0, save_text=True))
        await asyncio.sleep(0.5)
        t0 = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.perf_counter() - t0
        await c.close()
    assert took < 0.5, f"the cancelled attempt took {took:.2f}s to end"


@pytest.mark.parametrize("eol", [b"\r", b"\r\n", b"\n"])
@pytest.mark.parametrize("step", [1, 7, 10_000])
async def test_every_sse_line_ending_is_read(eol: bytes, step: int) -> None:
    stream = (CHUNK + CHUNK + FINISH + DONE).replace(b"\n", eol)

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, "text/event-stream", f"Content-Length: {len(stream)}\r\n"))
        for i in range(0, len(stream), step):
            writer.write(stream[i : i + step])
            await writer.drain()
            await asyncio.sleep(0)

    async with raw_server(script) as url:
        res = await attempt(url)
    assert res.ok and res.content_chunks == 2 and res.text == "hihi", (eol, step, res)


@pytest.mark.timing
async def test_done_ends_the_answer_while_the_connection_stays_open() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, "text/event-stream", "Transfer-Encoding: chunked\r\n"))
        for part in (CHUNK, FINISH, DONE):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            await writer.drain()
        await asyncio.sleep(30)  # never ends the body, never closes

    t0 = time.perf_counter()
    async with raw_server(script) as url:
        res = await attempt(url, timeout=4.0)
    took = time.perf_counter() - t0
    assert res.ok and res.text == "hi", res
    assert res.latency_ms is not None and res.latency_ms < 1000, res
    assert took < 3.0, f"a complete answer whose connection stayed open took {took:.2f}s"


def test_a_long_line_costs_time_linear_in_its_length() -> None:
    """A 4 MiB line fed 1 KiB at a time: joined once when it ends, not copied on every read (that
    copy made one 50 MB line cost seconds of the event loop)."""
    from oxconsole.engine.send.attempt import AttemptResult
    from oxconsole.engine.send.stream import _Events

    ev = _Events(AttemptResult(ok=False), False)
    line = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"a" * (4 * MIB) + b'"}}]}\n\n'
    t0 = time.process_time()
    for i in range(0, len(line), 1024):
        ev.feed(line[i : i + 1024], 1.0)
    took = time.process_time() - t0
    assert ev.n == 1, ev.n
    assert took < 0.5, f"feeding a 4 MiB line in 1 KiB reads took {took:.2f}s of CPU"
