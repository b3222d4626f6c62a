"""When the simulator's bytes leave: timed streams, one ticker per loop, and how late each write was.

Why this module exists: the simulator's timing is what benchmarks measure the client against
(docs/performance.md, "measurement truth"). Every content chunk is due at an absolute loop time
from admission (``t_admit + ttft + i/tps``), written by one `Ticker` per loop (a heap of due times,
one timer armed for the earliest) straight to the transport, and each timed write is recorded
against its schedule in `Lateness`. Nothing here does work per chunk beyond the write itself.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import itertools
import math
import time
from dataclasses import dataclass

from aiohttp import web

from oxconsole.metrics.histogram import LogHistogram
from oxconsole.sim.curve import slowdown
from oxconsole.sim.encoded import MALFORMED_CHUNK, SSE_HEADERS, json_response
from oxconsole.sim.state import ModelState


@dataclass(slots=True)
class Answer:
    """What one admitted request is answered with: read from its body and the fault draws."""

    n: int
    """Content tokens (the profile's output_tokens, capped by the request's max_tokens)."""
    finish: str
    """"stop", or "length" when max_tokens cut the answer."""
    prompt_tokens: int
    stream: bool
    include_usage: bool
    """A streamed answer ends with a usage chunk (the client asked and the profile sends usage)."""
    abort: bool
    """The stream stops about half-way and the connection drops (no finish, no [DONE])."""
    malformed: bool
    """One chunk (or the body) is not valid JSON."""
    pieces: tuple[str, ...] | None = None
    """A pack's answer, one token a piece (sim/packs.py); None = the usual filler words."""
    reasoning: int = 0
    """Reasoning tokens streamed before the `n` answer tokens (counted in completion tokens)."""
    field: str = "reasoning_content"
    """Where the reasoning goes (`SimModelProfile.reasoning_field`)."""
    cached: int | None = None
    """Prompt tokens found in the prefix cache; None = the model has no prefix cache."""
    written: int = 0
    """Prompt tokens the prefix cache remembered afresh for this request."""
    prefill: float = 0.0
    """Seconds of prefill (uncached prompt tokens / prefill_tokens_per_s) added to ttft."""
    queued: float = 0.0
    """Seconds it waited for a slot (its TTFT on `/metrics` counts from its arrival at the gate)."""

    @property
    def faulty(self) -> bool:
        return self.abort or self.malformed

    @property
    def total(self) -> int:
        """Streamed tokens: the reasoning and the answer."""
        return self.reasoning + self.n


@dataclass(slots=True)
class Wire:
    """The bytes of one streamed answer, whatever its API: each chunk is `head` + its token's entry
    in `tokens` (indexed modulo its length), `first` leaves with the headers (b"" = nothing) and
    `tail` follows the last token."""

    head: bytes
    tokens: tuple[bytes, ...]
    first: bytes
    tail: bytes


def _offset() -> float:
    """`time.time()` less `time.monotonic()` now: the least of a few readings (a reading
    interrupted between the two clocks only adds)."""
    return min(-time.monotonic() + time.time() for _ in range(3))  # monotonic first, then wall


OFFSET_TTL_S = 1.0
"""How long one reading of the wall clock's offset is used: a wall clock stepped meanwhile (NTP, a
virtual machine's clock catching up) moves the trace's times no later than this after."""

_offset_at = [-OFFSET_TTL_S, 0.0]
"""When (monotonic) the offset was read, and the offset."""


def wall_offset(now: float) -> float:
    """What turns this process's `time.monotonic` readings into wall-clock time (`time.time`) at
    `now` (monotonic). A trace entry's times are monotonic readings, the ones its lateness uses (so
    they agree with it exactly, where reading `time.time()` afresh could be milliseconds later on a
    busy machine), all turned by the one offset of the moment it is written: their order is theirs
    whatever the wall clock does, and the offset is read again every `OFFSET_TTL_S`, so they agree
    with a client's `time.time()` a second after a step of the wall clock (a test run saw 0.38 s)."""
    if now - _offset_at[0] >= OFFSET_TTL_S:
        _offset_at[0], _offset_at[1] = now, _offset()
    return _offset_at[1]


