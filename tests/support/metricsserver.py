"""Loopback servers that answer `/metrics` as a test says: an engine's exposition scrape after
scrape, a restart, a stall, a huge or binary body; and a run's scrape task watching one
(`workload` over a server's origin, `rounds` of its scrapes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from oxconsole.engine.serverwatch import ServerWatch
from oxconsole.metrics.server.series import series_path
from oxconsole.workload import Workload
from tests.support import until
from tests.support.workloads import load_workload

Answer = Callable[[web.Request, int], Awaitable[web.StreamResponse]]
"""The answer to the n-th request (from 0) of /metrics."""


@dataclass
class Served:
    """What a test's server was asked: how many times, and how many bytes it wrote."""

    asked: int = 0
    paths: list[str] = field(default_factory=list)
    written: int = 0


def text(*bodies: str | bytes, content_type: str = "text/plain; version=0.0.4") -> Answer:
    """Each body in turn, the last one again and again."""

    async def answer(request: web.Request, n: int) -> web.StreamResponse:
        b = bodies[min(n, len(bodies) - 1)]
        return web.Response(
            body=b if isinstance(b, bytes) else b.encode(), headers={"Content-Type": content_type}
        )

    return answer


@asynccontextmanager
async def metrics_server(
    answer: Answer, *, path: str = "/metrics", also: dict[str, Answer] | None = None
) -> AsyncIterator[tuple[str, Served]]:
    """Serve `answer` at GET `path` (and `also`'s paths) on a free loopback port; yields the
    origin (`http://127.0.0.1:PORT`) and what was asked of it."""
    served = Served()

    def handler(a: Answer) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            n = served.asked
            served.asked += 1
            served.paths.append(request.path)
            return await a(request, n)

        return handle

    app = web.Application()
    app.router.add_get(path, handler(answer))
    for p, a in (also or {}).items():
        app.router.add_get(p, handler(a))
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        await runner.cleanup()


def stall(seconds: float) -> Answer:
    """Headers at once, then nothing for `seconds` (a server that hangs mid-answer)."""

    async def answer(request: web.Request, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        await resp.write(b"vllm:num_requests_running 1\n")
        await asyncio.sleep(seconds)
        return resp

    return answer


def huge(size: int, served: list[Served], *, length: bool) -> Answer:
    """`size` bytes of valid-looking series, with a Content-Length or chunked; counts the bytes
    written into `served[0]` (the client stops reading: the writes then fail)."""
    line = b'vllm:num_requests_running{model_name="m",engine="0"} 1\n'

    async def answer(request: web.Request, n: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        if length:
            resp.content_length = size
        await resp.prepare(request)
        block = line * (65536 // len(line))
        sent = 0
        try:
            while sent < size:
                piece = block[: size - sent]
                await resp.write(piece)
                sent += len(piece)
                served[0].written += len(piece)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    return answer


FAST = "250ms"


def workload(tmp_path: Path, base: str, **sets: Any) -> Workload:
    return load_workload(
        "sim_exact",
        tmp_path,
        {
            "endpoints.default.base_url": base + "/v1",
            "endpoints.default.server_metrics_interval": FAST,
            **sets,
        },
    )


async def rounds(w: Workload, n: int, tmp_path: Path | None = None) -> tuple[ServerWatch, list[str]]:
    """A watch on `w` after `n` rounds of its endpoint (then stopped), and the warnings it gave."""
    warnings: list[str] = []
    series = None if tmp_path is None else series_path(tmp_path / "results.jsonl")
    watch = ServerWatch(w, {}, warnings, series=series)
    watch.start()
    try:
        await until(lambda: watch.targets[0].live.scrapes >= n, 15.0, f"{n} scrape rounds")
    finally:
        await watch.stop()
    return watch, warnings
