"""The simulator's other kinds of model: `/v1/rerank`, `/v1/audio/transcriptions`,
`/v1/audio/speech` and `/v1/images/generations`, and the image tokens of chat and Responses.

Why this module exists: a workload that mixes chat with a reranker, a transcription model, a speech
model and an image model needs a server that answers each the way providers do, with timing that
is exact when `jitter = 0`, so the demo and the tests need no model. From admission (after any
wait for `capacity`, the faults on arrival drawn as for chat):

* a ranking is answered `ttft` later, each document scored from a hash of it and the query;
* a transcription `ttft + rtf x` its audio's seconds later (the audio's length read from its
  header, whatever its format); streamed (`stream=true`), its words are `transcript.text.delta`
  events from `ttft` to that end, then `transcript.text.done` with usage;
* speech is `len(input) / 15` seconds of audio (silence) streamed at `1 / audio_rtf` times real
  time: the first bytes `ttft` after admission, then a chunk every `CHUNK_S`, the last at
  `ttft + seconds x audio_rtf`; as wav, pcm (24 kHz 16-bit mono) or mp3 (24 kHz, whole frames of
  24 ms), or as `speech.audio.delta` events with `stream_format = "sse"`;
* n images of the size asked are answered `n x image_s` later, each a flat PNG of that size.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import orjson
from aiohttp import web

from oxconsole.media.audiolen import audio_seconds
from oxconsole.media.audiostream import PCM_RATE, SILENT_MP3_FRAME
from oxconsole.media.kinds import MediaError
from oxconsole.media.multipart import read_form
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import header
from oxconsole.sim.encoded import SSE_HEADERS, TOKEN_WORDS, error_body, json_response
from oxconsole.sim.faults import stream_faults
from oxconsole.sim.state import ModelState
from oxconsole.sim.streams import sleep_until

__all__ = ["CHARS_PER_S", "CHUNK_S", "MediaRoutes", "image_parts"]

CHARS_PER_S: Final = 15
"""Characters of speech input per second of audio (what a voice reads aloud: ~150 words a minute)."""

CHUNK_S: Final = 0.05
"""Wall seconds between the chunks of a speech answer (every provider streams in such pieces)."""

WORDS_PER_S: Final = 2.5
"""Words a transcription writes per second of audio."""

MAX_SIDE: Final = 4096
"""The largest image side the simulator draws (a flat PNG of each size is made once: 4096 x 4096
takes about a second)."""

_FORMATS: Final = ("wav", "pcm", "mp3")
_FRAME_SAMPLES: Final = 576
"""Samples in one of `SILENT_MP3_FRAME`'s frames (24 ms at 24 kHz)."""


def image_parts(body: dict[str, Any], responses: bool) -> int:
    """Images in a chat request's messages (`image_url` parts) or a Responses input
    (`input_image` parts): each costs the model `image_tokens` prompt tokens."""
    items = body.get("input") if responses else body.get("messages")
    if not isinstance(items, list):
        return 0
    kind = "input_image" if responses else "image_url"
    n = 0
    for m in items:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            n += sum(1 for p in c if isinstance(p, dict) and p.get("type") == kind)
    return n


class Server(Protocol):
    """What these handlers use of the simulator's state (`routes.SimState`)."""

    bad_requests: int

    async def raw_body(self, request: web.Request) -> bytes: ...

    def model_of(self, body: dict[str, Any]) -> ModelState: ...

    def state_for(self, name: str) -> ModelState: ...

    async def arrive(
        self, request: web.Request, ms: ModelState, tokens: int
    ) -> web.StreamResponse | None: ...


def _bad(state: Server, message: str) -> web.Response:
    state.bad_requests += 1
    return json_response(400, error_body(message, "invalid_request_error", None))


