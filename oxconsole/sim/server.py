"""The embedded OpenAI-compatible simulator: an aiohttp app with per-model latency and fault profiles.

Why this module exists: load tests, the engine's own tests and client benchmarks need a server whose
behaviour is known exactly — when the first token leaves, how fast tokens follow, how many requests
are served at once, which requests fail and how. Real endpoints give none of that, so this module
serves `/v1/chat/completions` (and the legacy text `/v1/completions`, same profiles, faults and
timing, for clients such as vLLM's ``bench serve``) from a `SimModelProfile` per model:

* timing is scheduled against absolute loop times from admission (``t_admit + ttft + i/tps``), so with
  ``jitter = 0`` latency is exactly ``ttft + (n - 1)/tokens_per_s`` and timer error never accumulates;
* at most ``capacity`` requests per model are in service; the rest wait in a FIFO queue;
* faults (500, 429, rate limits, resets, aborted or malformed streams, stalls) are drawn from a seeded
  RNG per model, so a run is reproducible;
* with ``ttft = 0`` and ``tokens_per_s = 0`` the whole response is built from pre-encoded pieces and
  sent in one write, so the server costs as little as possible when benchmarking clients;
* the timed chunks of every open stream are written by one ticker per event loop (a heap of due
  times, one timer armed for the earliest), not by a timer and a task wake-up per token, so ~1,000
  open streams at 10 tokens/s cost the simulator little more than its `send` calls;
* counters per model are served at ``GET /sim/stats`` so tests can check what the client did, with
  the simulator's own lateness (each timed write against its schedule) and GC pauses, so a
  benchmark can tell the server's error from the client's.

The Authorization header is accepted whatever it holds (or without one) and never logged; the access
log is off.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import heapq
import ipaddress
import itertools
import math
import os
import random
import time
from collections import deque
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Final

import orjson
from aiohttp import web

from oxconsole.gcpace import PacedGC
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.workload import SimModelProfile

__all__ = [
    "SIM_STATE",
    "ModelStats",
    "SimState",
    "build_app",
    "is_loopback",
    "start_sim",
]

# ---------------------------------------------------------------------------------------------------
# Pre-encoded pieces of the wire format.

_WORDS: Final = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "hex",
    "jolly",
    "boxing",
    "frogs",
    "and",
    "many",
    "small",
    "engines",
    "hum",
    "along",
    "the",
    "river",
    "under",
    "pale",
    "amber",
    "light",
    "as",
    "distant",
    "bells",
    "ring",
    "softly",
    "through",
    "cold",
    "morning",
    "air",
    "near",
    "old",
    "stone",
    "bridges",
)
_TOKEN_TEXT: Final = tuple(w + " " for w in _WORDS)
_HEAD: Final = b'data: {"id":"'


class _Kind:
    """What differs between the two wire formats served: chat (``/v1/chat/completions``) and legacy
    text completions (``/v1/completions``). One handler body, `_stream`, `_complete` and the
    template cache serve both; they take the kind and read its pre-encoded pieces, so neither format
    does per-chunk work on the other's behalf."""

    __slots__ = ("chat", "finish_choice", "id_prefix", "object", "role_choice", "slot_mid", "token_choice")

    def __init__(
        self,
        *,
        chat: bool,
        id_prefix: bytes,
        object_: str,
        chunk_object: str,
        token_choice: tuple[bytes, ...],
        role_choice: bytes,
        finish_choice: dict[str, bytes],
    ) -> None:
        self.chat = chat
        self.id_prefix = id_prefix
        """`b"chatcmpl-sim"` / `b"cmpl-sim"`, followed by a hex counter."""
        self.object = object_
        """The non-streamed body's "object"."""
        self.slot_mid = b'","object":' + orjson.dumps(chunk_object) + b',"created":'
        """Between the id and the created time in every streamed chunk."""
        self.token_choice = token_choice
        """The choice (closing the chunk) carrying each token of `_TOKEN_TEXT`."""
        self.role_choice = role_choice
        """The choice of the chunk sent at admission, before the first token: chat's role-only
        delta; b"" (no such chunk) for text completions."""
        self.finish_choice = finish_choice
        """The last choice, by finish reason."""


