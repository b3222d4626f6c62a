"""A kept-alive connection the server has closed: a request that never reached the server on it is
sent again on a fresh one at once (not an attempt error, not backed off), as curl does; a server
that drops a request it did take (on a fresh connection, or once its answer began) is still a
`connection` or `stream_aborted` error.

The servers are raw asyncio servers on loopback, so that they can close a connection exactly when
a test needs: llama.cpp's `llama-server` advertises `Keep-Alive: timeout=5` and closes after each
streamed answer, and the next request on that pooled connection finds it closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.send.client import EndpointClient
from tests.support import journal, run
from tests.support.http import read_request
from tests.support.workloads import load_workload

STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\n'
    b"data: [DONE]\n\n"
)
KEEP_ALIVE = b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n"


def chunked(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def answer(extra: bytes = KEEP_ALIVE) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    return head + extra + b"\r\n" + chunked(STREAM)


@dataclass
class Served:
    connections: int = 0
    requests: int = 0
    """Requests whose head the server read."""
    answered: int = 0
    dropped: list[int] = field(default_factory=list)
    """Per connection that ended: the requests it read but never answered."""


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Served], Awaitable[None]]


@asynccontextmanager
async def raw(script: Script) -> AsyncIterator[tuple[str, Served]]:
    served = Served()
    tasks: set[asyncio.Task[Any]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        served.connections += 1
        try:
            await script(reader, writer, served)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            tasks.discard(task)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", served
    finally:
        for t in list(tasks):
            t.cancel()
        server.close()
        await server.wait_closed()


async def closes_after_each_answer(reader: asyncio.StreamReader, writer: Any, served: Served) -> None:
    """llama-server's way: one answer a connection, though it says keep-alive; a request that
    comes on it afterwards is never read as a request (the connection closes under it)."""
    head = await read_request(reader)
    if head.startswith(b"GET"):  # the run's GET /models before its clock: not served here
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n" + KEEP_ALIVE + b"\r\n")
    else:
        served.requests += 1
        writer.write(answer())
        served.answered += 1
    await writer.drain()
    await reader.read(1)  # the next request's first byte: close without taking it


def workload(tmp_path: Path, url: str, n: int, concurrency: int = 1, attempts: int = 1) -> Any:
    """tests/workloads/upstream.toml at `url` (no API key, the default streaming), `n` prompts."""
    prompts = "".join(f'{{"id": "p{i}", "prompt": "hi"}}\n' for i in range(n))
    sets = {
        "run.concurrency": concurrency,
        "run.timeout": "10s",
        "run.stream": None,
        "endpoints.up": {"base_url": url},
        "retry": {"max_attempts": attempts, "backoff": "2s"},
    }
    return load_workload("upstream", tmp_path, sets, prompts=prompts)


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_a_request_on_a_connection_the_server_closed_goes_again_on_a_fresh_one(
    tmp_path: Path, concurrency: int
) -> None:
    """With one attempt per request, every request is ok: the stale connection cost no attempt,
    no retry and no backoff (a 2 s backoff would show in the run's length)."""
    async with raw(closes_after_each_answer) as (url, served):
        w = workload(tmp_path, url, 12, concurrency=concurrency)
        out = await run(w)
    recs = journal(w)
    bad = [r for r in recs if r["status"] != "ok" or r["attempts"] != 1 or r.get("attempt_errors")]
    assert len(recs) == 12 and not bad, bad[:3]
    s = out.summary
    assert s["errors"] == {} and s["attempt_errors"] == {}, (s["errors"], s["attempt_errors"])
    assert s["backoff"]["requests"] == 0, s["backoff"]
    assert served.answered == 12 and served.requests == 12, served
    # the connections the server closed were tried (each one a request that never reached it)
    assert served.connections > 12 - concurrency, served


async def dies_mid_answer(reader: asyncio.StreamReader, writer: Any, served: Served) -> None:
    """Takes the request, begins the answer, and dies: the request did reach the server."""
    while True:
        await read_request(reader)
        served.requests += 1
        if served.requests == 1:
            writer.write(answer())
            await writer.drain()
            served.answered += 1
            continue
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(b'10\r\ndata: {"choices"')
        await writer.drain()
        return


async def dies_before_answering(reader: asyncio.StreamReader, writer: Any, served: Served) -> None:
    """A fresh connection whose server reads the request and closes without a word."""
    await read_request(reader)
    served.requests += 1


async def attempts_of(url: str, n: int) -> list[Any]:
    c = EndpointClient("e", url, None, max_connections=1, timeout=5.0)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    try:
        return [await c.attempt(body, stream=True, timeout=5.0, save_text=False) for _ in range(n)]
    finally:
        await c.close()


async def test_a_server_that_dies_mid_answer_is_still_an_error_and_not_sent_again() -> None:
    async with raw(dies_mid_answer) as (url, served):
        first, second = await attempts_of(url, 2)
    assert first.ok, first
    assert not second.ok and second.error == "stream_aborted", second
    assert served.requests == 2, f"the request was sent again after its answer began: {served}"


async def test_a_fresh_connection_closed_before_the_answer_is_a_connection_error() -> None:
    async with raw(dies_before_answering) as (url, served):
        (res,) = await attempts_of(url, 1)
    assert not res.ok and res.error == "connection", res
    assert served.requests == 1 and served.connections == 1, f"sent again on a fresh connection: {served}"
