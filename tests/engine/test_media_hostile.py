"""Nothing the other kinds' servers send is read unbounded: a speech stream that never ends, an
image body that never ends, a transcription stream that never says it is done, each cut at its
bound with its class, within bounded memory and time (bounds set small through `BodyLimits`)."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from oxconsole.engine.send.attempt import AttemptResult, Encoded
from oxconsole.engine.send.client import EndpointClient
from oxconsole.engine.send.stream import BodyLimits
from oxconsole.media.audiostream import SILENT_MP3_FRAME
from oxconsole.media.multipart import transcription_form
from oxconsole.media.wav import SyntheticWav
from tests.support.http import loopback

MIB = 1 << 20
LIMIT = 1 * MIB


def endless(ctype: str, first: bytes, piece: bytes) -> Any:
    """A handler that writes `first`, then `piece` forever (until the client goes away)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": ctype})
        await resp.prepare(request)
        await resp.write(first)
        try:
            while True:
                await resp.write(piece)
        except (ConnectionError, RuntimeError):
            return resp

    return handle


def cut_short(ctype: str, data: bytes) -> Any:
    """A handler that writes `data` in a chunked body, then drops the connection."""

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": ctype})
        await resp.prepare(request)
        await resp.write(data)
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.close()
        return resp

    return handle


@asynccontextmanager
async def serve(path: str, handler: Any) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1" + path, handler)
    async with loopback(app) as origin:
        yield origin + "/v1"


async def attempt(
    url: str, api: str, body: dict[str, Any] | Encoded, stream: bool = True
) -> tuple[AttemptResult, float, float]:
    """One attempt with a 1 MiB body bound (and a minute's timeout, so a body cut by its bound is
    told from one cut by time): its result, the seconds it took, Python's peak memory (MiB)."""
    c = EndpointClient("e", url, None, max_connections=2, timeout=60.0, limits=BodyLimits(body=LIMIT))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        res = await c.attempt(body, stream=stream, timeout=60.0, save_text=True, api=api)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await c.close()
    return res, time.perf_counter() - t0, peak / MIB


SPEECH = {"model": "m", "input": "hello", "voice": "alloy", "response_format": "mp3"}


async def test_a_speech_stream_that_never_ends_is_cut_at_the_bound() -> None:
    async with serve("/audio/speech", endless("audio/mpeg", b"", SILENT_MP3_FRAME * 2000)) as url:
        res, took, peak = await attempt(url, "speech", SPEECH)
    assert (res.error, res.detail) == ("bad_response", "audio over 1 MiB"), res
    assert took < 15 and peak < 8, (took, peak)  # counted as it passed, never kept


async def test_a_kept_format_that_never_ends_is_cut_at_the_bound() -> None:
    body = {**SPEECH, "response_format": "opus"}
    async with serve("/audio/speech", endless("audio/ogg", b"OggS", bytes(64 << 10))) as url:
        res, took, peak = await attempt(url, "speech", body)
    assert (res.error, res.detail) == ("bad_response", "audio over 1 MiB"), res
    assert took < 15 and peak < 8, (took, peak)


async def test_an_image_body_that_never_ends_is_cut_at_the_bound() -> None:
    first = b'{"created": 1, "data": [{"b64_json": "'
    async with serve("/images/generations", endless("application/json", first, b"A" * (64 << 10))) as url:
        res, took, peak = await attempt(url, "images", {"model": "m", "prompt": "x", "size": "8x8", "n": 1})
    assert (res.error, res.detail) == ("bad_response", "answer body over 1 MiB"), res
    assert took < 15 and peak < 8, (took, peak)


async def test_a_transcription_stream_that_never_finishes_is_cut_at_the_bound() -> None:
    event = b'data: {"type":"transcript.text.delta","delta":"word "}\n\n'
    form = transcription_form("m")
    body = Encoded(form.body(SyntheticWav(0.5).wav(1)), form.content_type)
    async with serve("/audio/transcriptions", endless("text/event-stream", b"", event * 1000)) as url:
        res, took, _ = await attempt(url, "transcriptions", body)
    assert (res.error, res.detail) == ("bad_response", "stream over 1 MiB"), res
    assert took < 15


async def test_speech_cut_mid_stream_is_stream_aborted() -> None:
    async with serve("/audio/speech", cut_short("audio/mpeg", SILENT_MP3_FRAME * 100)) as url:
        res, _, _ = await attempt(url, "speech", SPEECH)
    assert res.error == "stream_aborted", res


async def test_a_transcription_stream_that_stops_early_is_stream_aborted() -> None:
    form = transcription_form("m")
    body = Encoded(form.body(SyntheticWav(0.5).wav(1)), form.content_type)
    event = b'data: {"type":"transcript.text.delta","delta":"word"}\n\n'
    async with serve("/audio/transcriptions", cut_short("text/event-stream", event)) as url:
        res, _, _ = await attempt(url, "transcriptions", body)
    assert res.error == "stream_aborted", res
