"""The simulator's aiohttp app: routes, request handlers and start-up on loopback.

Why this module exists: load tests, the engine's own tests and client benchmarks need a server whose
behaviour is known exactly — when the first token leaves, how fast tokens follow, how many requests
are served at once, which requests fail and how. Real endpoints give none of that, so the simulator
serves `/v1/chat/completions` (and the legacy text `/v1/completions`, same profiles, faults and
timing, for clients such as vLLM's ``bench serve``; and `/v1/embeddings`, deterministic vectors
answered `ttft` after admission, `embeddings.py`) from a `SimModelProfile` per model:

* timing is scheduled against absolute loop times from admission (``t_admit + ttft + i/tps``), so with
  ``jitter = 0`` latency is exactly ``ttft + (n - 1)/tokens_per_s`` and timer error never accumulates
  (`streams`);
* at most ``capacity`` requests per model are in service; the rest wait in a FIFO queue (`state`);
* faults (500, 429, rate limits, resets, aborted or malformed streams, stalls) are drawn from a seeded
  RNG per model, so a run is reproducible (`faults`);
* with ``ttft = 0`` and ``tokens_per_s = 0`` the whole response is built from pre-encoded pieces
  (`wire`) and sent in one write, so the server costs as little as possible when benchmarking clients;
* the timed chunks of every open stream are written by one ticker per event loop (a heap of due
  times, one timer armed for the earliest), not by a timer and a task wake-up per token, so ~1,000
  open streams at 10 tokens/s cost the simulator little more than its `send` calls;
* counters per model are served at ``GET /sim/stats`` so tests can check what the client did, with
  the simulator's own lateness (each timed write against its schedule) and GC pauses, so a
  benchmark can tell the server's error from the client's;
* ``GET /metrics`` is what a serving engine says about itself, in vLLM's names (or llama.cpp's),
  rendered when asked (`exposition`).

The Authorization header is accepted whatever it holds (or without one) and never logged; the access
log is off.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import time
from typing import Any, Final

import orjson
from aiohttp import web

from oxconsole.base.gcpace import PacedGC
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.sim.answerplan import answer_length, plan
from oxconsole.sim.bodies import chat_body, stream_wire, whole_stream
from oxconsole.sim.embeddings import BAD_INPUT, dimensions, embedding_inputs, embeddings_body
from oxconsole.sim.encoded import (
    BAD_PROMPT,
    CHAT,
    RESPONSES,
    TEXT,
    Kind,
    completion_prompt,
    error_body,
    json_response,
    last_text,
)
from oxconsole.sim.exposition import render
from oxconsole.sim.faults import arrival_faults, too_many
from oxconsole.sim.mediaroutes import MediaRoutes, image_parts
from oxconsole.sim.quality import Truth
from oxconsole.sim.ratewindows import Limiter
from oxconsole.sim.responses import BAD_INPUT as BAD_RESPONSES_INPUT
from oxconsole.sim.responses import input_text, response_body, response_wire
from oxconsole.sim.state import ModelState
from oxconsole.sim.streams import Answer, Lateness, Trace, Writer
from oxconsole.workload import SimLimits, SimModelProfile
from oxconsole.workload.prompts.promptdata import content_chars

__all__ = [
    "SIM_STATE",
    "SimState",
    "build_app",
    "is_loopback",
    "start_sim",
]

_MAX_MODEL_STATES: Final = 4096
PROMETHEUS_TEXT: Final = "text/plain; version=0.0.4; charset=utf-8"
_OTHER_MODELS: Final = "<other>"

_Read = tuple[dict[str, Any], tuple[int, str]]
"""A request's JSON body and its (prompt tokens, trace text)."""
# aiohttp >= 3.12 wants typed request keys; older ones (>= 3.9 is supported) take the string.
_LIMIT_HEADERS: Final[Any] = getattr(web, "RequestKey", lambda name, _t: name)(
    "oxconsole_sim_ratelimit", dict
)
"""Where a request keeps the rate-limit headers its answer carries (`_limit_headers`)."""