class MediaRoutes:
    """The handlers of the other kinds, on one simulator's state."""

    def __init__(self, state: Server) -> None:
        self.state = state
        self._pngs: dict[tuple[int, int], str] = {}

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/v1/rerank", self.rerank)
        app.router.add_post("/v1/audio/transcriptions", self.transcriptions)
        app.router.add_post("/v1/audio/speech", self.speech)
        app.router.add_post("/v1/images/generations", self.images)

    async def _json(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = orjson.loads(await self.state.raw_body(request))
        except orjson.JSONDecodeError:
            return _bad(self.state, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _bad(self.state, "request body must be a JSON object")
        return body

    async def _serve(
        self,
        request: web.Request,
        ms: ModelState,
        tokens: int,
        answer: Callable[[ModelState, float], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """Arrival faults and rate limits, a capacity slot, the answer, the slot given back."""
        refused = await self.state.arrive(request, ms, tokens)
        if refused is not None:
            return refused
        loop = asyncio.get_running_loop()
        t_admit = loop.time() if ms.try_acquire() else await ms.acquire(loop)
        try:
            return await answer(ms, t_admit)
        except ConnectionError:
            ms.stats.disconnected += 1
            return web.Response(status=499)
        finally:
            ms.release(loop)

    # -- rerank ----------------------------------------------------------------------------------

    async def rerank(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/rerank``: `{"model", "query", "documents", "top_n"}`."""
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        query, docs = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not query:
            return _bad(self.state, "query must be a non-empty string")
        if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
            return _bad(self.state, "documents must be a non-empty list of strings")
        top_n = body.get("top_n", len(docs))
        if type(top_n) is not int or top_n < 1:
            return _bad(self.state, "top_n must be an integer >= 1")
        ms = self.state.model_of(body)
        tokens = (len(query) + sum(map(len, docs)) + 3) // 4

        async def answer(ms: ModelState, t_admit: float) -> web.StreamResponse:
            await _until(t_admit + ms.profile.ttft * ms.factor())
            scores = sorted(((_score(query, d), i) for i, d in enumerate(docs)), reverse=True)
            results = [{"index": i, "relevance_score": s} for s, i in scores[:top_n]]
            usage = {"prompt_tokens": tokens, "total_tokens": tokens}
            out = {"id": f"rerank-{id(results):x}", "model": ms.name, "usage": usage, "results": results}
            ms.stats.completed += 1
            return json_response(200, orjson.dumps(out))

        return await self._serve(request, ms, tokens, answer)

    # -- transcriptions --------------------------------------------------------------------------

    async def transcriptions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/audio/transcriptions``: a multipart form with `file`, `model`,
        `response_format` (json, verbose_json, text, srt, vtt) and `stream`."""
        try:
            form = read_form(request.headers.get("Content-Type", ""), await self.state.raw_body(request))
        except ValueError as e:
            return _bad(self.state, f"expected a multipart/form-data body: {e}")
        f, model = form.get("file"), form.get("model")
        if f is None or model is None:
            return _bad(self.state, f"missing form field: {'file' if f is None else 'model'}")
        try:
            seconds = audio_seconds(f.data, "file")
        except MediaError as e:
            return _bad(self.state, str(e))
        fmt = form["response_format"].text() if "response_format" in form else "json"
        if fmt not in ("json", "verbose_json", "text", "srt", "vtt"):
            return _bad(
                self.state, f"response_format {fmt!r} is not one of json, verbose_json, text, srt, vtt"
            )
        stream = "stream" in form and form["stream"].text().lower() == "true"
        ms = self.state.state_for(model.text())
        ms.stats.received += 1
        words = max(1, round(WORDS_PER_S * seconds))
        text = " ".join(TOKEN_WORDS[i % len(TOKEN_WORDS)].strip() for i in range(words))
        usage = {"type": "duration", "seconds": round(seconds, 3)}

        async def answer(ms: ModelState, t_admit: float) -> web.StreamResponse:
            prof = ms.profile
            t_first = t_admit + prof.ttft * ms.factor()
            t_end = t_first + prof.rtf * seconds * ms.factor()
            if stream:
                return await _stream_words(request, ms, text.split(" "), t_first, t_end, usage)
            await _until(t_end)
            ms.stats.completed += 1
            if fmt in ("text", "srt", "vtt"):
                return web.Response(text=text, content_type="text/plain")
            out: dict[str, Any] = {"text": text, "usage": usage}
            if fmt == "verbose_json":
                out = {"task": "transcribe", "language": "english", "duration": seconds, **out}
            return json_response(200, orjson.dumps(out))

        return await self._serve(request, ms, 0, answer)

    # -- speech ----------------------------------------------------------------------------------

    async def speech(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/audio/speech``: `{"model", "input", "voice", "response_format",
        "stream_format"}`."""
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        text = body.get("input")
        if not isinstance(text, str) or not text:
            return _bad(self.state, "input must be a non-empty string")
        fmt = body.get("response_format", "mp3")
        if fmt not in _FORMATS:
            return _bad(self.state, f"response_format {fmt!r}: the simulator speaks wav, pcm and mp3")
        sse = body.get("stream_format") == "sse"
        ms = self.state.model_of(body)
        tokens = (len(text) + 3) // 4

        async def answer(ms: ModelState, t_admit: float) -> web.StreamResponse:
            seconds = len(text) / CHARS_PER_S
            prof = ms.profile
            abort = stream_faults(ms)[0] if ms.stream_faults else False
            t_first = t_admit + prof.ttft * ms.factor()
            span = seconds * prof.audio_rtf * ms.factor()
            pieces = _audio_pieces(
                str(fmt), len(text) * (PCM_RATE // CHARS_PER_S), 2 + math.ceil(span / CHUNK_S)
            )
            resp = web.StreamResponse(headers=SSE_HEADERS if sse else {"Content-Type": _MIME[str(fmt)]})
            await resp.prepare(request)
            n = len(pieces)
            for k, piece in enumerate(pieces):
                if abort and k == n // 2:
                    if request.transport is not None:
                        request.transport.close()
                    return resp
                await _until(t_first + (span * k / (n - 1) if n > 1 else span))
                if sse:
                    event = {"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode("ascii")}
                    piece = b"data: " + orjson.dumps(event) + b"\n\n"
                    if k == n - 1:
                        usage = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
                        done = {"type": "speech.audio.done", "usage": usage}
                        piece += b"data: " + orjson.dumps(done) + b"\n\n"
                if k == n - 1:
                    ms.stats.completed += 1
                    await resp.write_eof(piece)
                else:
                    await resp.write(piece)
            return resp

        return await self._serve(request, ms, tokens, answer)

    # -- images ----------------------------------------------------------------------------------

    async def images(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/images/generations``: `{"model", "prompt", "size", "n"}`."""
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return _bad(self.state, "prompt must be a non-empty string")
        n = body.get("n", 1)
        if type(n) is not int or not 1 <= n <= 10:
            return _bad(self.state, "n must be an integer between 1 and 10")
        size = body.get("size", "auto")
        wh = (1024, 1024) if size == "auto" else _size(size)
        if wh is None:
            return _bad(self.state, f"size must be WIDTHxHEIGHT (each 1 to {MAX_SIDE}) or auto, not {size!r}")
        ms = self.state.model_of(body)
        tokens = (len(prompt) + 3) // 4

        async def answer(ms: ModelState, t_admit: float) -> web.StreamResponse:
            await _until(t_admit + n * ms.profile.image_s * ms.factor())
            b64 = self._png(wh)
            usage = {
                "input_tokens": tokens,
                "input_tokens_details": {"text_tokens": tokens, "image_tokens": 0},
                "output_tokens": 0,
                "total_tokens": tokens,
            }
            out = {"created": int(time.time()), "data": [{"b64_json": b64}] * n, "usage": usage}
            ms.stats.completed += 1
            return json_response(200, orjson.dumps(out))

        return await self._serve(request, ms, tokens, answer)

    def _png(self, wh: tuple[int, int]) -> str:
        """A flat PNG of this size in base64, made once per size."""
        b64 = self._pngs.get(wh)
        if b64 is None:
            if len(self._pngs) >= 16:
                self._pngs.clear()
            png = SyntheticPng(*wh).png(0)
            b64 = self._pngs[wh] = base64.b64encode(png).decode("ascii")
        return b64


_MIME: Final = {"wav": "audio/wav", "pcm": "audio/pcm", "mp3": "audio/mpeg"}


def _size(size: Any) -> tuple[int, int] | None:
    if not isinstance(size, str):
        return None
    w, sep, h = size.partition("x")
    if not sep or not w.isdigit() or not h.isdigit():
        return None
    wh = (int(w), int(h))
    return wh if all(1 <= x <= MAX_SIDE for x in wh) else None


def _score(query: str, doc: str) -> float:
    """A document's relevance to a query: the same for the same pair, between 0 and 1."""
    h = hashlib.blake2b(f"{query}\x00{doc}".encode(), digest_size=8).digest()
    return round(int.from_bytes(h, "big") / 2**64, 6)


def _audio_pieces(fmt: str, frames: int, chunks: int) -> list[bytes]:
    """`frames` samples of silence at 24 kHz as `fmt`, cut into `chunks` pieces (the first with
    the WAV header; mp3 in whole frames, as many as cover the samples)."""
    if fmt == "mp3":
        count = math.ceil(frames / _FRAME_SAMPLES)
        cuts = [count * k // chunks for k in range(chunks + 1)]
        return [SILENT_MP3_FRAME * (cuts[k + 1] - cuts[k]) for k in range(chunks)]
    total = 2 * frames
    cuts = [total * k // chunks // 2 * 2 for k in range(chunks + 1)]
    pieces = [bytes(cuts[k + 1] - cuts[k]) for k in range(chunks)]
    if fmt == "wav":
        pieces[0] = header(frames, rate=PCM_RATE) + pieces[0]
    return pieces


async def _until(when: float) -> None:
    """Sleep until the loop's absolute time `when` (no drift from relative sleeps)."""
    await sleep_until(asyncio.get_running_loop(), when)


async def _stream_words(
    request: web.Request,
    ms: ModelState,
    words: list[str],
    t_first: float,
    t_end: float,
    usage: dict[str, Any],
) -> web.StreamResponse:
    """A streamed transcription: a `transcript.text.delta` per word from `t_first` to `t_end`, the
    last with `transcript.text.done`."""
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    n = len(words)
    for k, w in enumerate(words):
        await _until(t_first + ((t_end - t_first) * k / (n - 1) if n > 1 else t_end - t_first))
        delta = w if k == 0 else " " + w
        data = b"data: " + orjson.dumps({"type": "transcript.text.delta", "delta": delta}) + b"\n\n"
        if k == n - 1:
            done = {"type": "transcript.text.done", "text": " ".join(words), "usage": usage}
            ms.stats.completed += 1
            await resp.write_eof(data + b"data: " + orjson.dumps(done) + b"\n\n")
        else:
            await resp.write(data)
    return resp
