"""Reading one answer: a stream's server-sent events parsed and timed as they arrive, a JSON body
collected, each within its bound.

Why this module exists: the SDK's per-chunk parsing builds a pydantic model per chunk (~0.3 ms CPU
each), so `client.py` reads the raw aiohttp response and the body is read here, parsed with orjson,
timing the first content token and the gaps between content chunks. Every body takes one path:
`internals.read_body` hands each network read (already decompressed by aiohttp) to a sink, inside
aiohttp's `data_received`; `_Events` is a stream's sink, `_Collected` a JSON body's. Anything a
server sends is read within `BodyLimits`; a body that is not a well-formed answer, or is over a
bound, raises `BadResponse`, which the attempt turns into its class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from oxconsole.engine.send.attempt import AttemptResult, BadResponse
from oxconsole.engine.send.internals import Sink, read_body
from oxconsole.engine.send.thinking import (
    HELD_MAX,
    THINK_CLOSE,
    THINK_OPEN,
    llama_cache,
    split_think,
    text_estimate,
    usage_details,
)
from oxconsole.engine.send.usage import count

_DONE = b"[DONE]"
MIB = 1 << 20


@dataclass(slots=True, frozen=True)
class BodyLimits:
    """How much of a server's answer is read (docs/reliability.md, "Hostile servers: limits").
    Bytes are counted after any gzip, deflate or br is undone, so a small compressed body cannot
    inflate past them."""

    body: int = 64 * MIB
    """An answer, streamed or not: about 300k stream chunks, or a JSON answer 1,000 times the
    longest chat completion; more is a `bad_response`."""
    line: int = 8 * MIB
    """One line of a stream (one event's data): the longest single chunk a server may send."""
    error_body: int = 1 * MIB
    """What is read of an error answer (its detail keeps 200 characters); the rest is not read
    and the attempt keeps its `http_NNN` class."""


def size_words(n: int) -> str:
    """A bound in words: "64 MiB", or bytes below one MiB."""
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n} bytes"


def _usage(obj: dict[str, Any], res: AttemptResult) -> None:
    u = obj.get("usage")
    if isinstance(u, dict):
        pt = count(u, "prompt_tokens", res)
        ct = count(u, "completion_tokens", res)
        count(u, "total_tokens", res)
        if pt is not None:
            res.input_tokens = pt
        if ct is not None:
            res.output_tokens = ct
        usage_details(u, res)
        if "timings" in obj:
            llama_cache(obj, res)


_CHOICES = (b'"choices":[', b'"choices": [')

_PLAIN, _START, _THINK, _AFTER = 0, 1, 2, 3
"""Where a stream's content is: answering (nothing more to look at), not yet begun (a `<think>`
tag may open it), inside `<think>`, or after `</think>` before the answer's first word."""
_TAIL = len(THINK_CLOSE) - 1