class SimState:
    """The simulator behind one app: profiles, per-model state and the request handlers."""

    def __init__(
        self,
        profiles: dict[str, SimModelProfile],
        default: SimModelProfile | None,
        seed: int,
        limits: SimLimits | None = None,
        truth: Truth | None = None,
    ) -> None:
        self.profiles = dict(profiles)
        self.limiter = Limiter(limits or SimLimits())
        self.metrics_format = (limits or SimLimits()).metrics_format
        """Whose names `/metrics` speaks (`[sim] metrics_format`)."""
        """`[sim] rpm_limit` / `tpm_limit`, server-wide (`ratewindows`)."""
        self.default = default if default is not None else SimModelProfile()
        self.seed = seed
        self.models: dict[str, ModelState] = {
            name: ModelState(name, p, seed) for name, p in self.profiles.items()
        }
        for st in self.models.values():
            if st.profile.quality is not None:
                st.truth = truth
        self._ids = itertools.count(1)
        self.bad_requests = 0
        self.lateness = Lateness()
        """How late the simulator's own timed writes were (so a benchmark can tell server error
        from client error)."""
        self.gc: PacedGC | None = None
        """The garbage collector's pacing, in a simulator running as its own process."""
        self.trace: Trace | None = [] if os.environ.get("OXCONSOLE_SIM_TRACE") else None
        """Per streamed request, when `OXCONSOLE_SIM_TRACE` is set (benchmarks): the last message's
        text (`trace_key`: a long one by its ends and length) and the wall times the handler
        started, admitted it, wrote the first token and the end, served at `/sim/trace`, so a
        client's timings can be split into its own part and ours."""
        self._writer = Writer(self.lateness, self.trace)
        self.reading = LogHistogram()
        """Milliseconds from a handler's start (headers read) to its body read and parsed: what a
        long prompt's upload costs before the request can be admitted (and its `ttft` start)."""

    def state_for(self, name: str) -> ModelState:
        st = self.models.get(name)
        if st is None:
            if len(self.models) >= _MAX_MODEL_STATES:
                name = _OTHER_MODELS
                st = self.models.get(name)
                if st is not None:
                    return st
            st = ModelState(name, self.default, self.seed)
            self.models[name] = st
        return st

    def stats(self) -> dict[str, Any]:
        return {
            "models": {name: st.stats.to_dict() for name, st in self.models.items()},
            "bad_requests": self.bad_requests,
            "lateness_ms": self.lateness.to_dict(),
            "read_ms": self._reading(),
            **(
                {"gc_pacing": {"collections": self.gc.collections, "pause_ms": round(self.gc.pause_ms, 3)}}
                if self.gc is not None
                else {}
            ),
        }

    def _reading(self) -> dict[str, float]:
        s = self.reading.summary()
        return {"n": self.reading.count, "p50": s["p50"], "p99": s["p99"], "max": s["max"]}

    # -- handlers --------------------------------------------------------------------------------

    async def handle_health(self, request: web.Request) -> web.Response:
        return json_response(200, b'{"status":"ok"}')

    async def handle_stats(self, request: web.Request) -> web.Response:
        return json_response(200, orjson.dumps(self.stats()))

    async def handle_metrics(self, request: web.Request) -> web.Response:
        """``GET /metrics``: the models' figures in vLLM's names (or llama.cpp's), rendered now."""
        body = render(self.metrics_format, {name: st.figures() for name, st in self.models.items()})
        return web.Response(body=body, headers={"Content-Type": PROMETHEUS_TEXT})

    async def handle_trace(self, request: web.Request) -> web.Response:
        return json_response(200, orjson.dumps(self.trace or []))

    async def handle_models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "oxconsole-sim"}
            for name in self.profiles
        ]
        return json_response(200, orjson.dumps({"object": "list", "data": data}))

    async def handle_model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: any name is served (unknown ones with the default profile)."""
        name = request.match_info["model"]
        owner = "oxconsole-sim" if name in self.profiles else "oxconsole-sim (default profile)"
        body = {"id": name, "object": "model", "created": int(time.time()), "owned_by": owner}
        return json_response(200, orjson.dumps(body))

    async def handle_chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._handle(request, CHAT)

    async def handle_completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions`` (legacy text completions, as vLLM's ``bench serve --backend
        openai``, guidellm's text_completions and the SDK's ``completions.create`` send them)."""
        return await self._handle(request, TEXT)

    async def handle_responses(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/responses`` (the Responses API, `responses`)."""
        return await self._handle(request, RESPONSES)

    async def handle_embeddings(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/embeddings``: one vector per input, sent `ttft` after admission."""
        read = await self._read(request, CHAT)
        if isinstance(read, web.Response):
            return read
        body = read[0]
        inputs = embedding_inputs(body.get("input"))
        dims = dimensions(body)
        if inputs is None or dims is None:
            return self._bad_request(BAD_INPUT if inputs is None else "dimensions must be an integer >= 1")
        ms = self.model_of(body)
        refused = await self.arrive(request, ms, read[1][0])
        if refused is not None:
            return refused
        loop = asyncio.get_running_loop()
        t_admit = loop.time() if ms.try_acquire() else await ms.acquire(loop)
        try:
            wait = t_admit + ms.profile.ttft * ms.factor() - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            ms.stats.completed += 1
            return json_response(200, orjson.dumps(embeddings_body(ms.name, inputs, dims)))
        finally:
            ms.release(loop)

    async def raw_body(self, request: web.Request) -> bytes:
        """A request's body, read within `MAX_BODY` (`_body`)."""
        return await _body(request)

    def model_of(self, body: dict[str, Any]) -> ModelState:
        """The model a request names, counted as received."""
        model = body.get("model")
        ms = self.state_for(model if isinstance(model, str) else "")
        ms.stats.received += 1
        return ms

    async def arrive(self, request: web.Request, ms: ModelState, tokens: int) -> web.StreamResponse | None:
        """None when the request goes on to be served, else the 429 of the server's rate limits
        (`tokens`: what the request is charged) or the arrival fault it drew (a 429, a 500, a
        reset, ...)."""
        if self.limiter.on:
            headers, wait, over = self.limiter.take(asyncio.get_running_loop().time(), tokens)
            request[_LIMIT_HEADERS] = headers
            if wait > 0.0:
                per = "RPM" if over == "requests" else "TPM"
                return too_many(ms, wait, f"rate limit reached on {over} per min ({per}) (simulated)", over)
        if ms.arrival_faults:
            refused = await arrival_faults(request, ms, asyncio.get_running_loop())
            if refused is not None:
                return refused
        return None

    async def _handle(self, request: web.Request, kind: Kind) -> web.StreamResponse:
        """One request of either kind: read it, find its model, draw the arrival faults, plan the
        answer (drawing the stream faults), wait for a capacity slot, answer, give the slot back."""
        t_in = time.monotonic() if self.trace is not None else 0.0
        read = await self._read(request, kind)
        if isinstance(read, web.Response):
            return read
        body, prompt = read
        ms = self.model_of(body)
        if kind is not TEXT and ms.profile.image_tokens:
            images = image_parts(body, kind is RESPONSES)
            if images:  # each image's tokens, prefilled like text
                prompt = (prompt[0] + images * ms.profile.image_tokens, prompt[1])
        charge = 0
        if self.limiter.on:
            charge = prompt[0] + ms.profile.reasoning_tokens + answer_length(body, ms.profile, kind)[0]
        refused = await self.arrive(request, ms, charge)
        if refused is not None:
            return refused
        loop = asyncio.get_running_loop()
        ans = plan(body, kind, prompt[0], ms)
        t_gate = loop.time()
        t_admit = t_gate if ms.try_acquire() else await ms.acquire(loop)
        traced = (t_in, time.monotonic(), trace_key(prompt[1])) if t_in else None
        held = ans.prompt_tokens + ans.total
        ans.queued = t_admit - t_gate
        ms.served.admitted(ans.queued, ans.prompt_tokens, ans.cached, held)
        generated = 0
        try:
            resp = await self._answer(request, ms, kind, ans, t_admit, traced, body)
            generated = ans.total // 2 if ans.abort else ans.total
            return resp
        except ConnectionError:
            # The client went away mid-response (a write hit the closing transport). Nothing can be
            # sent; returning quietly keeps aiohttp from logging it as a server error.
            ms.stats.disconnected += 1
            if self.gc is not None:
                self.gc.failures += 1  # an exception's traceback: cycles for the collector
            return web.Response(status=499)
        except asyncio.CancelledError:
            if self.gc is not None:
                self.gc.failures += 1
            raise
        finally:
            ms.served.ended(held, generated)
            ms.release(loop)

    async def _read(self, request: web.Request, kind: Kind) -> _Read | web.Response:
        """The request's JSON object and its prompt's (tokens, trace text), or the 400 that refuses
        it. Chat and the Responses API count (characters + 3) // 4 tokens."""
        t0 = time.monotonic()
        try:
            body = orjson.loads(await _body(request))
        except orjson.JSONDecodeError:
            return self._bad_request("request body is not valid JSON")
        self.reading.record((time.monotonic() - t0) * 1000.0)
        if not isinstance(body, dict):
            return self._bad_request("request body must be a JSON object")
        if kind is CHAT:
            messages = body.get("messages")
            return body, ((content_chars(messages) + 3) // 4, last_text(messages))
        if kind is RESPONSES:
            text = input_text(body)
            if text is None:
                return self._bad_request(BAD_RESPONSES_INPUT)
            return body, ((len(text[0]) + 3) // 4, text[1])
        prompt = completion_prompt(body.get("prompt"))
        if prompt is None:
            return self._bad_request(BAD_PROMPT)
        return body, prompt

    def _bad_request(self, message: str) -> web.Response:
        self.bad_requests += 1
        return json_response(400, error_body(message, "invalid_request_error", None))

    async def _answer(
        self,
        request: web.Request,
        ms: ModelState,
        kind: Kind,
        ans: Answer,
        t_admit: float,
        traced: tuple[float, float, str] | None,
        body: dict[str, Any],
    ) -> web.StreamResponse:
        """The admitted request's response, streamed or whole; counted completed unless a fault
        spoils it."""
        rid = kind.id_prefix + b"%x" % next(self._ids)
        created = int(time.time())
        w = self._writer
        if kind is RESPONSES:
            if ans.stream:
                wire = response_wire(rid.decode(), ms.name, created, ans, body)
                resp = await w.stream(request, ms, t_admit, ans, wire, traced)
            else:
                whole = response_body(rid.decode(), ms.name, created, ans, body)
                resp = await w.complete(request, ms, t_admit, ans, whole)
        elif ans.stream:
            slot = rid + kind.slot_mid + b"%d" % created
            if ms.zero_latency and not ans.faulty and ans.pieces is None:
                ms.served.first_token(ans.queued)
                ms.stats.completed += 1
                return whole_stream(ms, kind, slot, ans)
            wire = stream_wire(kind, ms.model_json, slot, ans)
            resp = await w.stream(request, ms, t_admit, ans, wire, traced)
        else:
            whole = chat_body(kind, ms.name, rid, created, ans)
            resp = await w.complete(request, ms, t_admit, ans, whole)
        if not ans.faulty:
            ms.stats.completed += 1
        return resp


# ---------------------------------------------------------------------------------------------------
# App construction and start-up.

SIM_STATE: Final = web.AppKey("oxconsole_sim_state", SimState)


TRACE_TEXT_MAX = 4096


def trace_key(text: str) -> str:
    """A prompt's text as the trace names it: whole up to `TRACE_TEXT_MAX` characters, longer
    ones by their first and last 64 and their length (a 1 MB prompt is not copied into the trace,
    nor hashed on the loop that times answers)."""
    if len(text) <= TRACE_TEXT_MAX:
        return text
    return f"{text[:64]}...({len(text)} characters)...{text[-64:]}"


MAX_BODY = 64 * 1024 * 1024
"""The largest request body the simulator reads (a larger one is answered 413)."""


async def _body(request: web.Request) -> bytes:
    """The request's body. With a Content-Length, its pieces are joined once (aiohttp's `read`
    grows a bytearray and copies it again: for a 1 MB prompt, on the loop that times answers);
    without one (chunked), or beyond MAX_BODY (413), aiohttp's `read`."""
    n = request.content_length
    if n is None or not 0 < n <= MAX_BODY:
        return await request.read()
    return await request.content.readexactly(n)


async def _limit_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer carries the rate-limit headers its request was given on arrival."""
    headers = request.get(_LIMIT_HEADERS)
    if headers:
        response.headers.update(headers)


def build_app(
    profiles: dict[str, SimModelProfile],
    default: SimModelProfile | None = None,
    seed: int = 0,
    limits: SimLimits | None = None,
    truth: Truth | None = None,
) -> web.Application:
    """The simulator as an aiohttp app. Unknown models use `default` (contract defaults if None);
    `limits` are the server's rate limits (none if None); `truth` what the models with a
    `quality` answer right (`sim/quality.py`)."""
    state = SimState(profiles, default, seed, limits, truth)
    app = web.Application(client_max_size=MAX_BODY)
    app[SIM_STATE] = state
    if state.limiter.on:
        app.on_response_prepare.append(_limit_headers)
    app.router.add_post("/v1/chat/completions", state.handle_chat)
    app.router.add_post("/v1/responses", state.handle_responses)
    app.router.add_post("/v1/completions", state.handle_completions)
    app.router.add_post("/v1/embeddings", state.handle_embeddings)
    MediaRoutes(state).add_to(app)
    app.router.add_get("/v1/models", state.handle_models)
    app.router.add_get("/v1/models/{model:.+}", state.handle_model)
    app.router.add_get("/health", state.handle_health)
    app.router.add_get("/sim/stats", state.handle_stats)
    app.router.add_get("/metrics", state.handle_metrics)
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
    limits: SimLimits | None = None,
    truth: Truth | None = None,
) -> tuple[web.AppRunner, str]:
    """Start the simulator on the running loop; returns the runner (call ``cleanup()``) and base URL.

    Listens on loopback unless `allow_remote` is set (the simulator has no authentication).
    """
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on non-loopback host {host!r} (the simulator has no authentication); "
            "pass --allow-remote to do it anyway"
        )
    app = build_app(profiles or {}, default, seed, limits, truth)
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