_CHAT: Final = _Kind(
    chat=True,
    id_prefix=b"chatcmpl-sim",
    object_="chat.completion",
    chunk_object="chat.completion.chunk",
    token_choice=tuple(
        b'{"index":0,"delta":{"content":' + orjson.dumps(t) + b'},"finish_reason":null}]}\n\n'
        for t in _TOKEN_TEXT
    ),
    role_choice=b'{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
    finish_choice={
        "stop": b'{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        "length": b'{"index":0,"delta":{},"finish_reason":"length"}]}\n\n',
    },
)
# Shaped as OpenAI's and vLLM's text-completion chunks: "text" and "logprobs" in every choice, no role.
_TEXT: Final = _Kind(
    chat=False,
    id_prefix=b"cmpl-sim",
    object_="text_completion",
    chunk_object="text_completion",
    token_choice=tuple(
        b'{"index":0,"text":' + orjson.dumps(t) + b',"logprobs":null,"finish_reason":null}]}\n\n'
        for t in _TOKEN_TEXT
    ),
    role_choice=b"",
    finish_choice={
        "stop": b'{"index":0,"text":"","logprobs":null,"finish_reason":"stop"}]}\n\n',
        "length": b'{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]}\n\n',
    },
)
_DONE: Final = b"data: [DONE]\n\n"
_MALFORMED_CHUNK: Final = b'data: {"choices": [\n\n'
_SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
}
_MAX_MODEL_STATES: Final = 4096
_OTHER_MODELS: Final = "<other>"
_TEMPLATE_CACHE_SIZE: Final = 256


@lru_cache(maxsize=1024)
def _text(n: int) -> str:
    """The deterministic response text of `n` tokens."""
    k = len(_TOKEN_TEXT)
    return "".join(_TOKEN_TEXT[i % k] for i in range(n))


def _usage_tail(prompt_tokens: int, completion_tokens: int) -> bytes:
    return b'],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n' % (
        prompt_tokens,
        completion_tokens,
        prompt_tokens + completion_tokens,
    )


def _fmt_seconds(seconds: float) -> str:
    """Retry-After value: whole seconds when whole, else up to millisecond precision."""
    if seconds == int(seconds):
        return str(int(seconds))
    return f"{seconds:.3f}".rstrip("0").rstrip(".")