class Lateness:
    """How late the simulator's timed writes leave, against their schedule (``t_admit + ttft + i/tps``).

    Measured with `time.monotonic` (the clock of asyncio's loop and, at millisecond resolution, of
    uvloop's) just before each write: `first` is the write carrying the first content token (what
    TTFT measures), `last` the final write (what latency measures), `write` every timed write.
    `gc` holds the process's garbage-collector pauses once `watch_gc()` is called.
    """

    __slots__ = ("_gc_t", "first", "gc", "last", "write")

    def __init__(self) -> None:
        self.first = LogHistogram()
        self.last = LogHistogram()
        self.write = LogHistogram()
        self.gc = LogHistogram()
        self._gc_t = 0.0

    def wrote(self, due: float, first: bool, last: bool, last_due: float = 0.0) -> float:
        """Record a write due at `due` leaving now; returns now (`time.monotonic`), so that a trace
        can say when the write left by the very reading its lateness was measured with."""
        now = time.monotonic()
        ms = (now - due) * 1000.0
        self.write.record(ms if ms > 0.0 else 0.0)
        if first:
            self.first.record(ms if ms > 0.0 else 0.0)
        if last:
            ms = (now - last_due) * 1000.0
            self.last.record(ms if ms > 0.0 else 0.0)
        return now

    def watch_gc(self) -> None:
        """Time every garbage collection of this process (for a simulator in its own process)."""
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t = time.perf_counter()
        else:
            self.gc.record((time.perf_counter() - self._gc_t) * 1000.0)

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for name in ("first", "last", "write", "gc"):
            h: LogHistogram = getattr(self, name)
            s = h.summary()
            out[name] = {"n": h.count, "p50": s["p50"], "p99": s["p99"], "max": s["max"]}
        out["gc"]["total"] = round(self.gc.total, 3)
        return out


class _TimedStream:
    """One open stream's timed content chunks, written by the `Ticker` as they fall due."""

    __slots__ = (
        "bad_at",
        "dead",
        "done",
        "end",
        "first_at",
        "head",
        "i",
        "late",
        "times",
        "tokens",
        "transport",
    )

    def __init__(
        self,
        times: list[float],
        head: bytes,
        tokens: tuple[bytes, ...],
        end: int,
        bad_at: int,
        transport: asyncio.Transport | None,
        done: asyncio.Future[None],
        late: Lateness,
    ) -> None:
        self.times = times
        self.head = head
        self.tokens = tokens
        """Each token chunk's entry after the head (`Wire.tokens`)."""
        self.end = end
        """Chunks [0, end) are content; the handler writes the last due ones with the tail."""
        self.bad_at = bad_at
        self.transport = transport
        self.done = done
        self.late = late
        self.i = 0
        """The next chunk not yet written."""
        self.dead = False
        """The handler is gone (finished or cancelled): forget this stream."""
        self.first_at = 0.0
        """When (`time.monotonic`) the write carrying the first content token left (for the trace)."""

    def write(self, i: int, j: int, now: float) -> None:
        """Write chunks [i, j) as one HTTP chunk straight to the transport (the response's
        headers are already out and aiohttp's writer holds nothing back)."""
        head = self.head
        tokens = self.tokens
        k = len(tokens)
        bad = self.bad_at
        data = b"".join(MALFORMED_CHUNK if c == bad else head + tokens[c % k] for c in range(i, j))
        now = self.late.wrote(self.times[i], i == 0, False)
        if i == 0:
            self.first_at = now
        assert self.transport is not None
        self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        self.i = j

    def due(self, now: float) -> float | None:
        """Write what is due at loop time `now`; the next due time, or None when this stream is done
        with the ticker (its last chunk is due: the handler writes it with the tail)."""
        times = self.times
        j = self.i
        end = self.end
        while j < end and times[j] <= now:
            j += 1
        if j >= end:
            if not self.done.done():
                self.done.set_result(None)
            return None
        if j > self.i:
            tr = self.transport
            if tr is None or tr.is_closing():
                if not self.done.done():
                    self.done.set_exception(ConnectionResetError("client went away"))
                return None
            self.write(self.i, j, now)
        return times[j]


class Ticker:
    """One timer for every open stream on a loop, instead of a timer and a task wake-up per token.

    A heap holds each stream's next due time; one `call_at` is armed for the earliest. When it fires,
    every stream with chunks due writes them (all its due chunks in one write) and goes back on the
    heap at its next due time. Times are absolute loop times, as before, so with jitter 0 a chunk
    leaves when its schedule says (to the loop clock's resolution) and errors never accumulate.
    """

    __slots__ = ("_seq", "armed", "handle", "heap", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[float, int, _TimedStream]] = []
        self.handle: asyncio.TimerHandle | None = None
        self.armed = math.inf
        self._seq = itertools.count()

    def add(self, st: _TimedStream) -> None:
        """Start timing a stream: it is due at its first chunk's time."""
        self._push(st.times[st.i], st)

    def _push(self, when: float, st: _TimedStream) -> None:
        heapq.heappush(self.heap, (when, next(self._seq), st))
        if when < self.armed:
            if self.handle is not None:
                self.handle.cancel()
            self.armed = when
            self.handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self.handle = None
        self.armed = math.inf
        heap = self.heap
        now = self.loop.time()
        pop, push, seq = heapq.heappop, heapq.heappush, self._seq
        while heap and heap[0][0] <= now:
            st = pop(heap)[2]
            if st.dead:
                continue
            nxt = st.due(now)
            if nxt is not None:
                push(heap, (nxt, next(seq), st))
        if heap:
            self.armed = heap[0][0]
            self.handle = self.loop.call_at(self.armed, self._fire)


