"""Reading the answers of every other kind of model: a ranking, a transcription (whole, as text,
or streamed), speech (the audio counted as it streams) and generated images, each within its
bound.

Why this module exists: these answers are not chat's (`stream.py`), but they are read the same way:
every body through `internals.read_body` a network read at a time, bounded by `BodyLimits` (a 2 GB
audio stream or an image body that never ends is cut at `limits.body`, a `bad_response`), timed
where their figures are (a transcription's first text, speech's first audio byte), and a body
that is not what its API answers is a `bad_response` naming what came instead. Speech is never
kept: wav, pcm and mp3 are counted as they pass (`media/audiostream.py`); other formats are kept
within the bound and measured from their headers at the end.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import aiohttp
import orjson

from oxconsole.engine.send.attempt import AttemptResult, BadResponse
from oxconsole.engine.send.internals import Sink, read_body
from oxconsole.engine.send.stream import (
    BodyLimits,
    SseLines,
    collect,
    error_event,
    json_body,
    read_events,
    size_words,
    sse_object,
)
from oxconsole.engine.send.thinking import text_estimate
from oxconsole.engine.send.usage import count
from oxconsole.media.audiolen import audio_seconds
from oxconsole.media.audiostream import AudioCounter
from oxconsole.media.kinds import MediaError, image_type

__all__ = ["read_images", "read_rerank", "read_speech", "read_transcription"]

COUNTED = frozenset({"wav", "pcm", "mp3"})
"""Speech formats counted as they stream; the others are kept (within the bound) and measured at
the end."""

RANKS_KEPT = 100
"""The top results a ranking's `text` keeps (as `[[index, score], ...]`): never the documents."""


def _int(v: Any) -> int | None:
    return v if type(v) is int and v >= 0 else None


def _tokens(u: Any, res: AttemptResult, inp: tuple[str, ...], out: tuple[str, ...]) -> None:
    """Input and output tokens from a usage object, the first key of each list that is there."""
    if not isinstance(u, dict):
        return
    for k in inp:  # each count within its bounds (`usage.count`: a doubted one keeps no usage)
        if (n := count(u, k, res)) is not None:
            res.input_tokens = n
            break
    for k in out:
        if (n := count(u, k, res)) is not None:
            res.output_tokens = n
            break


# -- rerank ---------------------------------------------------------------------------------------


async def read_rerank(
    resp: aiohttp.ClientResponse,
    res: AttemptResult,
    t0: float,
    save_text: bool,
    limits: BodyLimits,
    documents: int,
) -> None:
    """A ranking: `results`, each an `index` of one of the `documents` sent and a numeric
    `relevance_score` (vLLM, llama.cpp, Jina, Cohere); input tokens from `usage` (`prompt_tokens`,
    else `total_tokens`), none generated."""
    raw, obj = await json_body(resp, res, t0, limits)
    results = obj.get("results") if isinstance(obj, dict) else None
    if not isinstance(results, list):
        raise BadResponse("bad_response", f"unexpected rerank body: {bytes(raw[:80])!r}")
    ranks: list[list[Any]] = []
    for r in results:
        i = _int(r.get("index")) if isinstance(r, dict) else None
        score = r.get("relevance_score") if isinstance(r, dict) else None
        if i is None or i >= documents or not isinstance(score, int | float) or isinstance(score, bool):
            raise BadResponse(
                "bad_response",
                f"a rerank result that is not an index below {documents} with a relevance_score: "
                f"{orjson.dumps(r)[:80]!r}",
            )
        if len(ranks) < RANKS_KEPT:
            ranks.append([i, score])
    _tokens(obj.get("usage"), res, ("prompt_tokens", "total_tokens"), ())
    res.output_tokens = 0
    res.content_chunks = 1
    if save_text:
        res.text = orjson.dumps(ranks).decode()


# -- image generation -----------------------------------------------------------------------------


