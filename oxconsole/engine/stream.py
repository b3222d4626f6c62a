"""Reading one chat completion's answer: its server-sent events parsed and timed as they arrive.

Why this module exists: the SDK's per-chunk parsing builds a pydantic model per chunk (~0.3 ms CPU
each), so `client.py` asks the SDK for the raw response and the body is read here, parsed with
orjson, timing the first content token and the gaps between content chunks. The stream is read
from the aiohttp response underneath when the SDK's aiohttp transport is in use, with the
transport's own exception mapping: each network read is parsed and timed inside aiohttp's
`data_received` (`_TapReader`), and the attempt's task wakes once, at the end; `readany` where the
reader cannot be switched, httpx2's iterator for other transports or compressed bodies. A body
that is not a well-formed answer raises `_BadResponse`, which the attempt turns into its class.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import aiohttp
import httpx2
import orjson

try:  # the SDK's vendored aiohttp transport: read its stream directly, map errors as it does
    from openai._vendor.httpx_aiohttp.transport import AiohttpResponseStream, map_aiohttp_exceptions
except ImportError:  # pragma: no cover - an SDK without it reads through httpx2
    AiohttpResponseStream = None  # type: ignore[assignment,misc]
    map_aiohttp_exceptions = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from oxconsole.engine.client import AttemptResult

_DONE = b"[DONE]"


class _BadResponse(Exception):
    def __init__(self, cls: str, detail: str) -> None:
        super().__init__(detail)
        self.cls = cls


def _usage(obj: dict[str, Any], res: AttemptResult) -> None:
    u = obj.get("usage")
    if isinstance(u, dict):
        pt = u.get("prompt_tokens")
        ct = u.get("completion_tokens")
        if isinstance(pt, int):
            res.input_tokens = pt
        if isinstance(ct, int):
            res.output_tokens = ct


_CHOICES = (b'"choices":[', b'"choices": [')


class _Events:
    """The server-sent events of one chat completion stream, fed one network read at a time.

    Every data line is checked as JSON. The chunks of one stream usually differ only after
    `"choices":[` (same id, model, created): once a full parse has shown that the first chunk's
    bytes up to there are a top-level prefix carrying no usage and no error, a later line made of
    that prefix, one JSON value and `]}` is exactly that object with that value as its only
    choice, so only the choice is parsed. Anything else (usage, errors, [DONE], other shapes)
    takes the full parse.
    """

    __slots__ = (
        "buf",
        "cut",
        "done",
        "error",
        "finished",
        "first",
        "last",
        "n",
        "parts",
        "prefix",
        "res",
        "t_end",
    )

    def __init__(self, res: AttemptResult, save_text: bool) -> None:
        self.res = res
        self.buf = b""
        self.n = 0
        self.first = self.last = 0.0
        self.finished = False
        self.done = False
        self.parts: list[str] | None = [] if save_text else None
        self.prefix: bytes | None = None
        self.cut = 0  # len(prefix); -1 once learning it failed
        self.t_end = 0.0  # when the end of the body arrived (set by a tapped reader)
        self.error: Exception | None = None  # what feeding raised (in a tapped reader)

    def feed(self, data: bytes, now: float) -> None:
        if self.buf:
            data = self.buf + data
        lines = data.split(b"\n")
        self.buf = lines.pop()
        loads = orjson.loads
        prefix = self.prefix
        cut = self.cut
        for line in filter(None, lines):  # (blank lines only separate events)
            if not line.startswith(b"data:"):
                continue  # comments, event:/id: fields
            if prefix is not None and line.startswith(prefix) and line.endswith(b"]}"):
                try:
                    c0 = loads(line[cut:-2])
                except orjson.JSONDecodeError:
                    c0 = None
                if type(c0) is dict:
                    self.choice(c0, now)
                    continue
            self.event(line, now)
            prefix = self.prefix
            cut = self.cut

    def choice(self, c0: dict[str, Any], now: float) -> None:
        delta = c0.get("delta")
        if delta:
            piece = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
            counts = piece or delta.get("tool_calls")
        else:  # a text completion's chunk carries "text" and no delta
            piece = c0.get("text") if delta is None else None
            counts = piece
        if counts:
            if not self.n:
                self.first = now
            self.last = now
            self.n += 1
            if self.parts is not None and isinstance(piece, str):
                self.parts.append(piece)
        if c0.get("finish_reason"):
            self.finished = True

    def event(self, line: bytes, now: float) -> None:
        payload = line[5:].strip()
        if payload == _DONE:
            self.done = True
            return
        if not payload:
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise _BadResponse("bad_response", f"malformed SSE chunk: {payload[:80]!r}") from None
        if not isinstance(obj, dict):
            raise _BadResponse("bad_response", f"SSE chunk is not an object: {payload[:80]!r}")
        choices = obj.get("choices")
        if choices:
            self.choice(choices[0], now)
            if self.cut == 0:
                self.learn(line, obj)
        elif "error" in obj:
            err = obj["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise _BadResponse("stream_error", f"error event in stream: {msg}")
        if obj.get("usage"):
            _usage(obj, self.res)

    def learn(self, line: bytes, obj: dict[str, Any]) -> None:
        self.cut = -1
        if obj.get("usage") or "error" in obj:
            return
        for marker in _CHOICES:
            i = line.find(marker)
            if i > 0:
                prefix = line[: i + len(marker)]
                try:
                    head = orjson.loads(prefix[5:] + b"]}")
                except orjson.JSONDecodeError:
                    return
                if head == {**obj, "choices": []}:
                    self.prefix = prefix
                    self.cut = len(prefix)
                return

    def end(self, t0: float, end: float) -> None:
        res = self.res
        n = self.n
        if not (self.done or self.finished):
            raise _BadResponse(
                "stream_aborted", f"stream ended without finish_reason or [DONE] after {n} chunks"
            )
        res.latency_ms = (end - t0) * 1000.0
        res.content_chunks = n
        if n:
            res.ttft_ms = (self.first - t0) * 1000.0
            if n > 1:
                res.itl_ms = (self.last - self.first) * 1000.0 / (n - 1)
        if self.parts is not None:
            res.text = "".join(self.parts)


def _aiohttp_content(resp: httpx2.Response) -> Any:
    """The aiohttp stream under a response of the SDK's aiohttp transport, when bytes are raw."""
    inner = getattr(resp.stream, "_stream", None)
    if AiohttpResponseStream is None or not isinstance(inner, AiohttpResponseStream):
        return None
    if resp.headers.get("content-encoding", "identity") != "identity":
        return None  # compressed: httpx2 decodes it
    return inner._aiohttp_response.content


