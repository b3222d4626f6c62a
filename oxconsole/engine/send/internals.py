"""Every private name of a dependency the request path uses, in one place.

Why this module exists: the openai SDK builds each request (URL, auth, platform headers) and makes
its status errors, but only through private methods; aiohttp parses each network read in its
protocol's `data_received`, and the fastest honest way to time a read is to be handed it there,
which takes a reader of our own class in place of aiohttp's; and whether a request went out on a
kept-alive connection is known only inside aiohttp's connector (`_get`). Such names change across releases
without notice, so nothing else in the package touches them: `client.py` and `stream.py` call the
functions below, and tests/engine/test_sdk_contract.py names the installed version and what is gone when
one of them breaks (pyproject pins the ranges tested).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import openai
from openai._base_client import get_platform
from openai._models import FinalRequestOptions

# -- the openai SDK: what it builds for every request, and its error types -------------------------


@dataclass(slots=True, frozen=True)
class Template:
    """What the SDK builds for every request to one endpoint with one timeout."""

    url: str
    headers: tuple[tuple[str, str], ...]
    """The SDK's headers without Content-Length (aiohttp sets it from the body)."""
    idempotency_header: str | None


def per_request_auth(sdk: openai.AsyncOpenAI) -> bool:
    """Whether the SDK would authenticate each request differently (key providers, workload
    identity, provider runtimes, custom auth): then a built request cannot be copied."""
    for per_request in ("_provider_runtime", "_api_key_provider", "_workload_identity_auth"):
        if getattr(sdk, per_request, None) is not None:
            return True
    return sdk.custom_auth is not None


async def template(sdk: openai.AsyncOpenAI, timeout: float, path: str) -> Template:
    """Let the SDK build a POST to `path` as its `post()` would; later requests copy it."""
    if sdk._platform is None:
        # what the SDK's request() does before its first request: this may block on IO
        sdk._platform = await asyncio.to_thread(get_platform)
    options = FinalRequestOptions.construct(method="post", url=path, json_data={}, timeout=timeout)
    options = await sdk._prepare_options(options)
    req = sdk._build_request(options)
    await sdk._prepare_request(req)
    headers = tuple((k, v) for k, v in req.headers.multi_items() if k.lower() != "content-length")
    return Template(str(req.url), headers, getattr(sdk, "_idempotency_header", None))


def idempotency_key(sdk: openai.AsyncOpenAI) -> str:
    """A fresh idempotency key, as the SDK makes one per request."""
    key: str = sdk._idempotency_key()
    return key


def status_error(
    sdk: openai.AsyncOpenAI, url: str, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> openai.APIStatusError:
    """The SDK's own status error (`RateLimitError`, `BadRequestError`, ...) for an answer that is
    not 2xx; `body` is what was read of it, within the error body's bound."""
    request = httpx2.Request("POST", url)
    response = httpx2.Response(status, headers=headers, content=body, request=request)
    err: openai.APIStatusError = sdk._make_status_error_from_response(response)
    return err


KEEPALIVE_S = 5.0
"""How long an idle connection is kept: httpx's keep-alive expiry, which the SDK's pool uses."""


def pool_limits(max_connections: int) -> httpx2.Limits:
    """The SDK client's pool, sized as ours (it builds requests; the contract test sends with it)."""
    return httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)


def ssl_context(verify: bool) -> ssl.SSLContext:
    """TLS as the SDK's transport verifies it: certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR."""
    return httpx2.create_ssl_context(verify=verify)


# -- aiohttp: whether a request went out on a kept-alive connection --------------------------------

_REUSED: ContextVar[bool] = ContextVar("oxconsole_reused", default=False)
_NEW_ONLY: ContextVar[bool] = ContextVar("oxconsole_new_only", default=False)


class PooledConnector(aiohttp.TCPConnector):
    """aiohttp's connector, noting (in the task that asked) whether the connection it handed out
    came from its pool of kept-alive ones, and able to pass the pool by: a request that fails on a
    pooled connection before any byte of its answer never reached the server (the server had
    closed that connection), and is sent again on a new one."""

    async def _get(self, key: Any, traces: Any) -> Any:
        if _NEW_ONLY.get():
            return None
        conn = await super()._get(key, traces)
        if conn is not None:
            _REUSED.set(True)
        return conn


def next_request(*, new_connection: bool = False) -> None:
    """Before a request (in its task): it has no connection yet; `new_connection`: it gets a new
    one, whatever the pool holds."""
    _REUSED.set(False)
    _NEW_ONLY.set(new_connection)


def reused() -> bool:
    """Whether the current task's last request went out on a kept-alive connection."""
    return _REUSED.get()


# -- aiohttp: a connection opened with no request on it ---------------------------------------------


async def open_connection(
    session: aiohttp.ClientSession, url: Any, within: float
) -> aiohttp.connector.Connection:
    """A new (or idle) connection of `session`'s pool to `url`'s origin, to be `release()`d into it.
    aiohttp has no public way to open one without a request: its connector is asked for one as a
    request of the session would ask (the same pool key: no proxy, the connector's TLS)."""
    connector = session.connector
    assert connector is not None
    req = aiohttp.ClientRequest("POST", url, loop=asyncio.get_running_loop())
    return await connector.connect(req, [], aiohttp.ClientTimeout(sock_connect=within))