class SseLines(Sink):
    """A stream's server-sent event lines, fed one network read at a time, for its subclass's
    `_lines` (the chat, Responses and media readers share it). Lines end with LF, CRLF or CR; a
    line still coming is kept in one growing buffer and joined once, when it ends, so a long line
    costs time linear in its length; it may not pass `limits.line`, nor the stream `limits.body`.
    `__init__` sets `buf`, `size`, `limits`, `done` and the timing counters (`n` chunks that
    carried a token, the `first` and `last` of them, `rn` of them reasoning, `t_answer` when the
    answer began); `timed` turns those into the attempt's figures."""

    __slots__ = ("buf", "done", "first", "last", "limits", "n", "res", "rn", "size", "t_answer")
    buf: bytearray
    size: int
    limits: BodyLimits
    done: bool
    res: AttemptResult
    n: int
    rn: int
    first: float
    last: float
    t_answer: float

    def __init__(self, res: AttemptResult, limits: BodyLimits) -> None:
        """Nothing read yet, no token timed; subclasses add their own state after this."""
        self.res = res
        self.limits = limits
        self.buf = bytearray()
        self.size = 0
        self.n = self.rn = 0
        self.first = self.last = self.t_answer = 0.0
        self.done = False

    def feed(self, data: bytes, now: float) -> bool:
        """Parse what `data` completes; True once `[DONE]` came (the answer is complete)."""
        self.size += len(data)
        if self.size > self.limits.body:
            raise BadResponse("bad_response", f"stream over {size_words(self.limits.body)}")
        if b"\r" in data:  # a CRLF split between reads gives a blank line: blank lines separate
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self.buf
        if buf:
            if b"\n" not in data:
                return self._pending(data)
            buf += data
            data = bytes(buf)
            buf.clear()
        lines = data.split(b"\n")
        tail = lines.pop()
        if tail:
            self._pending(tail)
        self._lines(lines, now)
        return self.done

    def _pending(self, part: bytes) -> bool:
        """Keep the start of a line still coming; over `limits.line` it is a `bad_response`."""
        self.buf += part
        if len(self.buf) > self.limits.line:
            raise BadResponse("bad_response", f"SSE line over {size_words(self.limits.line)}")
        return False

    def _lines(self, lines: list[bytes], now: float) -> None:
        """Each `data:` line's payload to `event`, until the answer is complete (the chat reader
        has its own, faster for its chunks)."""
        for line in lines:
            if line.startswith(b"data:") and not self.done:
                self.event(line[5:].strip(), now)

    def event(self, payload: bytes, now: float) -> None:  # pragma: no cover - an interface
        raise NotImplementedError

    def tick(self, now: float) -> None:
        """A chunk that carries a token."""
        if not self.n:
            self.first = now
        self.last = now
        self.n += 1

    def end(self, t0: float, end: float) -> None:  # pragma: no cover - an interface
        """The stream ended at `end`: the attempt's figures, or `stream_aborted` if it was cut."""
        raise NotImplementedError

    def timed(self, t0: float, end: float) -> None:
        """The attempt's latency, chunks, TTFT, ITL, TTFOT and reasoning count, from `t0` (sent)
        and `end` (its last byte)."""
        res = self.res
        n = self.n
        res.latency_ms = (end - t0) * 1000.0
        res.content_chunks = n
        if n:
            res.ttft_ms = (self.first - t0) * 1000.0
            if n > 1:
                res.itl_ms = (self.last - self.first) * 1000.0 / (n - 1)
            if not self.rn:
                res.ttfot_ms = res.ttft_ms
            else:
                res.reasoning_estimate = self.rn
                if self.t_answer:
                    res.ttfot_ms = (self.t_answer - t0) * 1000.0


def sse_object(payload: bytes, what: str) -> dict[str, Any]:
    """One event's data parsed: a JSON object, else `bad_response` naming `what` it was (a
    "chunk", an "event")."""
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise BadResponse("bad_response", f"malformed SSE {what}: {payload[:80]!r}") from None
    if not isinstance(obj, dict):
        raise BadResponse("bad_response", f"SSE {what} is not an object: {payload[:80]!r}")
    return obj


def error_event(err: Any) -> BadResponse:
    """A stream's `{"error": ...}` event as the attempt's `stream_error` (its message, or the
    value itself when it is not an object)."""
    msg = err.get("message") if isinstance(err, dict) else err
    return BadResponse("stream_error", f"error event in stream: {msg}")