def schedule(ms: ModelState, t_admit: float, n: int, prefill: float = 0.0) -> list[float]:
    """Absolute loop times of the n streamed tokens (jitter applied per ttft and per gap), the first
    `prefill` seconds later than ttft, slowed by the model's load curve for the batch it joins at
    admission (`curve`; none without a knee)."""
    prof = ms.profile
    if prof.knee > 0.0:
        slow = slowdown(ms.batch.join(t_admit), prof.knee, prof.knee_power)
        times = _schedule(ms, t_admit, n, slow, prefill)
        ms.batch.until(times[-1] if times else t_admit)
        return times
    return _schedule(ms, t_admit, n, 1.0, prefill)


def _schedule(ms: ModelState, t_admit: float, n: int, slow: float, prefill: float) -> list[float]:
    prof = ms.profile
    t_first = t_admit + (prof.ttft + prefill) * slow * ms.factor()
    if prof.tokens_per_s <= 0.0:
        return [t_first] * n
    gap = slow / prof.tokens_per_s
    if prof.jitter <= 0.0:
        return [t_first + i * gap for i in range(n)]
    times = [t_first]
    t = t_first
    for _ in range(n - 1):
        t += gap * ms.factor()
        times.append(t)
    return times


Trace = list[tuple[str, float, float, float, float]]
"""Per streamed request: the last message's text and the wall times the handler started, admitted
it, wrote the first token and the end."""


class Writer:
    """Writes one simulator's timed answers: streams through the loop's `Ticker`, whole bodies after
    sleeping until their last token is due; each timed write is recorded in `lateness`, and, when
    `trace` is a list, each stream's wall times are appended to it."""

    __slots__ = ("_ticker", "lateness", "trace")

    def __init__(self, lateness: Lateness, trace: Trace | None) -> None:
        self.lateness = lateness
        self.trace = trace
        self._ticker: Ticker | None = None

    def _ticker_for(self, loop: asyncio.AbstractEventLoop) -> Ticker:
        t = self._ticker
        if t is None or t.loop is not loop:
            t = self._ticker = Ticker(loop)
        return t

    async def stream(
        self,
        request: web.Request,
        ms: ModelState,
        t_admit: float,
        ans: Answer,
        wire: Wire,
        traced: tuple[float, float, str] | None = None,
    ) -> web.StreamResponse:
        """A streamed answer: headers (and `wire.first`: chat's role chunk) at once, token chunks as
        they fall due, the last ones with the tail (finish, usage, [DONE]) in one final write."""
        loop = asyncio.get_running_loop()
        n = ans.total
        times = schedule(ms, t_admit, n, ans.prefill)
        ms.served.first_token(ans.queued + times[0] - t_admit)
        head = wire.head
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)  # a StreamResponse sends its headers at once
        if wire.first:
            await resp.write(wire.first)  # with the headers: chat's role chunk, Responses' created
        tokens = wire.tokens
        stop_at = n // 2 if ans.abort else n  # abort: about half the tokens, then the connection drops
        bad_at = n // 2 if ans.malformed else -1
        # The content chunks that leave before the last one are written by the loop's ticker, as
        # they fall due; this coroutine wakes again when the last one is due (or the stream ends).
        ts = _TimedStream(
            times, head, tokens, stop_at, bad_at, request.transport, loop.create_future(), self.lateness
        )
        if stop_at > 0:
            self._ticker_for(loop).add(ts)
            try:
                await ts.done
            finally:
                ts.dead = True
        if ans.abort:
            if ts.i < stop_at:
                ts.write(ts.i, stop_at, time.monotonic())
            if request.transport is not None:
                request.transport.close()  # buffered chunks are flushed first; no finish, no [DONE]
            return resp
        i = ts.i
        k = len(tokens)
        pending = [MALFORMED_CHUNK if j == bad_at else head + tokens[j % k] for j in range(i, n)]
        pending.append(wire.tail)
        now = self.lateness.wrote(times[i], i == 0, True, times[-1]) if n else time.monotonic()
        if traced and self.trace is not None:
            off = wall_offset(now)
            t_in, t_admit, key = traced
            self.trace.append((key, t_in + off, t_admit + off, (ts.first_at or now) + off, now + off))
        await resp.write_eof(b"".join(pending))
        return resp

    async def complete(
        self, request: web.Request, ms: ModelState, t_admit: float, ans: Answer, body: bytes
    ) -> web.StreamResponse:
        """A whole (non-streamed) answer, `body`, sent when its last token is due."""
        loop = asyncio.get_running_loop()
        times = schedule(ms, t_admit, ans.total, ans.prefill)
        ms.served.first_token(ans.queued + times[0] - t_admit)
        await sleep_until(loop, times[-1])
        if ans.malformed:
            return json_response(200, body[: len(body) // 2])
        if ans.abort:
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            if request.transport is not None:
                request.transport.close()
            return resp
        return json_response(200, body)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def sleep_until(loop: asyncio.AbstractEventLoop, when: float) -> None:
    """Sleep until the absolute loop time `when` (no drift from accumulated relative sleeps)."""
    if when <= loop.time():
        return
    fut: asyncio.Future[None] = loop.create_future()
    handle = loop.call_at(when, _wake, fut)
    try:
        await fut
    finally:
        handle.cancel()
