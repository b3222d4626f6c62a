"""The private names of the openai SDK and aiohttp the request path relies on, checked by name and
in use.

Why this test exists: `engine/send/internals.py` (the one module that touches them) builds each
endpoint's request once with the SDK's private `_build_request` and makes status errors with
`_make_status_error_from_response`; it reads every body through an aiohttp reader switched to its
own class, inside aiohttp's `data_received`. Private paths break across releases without notice;
when they do, this test fails naming the installed versions and what is gone, instead of the
client failing at run time or silently reading 3-10x slower. pyproject pins the ranges tested.
"""

from __future__ import annotations

import asyncio
import importlib

import aiohttp
import httpx2
import openai
import orjson
from aiohttp import web

from oxconsole.engine.send import internals
from oxconsole.engine.send.client import EndpointClient
from tests.support.http import chat_server

SDK = f"openai {openai.__version__}, aiohttp {aiohttp.__version__}"
FIX = "pin openai and aiohttp in pyproject.toml to the ranges tested, or adapt engine/send/internals.py"

# (module, attribute path) the client uses, privately
REQUIRED = [
    ("openai._base_client", "get_platform"),
    ("openai._models", "FinalRequestOptions.construct"),
    ("openai", "AsyncOpenAI._build_request"),
    ("openai", "AsyncOpenAI._prepare_options"),
    ("openai", "AsyncOpenAI._prepare_request"),
    ("openai", "AsyncOpenAI._make_status_error_from_response"),
    ("openai", "AsyncOpenAI._idempotency_key"),
    ("openai", "AsyncOpenAI.custom_auth"),
    ("openai", "DefaultAioHttpClient"),
    ("httpx2", "create_ssl_context"),
    ("aiohttp", "StreamReader.read_nowait"),
    ("aiohttp", "ClientRequest"),
    ("aiohttp", "TCPConnector.connect"),
    ("aiohttp", "TCPConnector._get"),
    ("aiohttp.connector", "Connection.release"),
]

# the slots of aiohttp's body reader that `internals._TapReader` reads or needs
READER_SLOTS = ("_buffer", "_protocol", "total_bytes")


def _has(module: str, path: str) -> bool:
    try:
        obj: object = importlib.import_module(module)
    except ImportError:
        return False
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def test_the_sdk_internals_the_client_uses_are_there() -> None:
    missing = [f"{m}.{p}" for m, p in REQUIRED if not _has(m, p)]
    slots = getattr(aiohttp.StreamReader, "__slots__", ())
    missing += [f"aiohttp.StreamReader.{s}" for s in READER_SLOTS if s not in slots]
    assert not missing, f"{SDK}: the client's send path needs {', '.join(missing)}, gone; {FIX}"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((dict(request.headers), await request.read()))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
        await resp.write(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def test_requests_carry_what_the_sdks_own_post_sends() -> None:
    """The SDK builds one request per endpoint and aiohttp sends copies: they must carry exactly
    the headers and body the SDK's own `post()` sends through its aiohttp client."""
    server = Recorder()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with chat_server(server.handle) as base:
        c = EndpointClient("e", base + "/v1", "sk-test-123456", max_connections=4, timeout=5.0)
        try:
            assert not internals.per_request_auth(c.sdk), f"{SDK}: auth now varies per request; {FIX}"
            for _ in range(2):
                res = await c.attempt(body, stream=True, timeout=5.0, save_text=True)
                assert res.ok and res.text == "hi", res
            resp = await c.sdk.post(
                "/chat/completions", cast_to=httpx2.Response, body=body, stream=True, options={"timeout": 5.0}
            )
            await resp.aread()
            await resp.aclose()
        finally:
            await c.close()
    (h1, b1), (h2, b2), (h3, b3) = server.seen
    assert orjson.loads(b1) == orjson.loads(b2) == orjson.loads(b3) == body
    assert h1 == h2
    assert h1["Authorization"] == "Bearer sk-test-123456"
    ours = {k.lower(): v for k, v in h1.items()}
    sdks = {k.lower(): v for k, v in h3.items()}
    differ = set(ours.items()) ^ set(sdks.items())
    assert ours == sdks, f"{SDK}: headers differ from the SDK's own post(): {differ}"


async def test_requests_are_prebuilt_and_streams_read_through_the_tap() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
        await asyncio.wait_for(release.wait(), 5.0)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with chat_server(handler) as base:
        c = EndpointClient("e", base + "/v1", "sk-test", max_connections=2, timeout=5.0)
        try:
            task = asyncio.create_task(c.attempt(body, stream=True, timeout=5.0, save_text=True))
            tapped = 0
            for _ in range(500):
                tapped = max(tapped, len(internals._TAPS))
                if tapped or task.done():
                    break
                await asyncio.sleep(0.01)
            release.set()
            res = await task
        finally:
            await c.close()
    assert res.ok and res.text == "hi", res
    assert tapped == 1, f"{SDK}: the stream was not read through the tapped aiohttp reader; {FIX}"
