"""The openai SDK internals the client's fast send path relies on, checked by name and in use.

Why this test exists: `engine/client.py` builds each endpoint's request once with the SDK's private
`_build_request` and sends copies through `sdk._client.send`; `engine/stream.py` reads streams
from the SDK's vendored aiohttp transport. Private paths break across SDK releases without notice;
when they do, this test fails naming the installed SDK version and what is gone, instead of the
client silently falling back to a path 3-10x slower (or failing at run time). pyproject pins the
range tested.
"""

from __future__ import annotations

import asyncio
import importlib

import openai
from aiohttp import web

from oxconsole.engine import stream as stream_mod
from oxconsole.engine.client import EndpointClient
from tests.http_support import chat_server

SDK = f"openai {openai.__version__}"
FIX = "pin openai in pyproject.toml to the range engine/client.py supports, or adapt engine/client.py"

# (module, attribute path) the client uses, privately
REQUIRED = [
    ("openai._base_client", "get_platform"),
    ("openai._models", "FinalRequestOptions.construct"),
    ("openai", "AsyncOpenAI._build_request"),
    ("openai", "AsyncOpenAI._prepare_options"),
    ("openai", "AsyncOpenAI._prepare_request"),
    ("openai", "AsyncOpenAI._make_status_error_from_response"),
    ("openai", "AsyncOpenAI._idempotency_key"),
    ("openai", "DefaultAioHttpClient"),
    ("openai._vendor.httpx_aiohttp.transport", "AiohttpResponseStream"),
    ("openai._vendor.httpx_aiohttp.transport", "map_aiohttp_exceptions"),
]


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
    assert not missing, f"{SDK}: the client's send path needs {', '.join(missing)}, gone; {FIX}"


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
            assert c.prebuilt, f"{SDK}: requests can no longer be built once per endpoint; {FIX}"
            task = asyncio.create_task(c.attempt(body, stream=True, timeout=5.0, save_text=True))
            tapped = 0
            for _ in range(500):
                tapped = max(tapped, len(stream_mod._TAPS))
                if tapped or task.done():
                    break
                await asyncio.sleep(0.01)
            release.set()
            res = await task
        finally:
            await c.close()
    assert res.ok and res.text == "hi", res
    assert tapped == 1, f"{SDK}: the stream was not read through the tapped aiohttp reader; {FIX}"