# -- aiohttp: each network read handed to a sink inside data_received -----------------------------


class Sink:
    """Where a body's bytes go as they come off the socket. `feed` returns True once the answer is
    complete (a stream's `[DONE]`) even if the connection stays open; it raises to fail the body."""

    __slots__ = ()

    def feed(self, data: bytes, now: float) -> bool:  # pragma: no cover - an interface
        raise NotImplementedError


DONE_EOF_GRACE = 1.0
"""Seconds a connection may take to end its body after the answer is complete (`[DONE]`): within
them it goes back to the pool; after them it is closed (the answer is kept either way)."""


class _Tap:
    __slots__ = ("complete", "error", "sink", "t_end", "waiter")

    def __init__(self, sink: Sink, waiter: asyncio.Future[None]) -> None:
        self.sink = sink
        self.waiter = waiter
        self.t_end = 0.0
        self.complete = False
        self.error: Exception | None = None

    def wake(self) -> None:
        if not self.waiter.done():
            self.waiter.set_result(None)


_TAPS: dict[int, _Tap] = {}
"""The bodies being read by a `_TapReader`, by id of the reader."""


class _TapReader(aiohttp.StreamReader):
    """An aiohttp body stream that hands each network read to its sink as it arrives.

    Why: read through `readany`, every network read wakes the reading task (a future, a scheduled
    callback, a task step and three async frames); the read is timed only when that task runs, after
    whatever else the event loop had queued. A response's reader is switched to this class once its
    headers are in (same slots, so `__class__` assignment is allowed), and from then on aiohttp's
    HTTP parser (which has already undone any gzip, deflate or br, a bounded piece at a time) feeds
    the sink directly, inside the protocol's `data_received`: the time stamped is when the bytes
    came off the socket, and the task wakes once, at the end. Nothing is buffered, so flow control
    never pauses the connection, except to stop a body that failed (over a bound, malformed): then
    reading pauses, so a decompression bomb stops inflating, and the attempt drops the connection.
    """

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            self.total_bytes += len(data)
            tap = _TAPS.get(id(self))
            if tap is not None and tap.error is None:
                try:
                    if tap.sink.feed(data, time.perf_counter()) and not tap.complete:
                        tap.complete = True
                        tap.t_end = time.perf_counter()
                        tap.wake()
                except Exception as err:  # a bad body: stop here, the attempt raises it
                    tap.error = err
                    self._protocol.pause_reading()
                    tap.wake()
        return False

    def begin_http_chunk_receiving(self) -> None:
        pass

    def end_http_chunk_receiving(self) -> None:
        pass

    def feed_eof(self) -> None:
        tap = _TAPS.get(id(self))
        if tap is not None:
            if not tap.t_end:
                tap.t_end = time.perf_counter()
            tap.wake()
        super().feed_eof()

    def set_exception(self, *args: Any, **kwargs: Any) -> None:
        super().set_exception(*args, **kwargs)
        tap = _TAPS.get(id(self))
        if tap is not None:
            tap.wake()


def _switch(content: aiohttp.StreamReader) -> bool:
    """Make `content` a `_TapReader`; False where this aiohttp's reader does not allow it."""
    if type(content) is not aiohttp.StreamReader:
        return False
    try:
        content.__class__ = _TapReader
    except TypeError:  # a reader with another layout (a compiled one): read it with readany
        return False
    return True


async def read_body(content: aiohttp.StreamReader, sink: Sink, tap: Callable[..., bool] = _switch) -> float:
    """Read a response body into `sink` until it is complete or ends; when its end arrived
    (`time.perf_counter`). Raises what the sink raised, or aiohttp's error for a broken body."""
    if not tap(content):
        return await _read_untapped(content, sink)
    perf = time.perf_counter
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    state = _Tap(sink, waiter)
    key = id(content)
    _TAPS[key] = state
    try:
        # what came with the headers, before the switch
        if content._buffer and sink.feed(content.read_nowait(), perf()):
            return perf()
        if not content.is_eof() and content.exception() is None:
            await waiter
            if state.complete and not content.is_eof() and state.error is None:
                await _settle(content, state)
    finally:
        del _TAPS[key]
    if state.error is not None:
        raise state.error
    exc = content.exception()
    if exc is not None and not state.complete:  # a complete answer stands, however it ended
        raise exc
    return state.t_end or perf()


async def _settle(content: aiohttp.StreamReader, state: _Tap) -> None:
    """Give a complete answer's connection `DONE_EOF_GRACE` to end its body (so it can be reused)."""
    state.waiter = asyncio.get_running_loop().create_future()
    if content.is_eof() or content.exception() is not None:
        return
    try:
        async with asyncio.timeout(DONE_EOF_GRACE):
            await state.waiter
    except TimeoutError:
        pass


async def _read_untapped(content: aiohttp.StreamReader, sink: Sink) -> float:
    """The same, one `readany` at a time, where the reader cannot be switched."""
    perf = time.perf_counter
    while data := await content.readany():
        if sink.feed(data, perf()):
            break
    return perf()