async def read_images(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """Generated images: `data`, each a `b64_json` (its first bytes must be an image's) or a `url`;
    `images_out` is how many; tokens from `usage` where the model reports them (gpt-image), else
    none. The text kept is the revised prompts, never the images."""
    raw, obj = await json_body(resp, res, t0, limits)
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise BadResponse("bad_response", f"unexpected images body: {bytes(raw[:80])!r}")
    revised: list[str] = []
    for j, d in enumerate(data):
        b64 = d.get("b64_json") if isinstance(d, dict) else None
        url = d.get("url") if isinstance(d, dict) else None
        if isinstance(b64, str) and b64:
            try:
                head = base64.b64decode(b64[:64])
            except (binascii.Error, ValueError):
                head = b""
            if image_type(head) is None:
                raise BadResponse("bad_response", f"data.{j}.b64_json is not an image: {b64[:24]!r}")
        elif not (isinstance(url, str) and url):
            raise BadResponse("bad_response", f"data.{j} has neither b64_json nor url")
        rp = d.get("revised_prompt")
        if isinstance(rp, str):
            revised.append(rp)
    res.images_out = len(data)
    _tokens(obj.get("usage"), res, ("input_tokens",), ("output_tokens",))
    if res.output_tokens is None:
        res.output_tokens = 0
    res.content_chunks = 1
    if save_text:
        res.text = "\n".join(revised)


# -- transcriptions -------------------------------------------------------------------------------


class _TranscriptEvents(SseLines):
    """A streamed transcription's events, in either dialect: OpenAI's (`transcript.text.delta`
    events, then `transcript.text.done` with the text and usage) or vLLM's (chat-like chunks with
    `choices[0].delta.content`, usage, `[DONE]`)."""

    __slots__ = ("parts",)

    def __init__(self, res: AttemptResult, save_text: bool, limits: BodyLimits) -> None:
        super().__init__(res, limits)
        self.parts: list[str] = []

    def event(self, payload: bytes, now: float) -> None:
        if not payload:
            return
        if payload == b"[DONE]":
            self.done = True
            return
        obj = sse_object(payload, "event")
        kind = obj.get("type")
        if kind == "transcript.text.delta":
            self.piece(obj.get("delta"), now)
        elif kind == "transcript.text.done":
            text = obj.get("text")
            if isinstance(text, str):
                self.parts = [text]
            _tokens(obj.get("usage"), self.res, ("input_tokens",), ("output_tokens",))
            self.done = True
        elif "error" in obj:
            raise error_event(obj["error"])
        else:
            choices = obj.get("choices")
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                delta = choices[0].get("delta")
                self.piece(delta.get("content") if isinstance(delta, dict) else None, now)
            _tokens(obj.get("usage"), self.res, ("prompt_tokens",), ("completion_tokens",))

    def piece(self, text: Any, now: float) -> None:
        if not isinstance(text, str) or not text:
            return
        self.tick(now)
        self.parts.append(text)

    def end(self, t0: float, end: float) -> None:
        if not self.done:
            raise BadResponse(
                "stream_aborted", f"stream ended without transcript.text.done or [DONE] after {self.n} deltas"
            )
        self.timed(t0, end)
        _text(self.res, "".join(self.parts), True)


def _text(res: AttemptResult, text: str, save_text: bool) -> None:
    res.content_chunks = max(res.content_chunks, 1 if text else 0)
    if save_text:
        res.text = text
    if res.output_tokens is None:
        res.extra["estimated_output"] = text_estimate(text)


async def read_transcription(
    resp: aiohttp.ClientResponse,
    res: AttemptResult,
    t0: float,
    save_text: bool,
    limits: BodyLimits,
) -> None:
    """A transcription, by its Content-Type: server-sent events (streamed: TTFT at the first text),
    JSON (`{"text", "usage"}`; `verbose_json` too) or plain text (`text`, `srt`, `vtt`)."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        ev = _TranscriptEvents(res, save_text, limits)
        await read_events(resp, ev, t0, (AttributeError, TypeError, KeyError), "event")
        if not save_text:
            res.text = None
        return
    raw = await _collect_timed(resp, res, t0, limits)
    if ctype.startswith("application/json") or raw[:1] == b"{":
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadResponse("bad_response", f"malformed JSON body: {bytes(raw[:80])!r}") from None
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str):
            raise BadResponse("bad_response", f"unexpected transcription body: {bytes(raw[:80])!r}")
        u = obj.get("usage")
        if isinstance(u, dict) and u.get("type") != "duration":
            _tokens(u, res, ("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))
    else:
        text = bytes(raw).decode("utf-8", "replace")
    _text(res, text, save_text)


async def _collect_timed(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, limits: BodyLimits
) -> bytearray:
    """A whole body within `limits.body`, the latency taken at its last byte."""
    raw, end = await collect(resp, limits.body, "answer body")
    res.latency_ms = (end - t0) * 1000.0
    return raw


# -- speech ---------------------------------------------------------------------------------------


class _Audio(Sink):
    """Speech's audio as it arrives: the first byte timed, wav/pcm/mp3 counted without keeping
    them, other formats kept; the whole within `limit` bytes."""

    __slots__ = ("counter", "first", "kept", "limit", "size")

    def __init__(self, fmt: str, limit: int) -> None:
        self.counter = AudioCounter(fmt) if fmt in COUNTED else None
        self.kept: bytearray | None = None if self.counter is not None else bytearray()
        self.limit = limit
        self.size = 0
        self.first = 0.0

    def feed(self, data: bytes, now: float) -> bool:
        if not data:
            return False
        if not self.size:
            self.first = now
        self.size += len(data)
        if self.size > self.limit:
            raise BadResponse("bad_response", f"audio over {size_words(self.limit)}")
        self.take(data)
        return False

    def take(self, data: bytes) -> None:
        if self.counter is not None:
            try:
                self.counter.feed(data)
            except ValueError as e:
                raise BadResponse("bad_response", f"audio that is not {self.counter.format}: {e}") from None
        else:
            assert self.kept is not None
            self.kept += data

    def seconds(self) -> float:
        if self.counter is not None:
            return self.counter.seconds
        assert self.kept is not None
        try:
            return audio_seconds(bytes(self.kept), "speech")
        except MediaError as e:
            raise BadResponse("bad_response", f"audio whose length cannot be read: {e}") from None


class _SpeechEvents(SseLines):
    """Speech as server-sent events (`stream_format = "sse"`): `speech.audio.delta` events carrying
    base64 audio, `speech.audio.done` with usage."""

    __slots__ = ("audio",)

    def __init__(self, res: AttemptResult, audio: _Audio, limits: BodyLimits) -> None:
        super().__init__(res, limits)
        self.audio = audio

    def event(self, payload: bytes, now: float) -> None:
        if not payload or payload == b"[DONE]":
            return
        obj = sse_object(payload, "event")
        kind = obj.get("type")
        if kind == "speech.audio.delta":
            b64 = obj.get("audio")
            try:
                data = base64.b64decode(b64) if isinstance(b64, str) else b""
            except (binascii.Error, ValueError):
                raise BadResponse("bad_response", "speech.audio.delta whose audio is not base64") from None
            if data:
                self.tick(now)
                self.audio.take(data)
        elif kind == "speech.audio.done":
            _tokens(obj.get("usage"), self.res, ("input_tokens",), ("output_tokens",))
            self.done = True
        elif "error" in obj:
            raise error_event(obj["error"])

    def end(self, t0: float, end: float) -> None:
        if not self.done:
            raise BadResponse(
                "stream_aborted", f"stream ended without speech.audio.done after {self.n} deltas"
            )
        self.timed(t0, end)
        self.res.itl_ms = None


async def read_speech(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, limits: BodyLimits, fmt: str
) -> None:
    """Speech in `fmt` ("wav", "mp3", ...), read as it streams: `ttft_ms` at the first audio byte,
    `audio_out_s` the seconds received; output tokens only where the server reports them (SSE)."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("application/json"):
        raw = await _collect_timed(resp, res, t0, limits)
        raise BadResponse("bad_response", f"a JSON body where audio was expected: {bytes(raw[:80])!r}")
    length = resp.content_length
    if length is not None and length > limits.body:
        raise BadResponse("bad_response", f"audio over {size_words(limits.body)} (Content-Length {length})")
    audio = _Audio(fmt, limits.body)
    if ctype.startswith("text/event-stream"):
        ev = _SpeechEvents(res, audio, limits)
        await read_events(resp, ev, t0, (AttributeError, TypeError, KeyError), "event")
    else:
        end = await read_body(resp.content, audio)
        if not audio.size:
            raise BadResponse("bad_response", "an answer without audio")
        res.latency_ms = (end - t0) * 1000.0
        res.ttft_ms = (audio.first - t0) * 1000.0
        res.content_chunks = 1
    seconds = audio.seconds()
    if not seconds > 0:
        raise BadResponse("bad_response", f"{fmt} audio of no length ({audio.size} bytes)")
    res.audio_out_s = seconds
    if res.output_tokens is None:
        res.output_tokens = 0