class _Events(SseLines):
    """The server-sent events of one chat completion stream, fed one network read at a time (its
    lines as `SseLines` cuts them; the SSE grammar allows LF, CRLF and CR).

    Every data line is checked as JSON. The chunks of one stream usually differ only after
    `"choices":[` (same id, model, created): once a full parse has shown that the first chunk's
    bytes up to there are a top-level prefix carrying no usage and no error, a later line made of
    that prefix, one JSON value and `]}` is exactly that object with that value as its only
    choice, so only the choice is parsed. Anything else (usage, errors, [DONE], other shapes)
    takes the full parse.
    """

    __slots__ = (
        "calls",
        "cut",
        "error",
        "finished",
        "held",
        "held_n",
        "parts",
        "prefix",
        "rchars",
        "rparts",
        "state",
        "tail",
    )

    def __init__(self, res: AttemptResult, save_text: bool, limits: BodyLimits | None = None) -> None:
        super().__init__(res, limits or BodyLimits())
        self.finished = False
        self.parts: list[str] | None = [] if save_text else None
        self.prefix: bytes | None = None
        self.cut = 0  # len(prefix); -1 once learning it failed
        self.state = _START
        self.rchars = 0
        self.held = self.tail = ""
        self.held_n = 0
        self.calls: set[Any] | None = None
        self.rparts: list[str] | None = [] if save_text else None

    def _lines(self, lines: list[bytes], now: float) -> None:
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
            piece = delta.get("content")
            if not piece and self.side(delta, now):
                self.tick(now)
        else:  # a text completion's chunk carries "text" and no delta
            piece = c0.get("text") if delta is None else None
        if piece:
            if not self.n:
                self.first = now
            self.last = now
            self.n += 1
            if self.state:
                piece = self.content(piece, now)
            if self.parts is not None and isinstance(piece, str):
                self.parts.append(piece)
        if c0.get("finish_reason"):
            self.finished = True

    def side(self, delta: dict[str, Any], now: float) -> bool:
        """A delta without content: reasoning or tool calls (True: it carries a token)."""
        r = delta.get("reasoning_content") or delta.get("reasoning")
        if r:
            self.rn += 1
            self.rchars += len(r)
            if self.rparts is not None:
                self.rparts.append(r)
            return True
        calls = delta.get("tool_calls")
        if not calls:
            return False
        seen = self.calls
        if seen is None:
            seen = self.calls = set()
        for i, call in enumerate(calls):
            seen.add(call.get("index", i))
        if self.state:
            self.state = _PLAIN
            self.t_answer = now
        return True

    def content(self, piece: str, now: float) -> str:
        """Content while it may still be reasoning: the part of it that is answer."""
        st = self.state
        if st == _THINK:
            self.rn += 1
            return self.thinking(piece, now)
        if st == _AFTER:
            if not piece.strip():
                return ""
            self.state = _PLAIN
            self.t_answer = now
            return piece.lstrip()
        text = self.held + piece
        s = text.lstrip()
        if s.startswith(THINK_OPEN):
            self.state = _THINK
            self.rn += self.held_n + 1
            self.held = ""
            return self.thinking(s[len(THINK_OPEN) :], now)
        if (not s or THINK_OPEN.startswith(s)) and len(text) < HELD_MAX:
            self.held = text  # perhaps the start of a tag split across chunks
            self.held_n += 1
            return ""
        self.held = ""
        self.state = _PLAIN
        self.t_answer = now
        return text

    def thinking(self, s: str, now: float) -> str:
        """Text inside `<think>`: looks for `</think>` (split across chunks too); what follows it
        is answer."""
        text = self.tail + s
        i = text.find(THINK_CLOSE)
        if i < 0:
            self.rchars += len(s)
            self.tail = text[-_TAIL:]
            return ""
        self.rchars += max(0, i - len(self.tail))
        self.tail = ""
        self.state = _AFTER
        return self.content(text[i + len(THINK_CLOSE) :], now) if i + len(THINK_CLOSE) < len(text) else ""

    def event(self, line: bytes, now: float) -> None:
        payload = line[5:].strip()
        if payload == _DONE:
            self.done = True
            return
        if not payload:
            return
        obj = sse_object(payload, "chunk")
        choices = obj.get("choices")
        if choices:
            self.choice(choices[0], now)
            if self.cut == 0:
                self.learn(line, obj)
        elif "error" in obj:
            raise error_event(obj["error"])
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
        if not (self.done or self.finished):
            raise BadResponse(
                "stream_aborted", f"stream ended without finish_reason or [DONE] after {self.n} chunks"
            )
        self.timed(t0, end)
        if self.calls:
            res.tool_calls = len(self.calls)
        if self.parts is not None:
            if self.held and self.state == _START:
                self.parts.append(self.held)
            # the answer; an answer that is all reasoning (cut short, or a tool call) keeps that
            res.text = "".join(self.parts) or "".join(self.rparts or ())