_TAPS: dict[int, _Events] = {}
"""The streams being read by a `_TapReader`, by id of the reader."""


class _TapReader(aiohttp.StreamReader):
    """An aiohttp body stream that hands each network read to its `_Events` as it arrives.

    Why: read through `readany`, every network read wakes the reading task (a future, a scheduled
    callback, a task step and three async frames); the read is timed only when that task runs, after
    whatever else the event loop had queued. A response's reader is switched to this class once its
    headers are in (same slots, so `__class__` assignment is allowed), and from then on aiohttp's
    HTTP parser feeds the events parser directly, inside the protocol's `data_received`: the time
    stamped is when the bytes came off the socket, and the task wakes once, at the end. Nothing is
    buffered, so flow control never pauses the connection. `feed_eof` and `set_exception` are the
    base class's (the connection goes back to the pool at the end, errors reach the waiting task).
    """

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            self.total_bytes += len(data)
            ev = _TAPS.get(id(self))
            if ev is not None and ev.error is None:
                try:
                    ev.feed(data, time.perf_counter())
                except Exception as err:  # a bad stream: stop here, the attempt raises it
                    ev.error = err
                    self.set_exception(err)
        return False

    def begin_http_chunk_receiving(self) -> None:
        pass

    def end_http_chunk_receiving(self) -> None:
        pass

    def feed_eof(self) -> None:
        ev = _TAPS.get(id(self))
        if ev is not None:
            ev.t_end = time.perf_counter()
        super().feed_eof()


