"""Small aiohttp servers on loopback for tests that play a particular server's part."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def loopback(app: web.Application) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port; yields its origin (`http://127.0.0.1:PORT`)."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def chat_server(handler: Handler, models: Handler | None = None) -> AsyncIterator[str]:
    """Serve `handler` at POST /v1/chat/completions (and `models`, when given, at GET /v1/models)
    on a free loopback port; yields the base URL without `/v1` (append it, or not, as the test
    needs)."""
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    if models is not None:
        app.router.add_get("/v1/models", models)
    async with loopback(app) as origin:
        yield origin


@dataclass
class Recorded:
    """One request a `recording_server` received: its path under /v1, its headers and body."""

    path: str
    headers: dict[str, str]
    body: bytes


@asynccontextmanager
async def recording_server(
    answers: dict[str, Handler],
) -> AsyncIterator[tuple[str, list[Recorded]]]:
    """Serve POST /v1/PATH for each PATH of `answers` (its handler answers), recording every request
    (headers and body, read whole) in the list yielded with the base URL (with /v1)."""
    got: list[Recorded] = []

    def recorder(handler: Handler) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            body = await request.read()
            got.append(Recorded(request.path.removeprefix("/v1"), dict(request.headers), body))
            return await handler(request)

        return handle

    app = web.Application(client_max_size=64 << 20)
    for path, handler in answers.items():
        app.router.add_post("/v1" + path, recorder(handler))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1", got
    finally:
        await runner.cleanup()


def ok_answer() -> web.Response:
    """A non-streamed chat completion that says "ok" (5 prompt tokens, 1 completion token)."""
    usage = {"prompt_tokens": 5, "completion_tokens": 1}
    return web.json_response({"choices": [{"message": {"content": "ok"}}], "usage": usage})


def self_signed(tmp_path: Path) -> ssl.SSLContext:
    """A server-side TLS context with a fresh self-signed certificate for 127.0.0.1."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 request off a raw connection: its head, then its Content-Length body (none for
    a GET, such as the run's `GET /models` before its clock); the head."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next((int(ln.split(b":", 1)[1]) for ln in lines if ln.lower().startswith(b"content-length:")), 0)
    await reader.readexactly(length)
    return head