def _error_body(message: str, type_: str, code: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def _json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


# ---------------------------------------------------------------------------------------------------
# Per-model state: counters, FIFO admission gate, rate bucket, seeded RNG.


@dataclass(slots=True)
class ModelStats:
    """Counters for one model, as served by ``GET /sim/stats``."""

    received: int = 0
    """Requests that named this model (including those refused)."""
    admitted: int = 0
    """Requests given a capacity slot."""
    in_service: int = 0
    """Requests holding a slot now."""
    queued: int = 0
    """Requests waiting for a slot now."""
    max_concurrent: int = 0
    """Highest `in_service` seen (never above the profile's capacity)."""
    completed: int = 0
    """Responses sent whole and well-formed."""
    http_429: int = 0
    """Rate-limited (rate_limit) plus throttled (throttle_rate) answers."""
    http_500: int = 0
    faults: int = 0
    """All injected faults: 429s, 500s, resets, aborts, malformed responses, stalls."""
    disconnected: int = 0
    """Responses cut short because the client went away."""
    reset: int = 0
    abort: int = 0
    malformed: int = 0
    stall: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class _ModelState:
    """Everything the simulator keeps for one model name."""

    __slots__ = (
        "_bucket_t",
        "_bucket_tokens",
        "_waiters",
        "arrival_faults",
        "capacity",
        "model_json",
        "name",
        "profile",
        "rng",
        "stats",
        "stream_faults",
        "templates",
        "zero_latency",
    )

    def __init__(self, name: str, profile: SimModelProfile, seed: int) -> None:
        self.name = name
        self.profile = profile
        self.capacity = max(1, int(profile.capacity))
        self.arrival_faults = (
            profile.rate_limit > 0
            or profile.stall_rate > 0
            or profile.throttle_rate > 0
            or profile.error_rate > 0
            or profile.reset_rate > 0
        )
        self.stream_faults = profile.abort_rate > 0 or profile.malformed_rate > 0
        self.zero_latency = profile.ttft <= 0 and profile.tokens_per_s <= 0
        self.model_json = orjson.dumps(name)
        # A string seed is hashed deterministically (sha512), unlike hash(str).
        self.rng = random.Random(f"{seed}:{name}")
        self.stats = ModelStats()
        self._waiters: deque[asyncio.Future[float]] = deque()
        self._bucket_tokens = max(1.0, profile.rate_limit)
        self._bucket_t = -math.inf
        self.templates: dict[tuple[int, str, _Kind], list[bytes]] = {}

    # -- admission (FIFO; a released slot is handed straight to the next waiter) ------------------

    def try_acquire(self) -> bool:
        st = self.stats
        if st.in_service < self.capacity and not self._waiters:
            st.in_service += 1
            st.admitted += 1
            if st.in_service > st.max_concurrent:
                st.max_concurrent = st.in_service
            return True
        return False

    async def acquire(self, loop: asyncio.AbstractEventLoop) -> float:
        """Wait for a slot; returns the loop time at which the slot was granted."""
        if self.try_acquire():
            return loop.time()
        fut: asyncio.Future[float] = loop.create_future()
        self._waiters.append(fut)
        self.stats.queued += 1
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(loop)  # granted just before the cancellation landed: pass it on
            else:
                self.stats.queued -= 1
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def release(self, loop: asyncio.AbstractEventLoop) -> None:
        st = self.stats
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                st.queued -= 1
                st.admitted += 1  # in_service unchanged: the slot moves to the waiter
                fut.set_result(loop.time())
                return
        st.in_service -= 1

    # -- rate limit (token bucket: rate_limit per second, capacity max(1, rate_limit)) -----------

    def take_rate_token(self, now: float) -> float:
        """0.0 when the request may pass, else the seconds until the bucket has a token again."""
        rate = self.profile.rate_limit
        cap = max(1.0, rate)
        tokens = min(cap, self._bucket_tokens + (now - self._bucket_t) * rate)
        self._bucket_t = now
        if tokens >= 1.0:
            self._bucket_tokens = tokens - 1.0
            return 0.0
        self._bucket_tokens = tokens
        return (1.0 - tokens) / rate

    def chance(self, rate: float) -> bool:
        """True for a fraction `rate` of calls; draws from the RNG only when 0 < rate < 1."""
        if rate <= 0.0:
            return False
        if rate >= 1.0:
            return True
        return self.rng.random() < rate

    def factor(self) -> float:
        j = min(max(self.profile.jitter, 0.0), 1.0)
        if j == 0.0:
            return 1.0
        return self.rng.uniform(1.0 - j, 1.0 + j)

    def template(self, n: int, finish: str, kind: _Kind) -> list[bytes]:
        """Segments of the streamed body (role if the kind has one, n tokens, finish) to be joined
        with the id slot (which carries the kind's object name)."""
        key = (n, finish, kind)
        segs = self.templates.get(key)
        if segs is None:
            if len(self.templates) >= _TEMPLATE_CACHE_SIZE:
                self.templates.clear()
            mid = b',"model":' + self.model_json + b',"choices":['
            tokens = kind.token_choice
            k = len(tokens)
            choices = [kind.role_choice] if kind.role_choice else []
            choices += (tokens[i % k] for i in range(n))
            choices.append(kind.finish_choice[finish])
            segs = [_HEAD]
            for c in choices[:-1]:
                segs.append(mid + c + _HEAD)
            segs.append(mid + choices[-1])
            self.templates[key] = segs
        return segs


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

    def wrote(self, due: float, first: bool, last: bool, last_due: float = 0.0) -> None:
        now = time.monotonic()
        ms = (now - due) * 1000.0
        self.write.record(ms if ms > 0.0 else 0.0)
        if first:
            self.first.record(ms if ms > 0.0 else 0.0)
        if last:
            ms = (now - last_due) * 1000.0
            self.last.record(ms if ms > 0.0 else 0.0)

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
    """One open stream's timed content chunks, written by the `_Ticker` as they fall due."""

    __slots__ = (
        "bad_at",
        "dead",
        "done",
        "end",
        "first_wall",
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
        """The kind's token choices (`_Kind.token_choice`)."""
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
        self.first_wall = 0.0
        """Wall time of the write carrying the first content token (for the trace)."""

    def write(self, i: int, j: int, now: float) -> None:
        """Write chunks [i, j) as one HTTP chunk straight to the transport (the response's
        headers are already out and aiohttp's writer holds nothing back)."""
        head = self.head
        tokens = self.tokens
        k = len(tokens)
        bad = self.bad_at
        data = b"".join(_MALFORMED_CHUNK if c == bad else head + tokens[c % k] for c in range(i, j))
        self.late.wrote(self.times[i], i == 0, False)
        if i == 0:
            self.first_wall = time.time()
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


class _Ticker:
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


class SimState:
    """The simulator behind one app: profiles, per-model state and the request handlers."""

    def __init__(
        self, profiles: dict[str, SimModelProfile], default: SimModelProfile | None, seed: int
    ) -> None:
        self.profiles = dict(profiles)
        self.default = default if default is not None else SimModelProfile()
        self.seed = seed
        self.models: dict[str, _ModelState] = {
            name: _ModelState(name, p, seed) for name, p in self.profiles.items()
        }
        self._ids = itertools.count(1)
        self.bad_requests = 0
        self.lateness = Lateness()
        self.gc: PacedGC | None = None
        """The garbage collector's pacing, in a simulator running as its own process."""
        self._ticker: _Ticker | None = None
        self.trace: list[tuple[str, float, float, float, float]] | None = (
            [] if os.environ.get("OXCONSOLE_SIM_TRACE") else None
        )
        """Per streamed request, when `OXCONSOLE_SIM_TRACE` is set (benchmarks): the last message's
        text and the wall times the handler started, admitted it, wrote the first token and the
        end, served at `/sim/trace`, so a client's timings can be split into its own part and ours."""
        """How late the simulator's own timed writes were (so a benchmark can tell server error
        from client error)."""

    def state_for(self, name: str) -> _ModelState:
        st = self.models.get(name)
        if st is None:
            if len(self.models) >= _MAX_MODEL_STATES:
                name = _OTHER_MODELS
                st = self.models.get(name)
                if st is not None:
                    return st
            st = _ModelState(name, self.default, self.seed)
            self.models[name] = st
        return st

    def stats(self) -> dict[str, Any]:
        return {
            "models": {name: st.stats.to_dict() for name, st in self.models.items()},
            "bad_requests": self.bad_requests,
            "lateness_ms": self.lateness.to_dict(),
            **(
                {"gc_pacing": {"collections": self.gc.collections, "pause_ms": round(self.gc.pause_ms, 3)}}
                if self.gc is not None
                else {}
            ),
        }

    # -- handlers --------------------------------------------------------------------------------

    async def handle_health(self, request: web.Request) -> web.Response:
        return _json_response(200, b'{"status":"ok"}')

    async def handle_stats(self, request: web.Request) -> web.Response:
        return _json_response(200, orjson.dumps(self.stats()))

    async def handle_trace(self, request: web.Request) -> web.Response:
        return _json_response(200, orjson.dumps(self.trace or []))

    async def handle_models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "oxconsole-sim"}
            for name in self.profiles
        ]
        return _json_response(200, orjson.dumps({"object": "list", "data": data}))

    async def handle_model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: any name is served (unknown ones with the default profile)."""
        name = request.match_info["model"]
        owner = "oxconsole-sim" if name in self.profiles else "oxconsole-sim (default profile)"
        body = {"id": name, "object": "model", "created": int(time.time()), "owned_by": owner}
        return _json_response(200, orjson.dumps(body))

    async def handle_chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._handle(request, _CHAT)

    async def handle_completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions`` (legacy text completions, as vLLM's ``bench serve --backend
        openai``, guidellm's text_completions and the SDK's ``completions.create`` send them)."""
        return await self._handle(request, _TEXT)

    async def _handle(self, request: web.Request, kind: _Kind) -> web.StreamResponse:
        """One request of either kind: the same model lookup, faults, admission and timing."""
        t_in = time.time() if self.trace is not None else 0.0
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            self.bad_requests += 1
            return _json_response(
                400, _error_body("request body is not valid JSON", "invalid_request_error", None)
            )
        if not isinstance(body, dict):
            self.bad_requests += 1
            return _json_response(
                400, _error_body("request body must be a JSON object", "invalid_request_error", None)
            )
        prompt: tuple[int, str] | None = None  # (prompt tokens, trace text) of a text completion
        if not kind.chat:
            prompt = _completion_prompt(body.get("prompt"))
            if prompt is None:
                self.bad_requests += 1
                return _json_response(400, _error_body(_BAD_PROMPT, "invalid_request_error", None))
        model = body.get("model")
        ms = self.state_for(model if isinstance(model, str) else "")
        prof = ms.profile
        stats = ms.stats
        stats.received += 1
        loop = asyncio.get_running_loop()
        if ms.arrival_faults:
            refused = await self._arrival_faults(request, ms, loop)
            if refused is not None:
                return refused

        # -- the request proper ----------------------------------------------------------------
        max_tokens = body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        n = prof.output_tokens
        finish = "stop"
        if type(max_tokens) is int and max_tokens < n:
            n = max(1, max_tokens)
            finish = "length"
        if prompt is None:
            prompt_tokens = (_content_chars(body.get("messages")) + 3) // 4
        else:
            prompt_tokens = prompt[0]
        stream = body.get("stream") is True
        opts = body.get("stream_options")
        include_usage = prof.usage and stream and isinstance(opts, dict) and opts.get("include_usage") is True
        abort = malformed = False
        if ms.stream_faults:
            abort = ms.chance(prof.abort_rate)
            malformed = not abort and ms.chance(prof.malformed_rate)
            if abort:
                stats.abort += 1
                stats.faults += 1
            elif malformed:
                stats.malformed += 1
                stats.faults += 1

        t_admit = loop.time() if ms.try_acquire() else await ms.acquire(loop)
        traced = None
        if t_in:
            text = _last_text(body.get("messages")) if prompt is None else prompt[1]
            traced = (t_in, time.time(), text)
        try:
            rid = kind.id_prefix + b"%x" % next(self._ids)
            created = int(time.time())
            if stream:
                slot = rid + kind.slot_mid + b"%d" % created
                if ms.zero_latency and not (abort or malformed):
                    parts = [slot.join(ms.template(n, finish, kind))]
                    if include_usage:
                        parts += (_HEAD, slot, b',"model":', ms.model_json, b',"choices":[')
                        parts.append(_usage_tail(prompt_tokens, n))
                    parts.append(_DONE)
                    stats.completed += 1
                    return web.Response(body=b"".join(parts), headers=_SSE_HEADERS)
                resp = await self._stream(
                    request,
                    ms,
                    kind,
                    t_admit,
                    slot,
                    n,
                    finish,
                    prompt_tokens,
                    include_usage,
                    abort,
                    malformed,
                    traced,
                )
            else:
                resp = await self._complete(
                    request, ms, kind, t_admit, rid, created, n, finish, prompt_tokens, abort, malformed
                )
            if not (abort or malformed):
                stats.completed += 1
            return resp
        except ConnectionError:
            # The client went away mid-response (a write hit the closing transport). Nothing can be
            # sent; returning quietly keeps aiohttp from logging it as a server error.
            stats.disconnected += 1
            if self.gc is not None:
                self.gc.failures += 1  # an exception's traceback: cycles for the collector
            return web.Response(status=499)
        except asyncio.CancelledError:
            if self.gc is not None:
                self.gc.failures += 1
            raise
        finally:
            ms.release(loop)

    async def _arrival_faults(
        self, request: web.Request, ms: _ModelState, loop: asyncio.AbstractEventLoop
    ) -> web.StreamResponse | None:
        """Rate limit, stall, throttle, 500 and reset; None when the request goes on to be served."""
        prof = ms.profile
        stats = ms.stats
        if prof.rate_limit > 0.0:
            wait = ms.take_rate_token(loop.time())
            if wait > 0.0:
                return self._too_many(ms, max(wait, 0.001), "rate limit reached (simulated)")
        stall = ms.chance(prof.stall_rate)
        throttle = ms.chance(prof.throttle_rate)
        error = not throttle and ms.chance(prof.error_rate)
        reset = not (throttle or error) and ms.chance(prof.reset_rate)
        if stall:
            stats.stall += 1
            stats.faults += 1
            await asyncio.sleep(prof.stall)  # before any header, and without holding a capacity slot
        if throttle:
            return self._too_many(ms, prof.retry_after, "too many requests (simulated throttle)")
        if error:
            stats.http_500 += 1
            stats.faults += 1
            return _json_response(500, _error_body("simulated server error", "server_error", None))
        if reset:
            stats.reset += 1
            stats.faults += 1
            if request.transport is not None:
                request.transport.close()
            # Whatever is returned cannot be written: aiohttp sees the closed transport and drops it.
            return web.Response(status=500)
        return None

    def _too_many(self, ms: _ModelState, retry_after: float, message: str) -> web.Response:
        ms.stats.http_429 += 1
        ms.stats.faults += 1
        headers = {
            "Retry-After": _fmt_seconds(retry_after),
            "retry-after-ms": str(max(0, math.ceil(retry_after * 1000))),
        }
        return _json_response(429, _error_body(message, "requests", "rate_limit_exceeded"), headers)

    def _schedule(self, ms: _ModelState, t_admit: float, n: int) -> list[float]:
        """Absolute loop times of the n content tokens (jitter applied per ttft and per gap)."""
        prof = ms.profile
        t_first = t_admit + prof.ttft * ms.factor()
        if prof.tokens_per_s <= 0.0:
            return [t_first] * n
        gap = 1.0 / prof.tokens_per_s
        if prof.jitter <= 0.0:
            return [t_first + i * gap for i in range(n)]
        times = [t_first]
        t = t_first
        for _ in range(n - 1):
            t += gap * ms.factor()
            times.append(t)
        return times

    async def _stream(
        self,
        request: web.Request,
        ms: _ModelState,
        kind: _Kind,
        t_admit: float,
        slot: bytes,
        n: int,
        finish: str,
        prompt_tokens: int,
        include_usage: bool,
        abort: bool,
        malformed: bool,
        traced: tuple[float, float, str] | None = None,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        times = self._schedule(ms, t_admit, n)
        head = _HEAD + slot + b',"model":' + ms.model_json + b',"choices":['
        resp = web.StreamResponse(headers=_SSE_HEADERS)
        await resp.prepare(request)  # a StreamResponse sends its headers at once
        if kind.role_choice:
            await resp.write(head + kind.role_choice)  # with the headers: chat's role chunk
        tokens = kind.token_choice
        stop_at = n // 2 if abort else n  # abort: about half the tokens, then the connection drops
        bad_at = n // 2 if malformed else -1
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
        if abort:
            if ts.i < stop_at:
                ts.write(ts.i, stop_at, time.monotonic())
            if request.transport is not None:
                request.transport.close()  # buffered chunks are flushed first; no finish, no [DONE]
            return resp
        i = ts.i
        k = len(tokens)
        pending = [_MALFORMED_CHUNK if j == bad_at else head + tokens[j % k] for j in range(i, n)]
        pending.append(head + kind.finish_choice[finish])
        if include_usage:
            pending.append(_HEAD + slot + b',"model":' + ms.model_json + b',"choices":[')
            pending.append(_usage_tail(prompt_tokens, n))
        pending.append(_DONE)
        if n:
            self.lateness.wrote(times[i], i == 0, True, times[-1])
        if traced and self.trace is not None:
            end = time.time()
            self.trace.append((traced[2], traced[0], traced[1], ts.first_wall or end, end))
        await resp.write_eof(b"".join(pending))
        return resp

    def _ticker_for(self, loop: asyncio.AbstractEventLoop) -> _Ticker:
        t = self._ticker
        if t is None or t.loop is not loop:
            t = self._ticker = _Ticker(loop)
        return t

    async def _complete(
        self,
        request: web.Request,
        ms: _ModelState,
        kind: _Kind,
        t_admit: float,
        rid: bytes,
        created: int,
        n: int,
        finish: str,
        prompt_tokens: int,
        abort: bool,
        malformed: bool,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        times = self._schedule(ms, t_admit, n)
        choice: dict[str, Any]
        if kind.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": _text(n), "refusal": None},
                "logprobs": None,
                "finish_reason": finish,
            }
        else:
            choice = {"index": 0, "text": _text(n), "logprobs": None, "finish_reason": finish}
        body = orjson.dumps(
            {
                "id": rid.decode(),
                "object": kind.object,
                "created": created,
                "model": ms.name,
                "choices": [choice],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": n,
                    "total_tokens": prompt_tokens + n,
                },
            }
        )
        await _sleep_until(loop, times[-1])
        if malformed:
            return _json_response(200, body[: len(body) // 2])
        if abort:
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            if request.transport is not None:
                request.transport.close()
            return resp
        return _json_response(200, body)


def _content_chars(messages: object) -> int:
    """Characters of message content (strings, or the text of content parts)."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        c = m.get("content")
        if isinstance(c, str):
            total += len(c)
        elif isinstance(c, list):
            for part in c:
                if isinstance(part, dict):
                    text = part.get("text")
                    if isinstance(text, str):
                        total += len(text)
    return total


_BAD_PROMPT: Final = (
    "prompt must be a string, a list of strings, a list of token ids or a list of token-id lists"
)


def _completion_prompt(prompt: object) -> tuple[int, str] | None:
    """Prompt tokens and trace text of a text-completions `prompt`; None when missing or invalid.

    A list of strings or of token-id lists is a batch; the simulator answers only the first prompt
    (n=1 semantics: one choice, index 0), so only its tokens are counted. Strings count
    (chars + 3) // 4 tokens as chat does, token-id lists their length. The trace text is the string,
    the last string of a list (as chat traces the last message), or "" for token ids.
    """
    if isinstance(prompt, str):
        return (len(prompt) + 3) // 4, prompt
    if not isinstance(prompt, list) or not prompt:
        return None
    first = prompt[0]
    if isinstance(first, str) and all(isinstance(p, str) for p in prompt):
        return (len(first) + 3) // 4, prompt[-1]
    if type(first) is int and all(type(t) is int for t in prompt):
        return len(prompt), ""
    if isinstance(first, list) and all(
        isinstance(p, list) and p and all(type(t) is int for t in p) for p in prompt
    ):
        return len(first), ""
    return None


def _last_text(messages: object) -> str:
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
    return ""


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _sleep_until(loop: asyncio.AbstractEventLoop, when: float) -> None:
    """Sleep until the absolute loop time `when` (no drift from accumulated relative sleeps)."""
    if when <= loop.time():
        return
    fut: asyncio.Future[None] = loop.create_future()
    handle = loop.call_at(when, _wake, fut)
    try:
        await fut
    finally:
        handle.cancel()


# ---------------------------------------------------------------------------------------------------
# App construction and start-up.

SIM_STATE: Final = web.AppKey("oxconsole_sim_state", SimState)


def build_app(
    profiles: dict[str, SimModelProfile], default: SimModelProfile | None = None, seed: int = 0
) -> web.Application:
    """The simulator as an aiohttp app. Unknown models use `default` (contract defaults if None)."""
    state = SimState(profiles, default, seed)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SIM_STATE] = state
    app.router.add_post("/v1/chat/completions", state.handle_chat)
    app.router.add_post("/v1/completions", state.handle_completions)
    app.router.add_get("/v1/models", state.handle_models)
    app.router.add_get("/v1/models/{model:.+}", state.handle_model)
    app.router.add_get("/health", state.handle_health)
    app.router.add_get("/sim/stats", state.handle_stats)
    app.router.add_get("/sim/trace", state.handle_trace)
    return app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    if ":" in host and not host.startswith("["):
        return f"[{host}]"
    return host


async def start_sim(
    host: str = "127.0.0.1",
    port: int = 0,
    profiles: dict[str, SimModelProfile] | None = None,
    default: SimModelProfile | None = None,
    seed: int = 0,
    *,
    allow_remote: bool = False,
) -> tuple[web.AppRunner, str]:
    """Start the simulator on the running loop; returns the runner (call ``cleanup()``) and base URL.

    Listens on loopback unless `allow_remote` is set (the simulator has no authentication).
    """
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on non-loopback host {host!r} (the simulator has no authentication); "
            "pass --allow-remote to do it anyway"
        )
    app = build_app(profiles or {}, default, seed)
    # handler_cancellation: a client that disconnects frees its capacity slot at once, as vLLM does.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound_port = runner.addresses[0][1]
    return runner, f"http://{_url_host(host)}:{bound_port}/v1"