def _switch(content: aiohttp.StreamReader) -> bool:
    """Make `content` a `_TapReader`; False where this aiohttp's reader does not allow it."""
    try:
        content.__class__ = _TapReader
    except TypeError:  # a reader with another layout (a compiled one): read it with readany
        return False
    return True


async def _read_tapped(content: aiohttp.StreamReader, ev: _Events) -> float:
    """Read a body through a reader `_switch`ed to `_TapReader`; when its end arrived."""
    perf = time.perf_counter
    key = id(content)
    _TAPS[key] = ev
    try:
        if content._buffer:  # what came with the headers, before the switch
            ev.feed(content.read_nowait(), perf())
        with map_aiohttp_exceptions():
            if content.exception() is not None:
                raise content.exception()  # type: ignore[misc]
            if not content.is_eof():
                await content.wait_eof()
    finally:
        del _TAPS[key]
    if ev.error is not None:
        raise ev.error
    return ev.t_end or perf()


async def _read_stream(resp: httpx2.Response, res: AttemptResult, t0: float, save_text: bool) -> None:
    perf = time.perf_counter
    ev = _Events(res, save_text)
    feed = ev.feed
    content = _aiohttp_content(resp)
    try:
        if content is not None and type(content) is aiohttp.StreamReader and _switch(content):
            end = await _read_tapped(content, ev)
        elif content is not None:
            readany = content.readany
            with map_aiohttp_exceptions():
                while data := await readany():
                    feed(data, perf())
            end = perf()
        else:
            async for data in resp.aiter_bytes():
                feed(data, perf())
            end = perf()
    except (AttributeError, TypeError, IndexError, KeyError) as err:
        raise _BadResponse("bad_response", f"unexpected SSE chunk shape: {err}") from None
    ev.end(t0, end)


async def _json_body(resp: httpx2.Response, res: AttemptResult, t0: float) -> tuple[bytes, Any]:
    """A whole JSON answer, its latency taken when its last byte came; malformed: `bad_response`."""
    raw = await resp.aread()
    res.latency_ms = (time.perf_counter() - t0) * 1000.0
    try:
        return raw, orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _BadResponse("bad_response", f"malformed JSON body: {raw[:80]!r}") from None


async def _read_json(resp: httpx2.Response, res: AttemptResult, t0: float, save_text: bool) -> None:
    raw, obj = await _json_body(resp, res, t0)
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        raise _BadResponse("bad_response", f"unexpected response body: {raw[:80]!r}")
    _usage(obj, res)
    text = ""
    if obj["choices"]:
        c0 = obj["choices"][0]
        msg = c0.get("message") or {}
        text = msg.get("content") or msg.get("reasoning_content") or c0.get("text") or ""
    res.content_chunks = 1 if text else 0
    if save_text:
        res.text = text
    if res.output_tokens is None:
        res.extra["estimated_output"] = max(1, round(len(text) / 4)) if text else 0


async def _read_embeddings(resp: httpx2.Response, res: AttemptResult, t0: float, save_text: bool) -> None:
    """An embeddings answer: latency and input tokens (`usage.prompt_tokens`), no output tokens;
    with `save_text` its vectors as a JSON array (one per input) for `batch_output`."""
    raw, obj = await _json_body(resp, res, t0)
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise _BadResponse("bad_response", f"unexpected embeddings body: {raw[:80]!r}")
    _usage(obj, res)
    res.output_tokens = 0
    if save_text:
        res.text = orjson.dumps([d.get("embedding") for d in data]).decode()