class _Collected(Sink):
    """A whole body, kept as it arrives, up to `limit` bytes (`what` names it in the error)."""

    __slots__ = ("buf", "limit", "what")

    def __init__(self, limit: int, what: str) -> None:
        self.buf = bytearray()
        self.limit = limit
        self.what = what

    def feed(self, data: bytes, now: float) -> bool:
        buf = self.buf
        buf += data
        if len(buf) > self.limit:
            raise BadResponse("bad_response", f"{self.what} over {size_words(self.limit)}")
        return False


async def collect(resp: aiohttp.ClientResponse, limit: int, what: str) -> tuple[bytearray, float]:
    """A whole body within `limit` bytes, and when its last byte came; over it: `bad_response`
    (at once when the server's Content-Length says so, nothing read)."""
    length = resp.content_length
    if length is not None and length > limit:
        raise BadResponse("bad_response", f"{what} over {size_words(limit)} (Content-Length {length})")
    sink = _Collected(limit, what)
    end = await read_body(resp.content, sink)
    return sink.buf, end


async def read_events(
    resp: aiohttp.ClientResponse, ev: SseLines, t0: float, shapes: tuple[type[Exception], ...], what: str
) -> None:
    """A stream fed to `ev` to its end, then ended (`ev.end`): an error of `shapes` while reading
    it is an event of another shape than `ev` reads, a `bad_response` ("unexpected `what` shape")."""
    try:
        end = await read_body(resp.content, ev)
    except shapes as err:
        raise BadResponse("bad_response", f"unexpected {what} shape: {err}") from None
    ev.end(t0, end)


async def read_stream(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """A streamed answer, read to its `[DONE]` or its end."""
    shapes = (AttributeError, TypeError, IndexError, KeyError)
    await read_events(resp, _Events(res, save_text, limits), t0, shapes, "SSE chunk")


async def json_body(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, limits: BodyLimits
) -> tuple[bytearray, Any]:
    """A whole JSON answer, its latency taken when its last byte came; malformed: `bad_response`."""
    raw, end = await collect(resp, limits.body, "answer body")
    res.latency_ms = (end - t0) * 1000.0
    try:
        return raw, orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BadResponse("bad_response", f"malformed JSON body: {bytes(raw[:80])!r}") from None


async def json_answer(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, limits: BodyLimits, key: str
) -> dict[str, Any]:
    """A whole JSON answer that is an object with a list at `key` ("choices", "output"); any
    other body is a `bad_response`."""
    raw, obj = await json_body(resp, res, t0, limits)
    if not isinstance(obj, dict) or not isinstance(obj.get(key), list):
        raise BadResponse("bad_response", f"unexpected response body: {bytes(raw[:80])!r}")
    return obj


async def read_json(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """A chat or text completion answered with one JSON body."""
    obj = await json_answer(resp, res, t0, limits, "choices")
    _usage(obj, res)
    text = ""
    if obj["choices"]:
        c0 = obj["choices"][0]
        msg = c0.get("message") or {}
        text = msg.get("content") or c0.get("text") or ""
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if not isinstance(reasoning, str):
            reasoning = None
        if isinstance(text, str) and reasoning is None:
            text, reasoning = split_think(text)
        if reasoning:
            res.reasoning_estimate = text_estimate(reasoning)
        calls = msg.get("tool_calls")
        if isinstance(calls, list) and calls:
            res.tool_calls = len(calls)
    res.content_chunks = 1 if text or res.reasoning_estimate or res.tool_calls else 0
    if save_text:
        res.text = text if isinstance(text, str) else str(text)
        if not res.text and reasoning:
            res.text = reasoning
    # kept even beside usage: a usage not believed (`usage.py`) falls back to it
    est = text_estimate(text) if isinstance(text, str) else 0
    res.extra["estimated_output"] = est + (res.reasoning_estimate or 0)


async def read_embeddings(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """An embeddings answer: latency and input tokens (`usage.prompt_tokens`), no output tokens;
    with `save_text` its vectors as a JSON array (one per input) for `batch_output`."""
    raw, obj = await json_body(resp, res, t0, limits)
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise BadResponse("bad_response", f"unexpected embeddings body: {bytes(raw[:80])!r}")
    _usage(obj, res)
    res.output_tokens = 0
    if save_text:
        res.text = orjson.dumps([d.get("embedding") for d in data]).decode()
