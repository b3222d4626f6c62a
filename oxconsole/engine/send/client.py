"""One attempt of one request (chat, text completion or embeddings): built by the openai SDK, sent
by aiohttp, its answer read within bounds and its failures classified.

Why this module exists: the SDK builds, authenticates and classifies requests, but its per-request
path costs about twice what the request itself costs on the wire (options model copies, header
merging, URL parsing, httpx's send machinery: ~0.7 ms CPU per request) and its per-chunk parsing
builds a pydantic model per chunk. None of the building changes between requests to one endpoint,
so the SDK builds each endpoint's request once (`internals.template`: its URL, auth and platform
headers) and every attempt sends that request with its own body on the endpoint's aiohttp session;
the answer is read by `stream.py`, and a status error is still the SDK's own `APIStatusError`
(`internals.status_error`). Redirects: only a 307 or 308 to the endpoint's own origin is followed
(the body and every configured header go to no other origin). Every failure comes back as an
`AttemptResult` with a short class (`http_429`, `timeout`, `connection`, `stream_aborted`,
`bad_response`) and a detail that never carries a credential.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import ssl
import time
from collections.abc import Sequence
from typing import Any

import aiohttp
import multidict
import openai
import orjson
import yarl

from oxconsole.base.redaction import DETAIL_MAX as DETAIL_MAX
from oxconsole.base.redaction import redact as redact
from oxconsole.base.redaction import scrub as scrub
from oxconsole.base.redaction import secret_forms as secret_forms
from oxconsole.engine.headroom import Headroom
from oxconsole.engine.send import internals
from oxconsole.engine.send.apis import PATHS
from oxconsole.engine.send.attempt import AttemptResult, BadResponse, Encoded
from oxconsole.engine.send.listed import LIST_BYTES_MAX, did_you_mean, model_names
from oxconsole.engine.send.mediareaders import read_images, read_rerank, read_speech, read_transcription
from oxconsole.engine.send.responsesapi import read_response, read_response_stream
from oxconsole.engine.send.stream import (
    BodyLimits,
    collect,
    read_embeddings,
    read_json,
    read_stream,
    size_words,
)
from oxconsole.engine.send.usage import bound_usage
from oxconsole.workload.schema import MEDIA_APIS

__all__ = ["DETAIL_MAX", "RETRY_AFTER_MAX", "AttemptResult", "BodyLimits", "EndpointClient", "Refused"]

RETRY_AFTER_MAX = 60.0
"""The longest wait a server's Retry-After (or retry-after-ms) is honoured for, in seconds. A server
asking for more (`inf`, `1e308`, a date years ahead) makes that attempt's error the request's: it is
not retried, rather than waiting with the request shown in flight (docs/reliability.md)."""

MAX_REDIRECTS = 5
"""Same-origin 307/308 redirects followed per attempt; more is the last redirect's `http_3xx`."""


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` in seconds or HTTP-date form;
    infinite for `inf` (over `RETRY_AFTER_MAX`, as any wait a run cannot honour is); None for
    anything unreadable, NaN included."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            wait = _wait(float(ms) / 1000.0)
        except ValueError:
            wait = None
        if wait is not None:
            return wait
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return _wait(float(ra))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, OverflowError):
        return None
    return _wait(dt.timestamp() - time.time())


def _wait(seconds: float) -> float | None:
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def _status_detail(err: openai.APIStatusError) -> str:
    msg = ""
    body = err.body
    if isinstance(body, dict):
        e = body.get("error", body)
        if isinstance(e, dict):
            msg = str(e.get("message") or e.get("type") or "")
        else:
            msg = str(e)
    if not msg:
        msg = err.message or ""
    return f"HTTP {err.status_code}: {msg}"


class EndpointClient:
    """One endpoint: an `AsyncOpenAI` that builds its requests (SDK retries off) and the aiohttp
    session that sends them, both created on the engine's loop."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str | None,
        *,
        max_connections: int,
        timeout: float,
        insecure: bool = False,
        headers: dict[str, str] | None = None,
        secrets: Sequence[str] = (),
        limits: BodyLimits | None = None,
    ) -> None:
        self.name = name
        self._secrets: tuple[str, ...] = ((api_key,) if api_key else ()) + tuple(secrets)
        """Only to take them out of error details (the key; header values from the environment)."""
        self.limits = limits or BodyLimits()
        """How much of an answer is read (`stream.BodyLimits`)."""
        self._max_connections = max_connections
        self.pool_room = asyncio.Semaphore(max_connections)
        """A place in the connection pool, taken by each attempt before its clock starts
        (`request.Sender`): with more requests in flight than `max_connections`, the wait for a
        connection is the request's queue time, never counted in its TTFT, latency or timeout."""
        # Made here, not in the first attempt (loading the CA bundle is ~0.1 s of CPU, which would
        # count against that attempt's timeout); an http endpoint never needs one (a redirect
        # never leaves its origin).
        self._ssl: ssl.SSLContext | bool = (
            internals.ssl_context(verify=not insecure) if base_url.lower().startswith("https:") else True
        )
        # The SDK's client is what builds requests (and what tests/engine/test_sdk_contract.py compares
        # our requests with); it sends none of the run's requests.
        limits_ = internals.pool_limits(max_connections)
        http_client = openai.DefaultAioHttpClient(limits=limits_, timeout=timeout, verify=not insecure)
        self.sdk = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers (vLLM, llama.cpp, the simulator) need no key; the SDK insists on one.
            api_key=api_key or "no-key",
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
            default_headers=headers or None,
        )
        self._templates: dict[tuple[float, str], _Prepared] = {}
        self.headroom: Headroom | None = None
        """Told of every attempt and its answer's rate-limit headers (set by the run's shard)."""
        self._session: aiohttp.ClientSession | None = None
        self.listing: tuple[str, ...] | None = None
        """The models the endpoint lists (`listed`), when it said."""

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        await self.sdk.close()

    def session(self) -> aiohttp.ClientSession:
        """The endpoint's connection pool (made on first use, on the running loop): TLS verified
        as the SDK verifies it, no aiohttp timers (each attempt is bounded as a whole), bodies
        decompressed by aiohttp a bounded piece at a time."""
        if self._session is None:
            connector = internals.PooledConnector(
                limit=self._max_connections,
                keepalive_timeout=internals.KEEPALIVE_S,
                ssl=self._ssl,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(), auto_decompress=True
            )
        return self._session

    @property
    def built(self) -> frozenset[str]:
        """The paths whose request the SDK has built (`warm`, or a first attempt)."""
        return frozenset(path for _, path in self._templates)

    async def warm(self, timeout: float, paths: Sequence[str]) -> None:
        """Before the run's clock: build each path's request and the session, so that the first
        attempts do not time the SDK's first build (its platform probe runs in a thread: ~6 ms,
        paid by every attempt of the first wave at once) as the server's."""
        for path in paths:
            if (timeout, path) not in self._templates:
                await self._prepared(timeout, path)
        self.session()

    async def connect(self, count: int, within: float) -> int:
        """Before the run's clock: have `count` connections (at most `max_connections`) open and
        idle in the pool, so that the first wave's TTFT holds no TCP or TLS handshake, as no later
        request on a kept-alive connection does. Gives up at the first failure or after `within`
        seconds (the attempts then open and report their own); returns how many were opened.
        Raises `Refused` when the server refused them and none opened: nothing can be sent."""
        count = min(count, self._max_connections)
        if count <= 0 or not self._templates:
            return 0
        session = self.session()
        url = next(iter(self._templates.values())).url
        held: list[aiohttp.connector.Connection] = []
        failed: list[BaseException] = []

        async def one() -> None:
            try:
                held.append(await internals.open_connection(session, url, within))
            except Exception as err:
                failed.append(err)
                raise

        tasks = [asyncio.create_task(one()) for _ in range(count)]
        try:
            async with asyncio.timeout(within):
                await asyncio.gather(*tasks)
        except Exception:  # refused, a failed handshake, or `within` ran out
            pass
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for conn in held:  # all held until here: a released one would be taken again
                conn.release()
        if not held and failed and _refused(failed[0]):
            raise Refused(scrub(_cause_detail(failed[0]), self._secrets))
        return len(held)

    @property
    def models_url(self) -> str:
        return str(self.sdk.base_url).rstrip("/") + "/models"

    async def listed(self, within: float) -> tuple[str, ...] | None:
        """Before the run's clock: the models `GET base_url/models` lists, its answer read within
        `listed.LIST_BYTES_MAX` bytes and `within` seconds; None when the server does not say
        (no such route, an error, another shape). Kept for the did-you-mean of a 404."""
        if not self._templates:
            return None
        built = next(iter(self._templates.values())).headers
        headers = {k: v for k, v in built.items() if k.lower() != "content-type"}
        try:
            async with asyncio.timeout(within):
                resp = await self.session().get(self.models_url, headers=headers, allow_redirects=False)
                try:
                    if resp.status != 200:
                        return None
                    raw, _ = await collect(resp, LIST_BYTES_MAX, "model list")
                finally:
                    resp.release()
        except (TimeoutError, BadResponse, aiohttp.ClientError, OSError):
            return None
        self.listing = model_names(raw)
        return self.listing

    async def _prepared(self, timeout: float, path: str) -> _Prepared:
        tmpl = await internals.template(self.sdk, timeout, path)
        prepared = _Prepared(yarl.URL(tmpl.url), multidict.CIMultiDict(tmpl.headers), tmpl.idempotency_header)
        self._templates[timeout, path] = prepared
        return prepared

    async def _send(
        self,
        body: bytes,
        timeout: float,
        path: str,
        content_type: str | None = None,
        new_connection: bool = False,
    ) -> aiohttp.ClientResponse:
        """The response once its headers are in, after any same-origin 307/308 redirects; sent as
        `content_type` when given (a multipart form), else as the SDK's JSON (`new_connection`: on
        a new connection, not one of the pool's)."""
        p = self._templates.get((timeout, path)) or await self._prepared(timeout, path)
        headers = p.headers
        if content_type is not None:
            headers = headers.copy()
            headers["Content-Type"] = content_type
        if p.idempotency_header is not None:
            headers = headers.copy()
            headers[p.idempotency_header] = internals.idempotency_key(self.sdk)
        session = self.session()
        url = p.url
        for _ in range(MAX_REDIRECTS + 1):
            internals.next_request(new_connection=new_connection)
            resp = await session.post(url, data=body, headers=headers, allow_redirects=False)
            if resp.status not in (307, 308):
                return resp
            target = _same_origin_target(resp, p.url)
            if target is None:
                return resp
            resp.release()
            url = target
        return resp

    async def attempt(
        self,
        body: dict[str, Any] | Encoded,
        *,
        stream: bool,
        timeout: float,
        save_text: bool,
        api: str = "chat",
    ) -> AttemptResult:
        """Send one request on `api` (`[[models]] api`) and read it to the end, all within
        `timeout`. Never raises except on cancellation."""
        res = AttemptResult(ok=False)
        if type(body) is Encoded:
            data, ctype = body.data, body.content_type
        else:
            data, ctype = orjson.dumps(body), None  # before the clock: a 1 MB prompt's is ours
        res.t_sent = time.time()
        t0 = time.perf_counter()
        headers_seen = False
        room = self.headroom
        seq = room.sending() if room is not None else 0
        try:
            async with asyncio.timeout(timeout):
                try:
                    resp = await self._send(data, timeout, PATHS[api], ctype)
                except aiohttp.ClientConnectionError:
                    if not internals.reused():
                        raise
                    # A kept-alive connection the server had closed, found closed before any byte
                    # of an answer: the request never reached the server. Again at once, once, on
                    # a new connection (curl's rule): not an attempt, and its clock starts again.
                    res.t_sent = time.time()
                    t0 = time.perf_counter()
                    resp = await self._send(data, timeout, PATHS[api], ctype, new_connection=True)
                headers_seen = True
                if room is not None:
                    room.seen(resp.headers, seq)
                try:
                    await self._read(resp, res, t0, stream, save_text, api, body)
                finally:
                    resp.release()
        except TimeoutError:
            res.error = "timeout"
            res.detail = f"no complete answer within {timeout:g}s"
        except BadResponse as err:
            res.error = err.cls
            res.detail = str(err)
        except (aiohttp.ClientError, OSError) as err:
            res.error = "stream_aborted" if headers_seen else "connection"
            res.detail = _cause_detail(err)
        finally:
            if room is not None and not headers_seen:
                room.unanswered(seq)
        fields = body if isinstance(body, dict) else {}  # a multipart form caps nothing we read
        bound_usage(res, fields)
        if res.error is None:
            res.ok = True
        elif res.detail:
            res.detail = scrub(res.detail, self._secrets)
            if res.status == 404 and self.listing:
                res.detail = _model_hint(res.detail, fields.get("model"), self.listing)
        if res.latency_ms is None and res.ok:
            res.latency_ms = (time.perf_counter() - t0) * 1000.0
        return res

    async def _read(
        self,
        resp: aiohttp.ClientResponse,
        res: AttemptResult,
        t0: float,
        stream: bool,
        save_text: bool,
        api: str,
        body: dict[str, Any] | Encoded,
    ) -> None:
        if not 200 <= resp.status < 300:
            await self._failed(resp, res)
        elif api == "embeddings":
            await read_embeddings(resp, res, t0, save_text, self.limits)
        elif api in MEDIA_APIS:
            await self._read_media(resp, res, t0, save_text, api, body)
        elif stream and not resp.headers.get("content-type", "").startswith("application/json"):
            reader = read_response_stream if api == "responses" else read_stream
            await reader(resp, res, t0, save_text, self.limits)
        else:  # asked to stream, some servers answer with one JSON body anyway
            res.unstreamed = stream
            whole = read_response if api == "responses" else read_json
            await whole(resp, res, t0, save_text, self.limits)

    async def _read_media(
        self,
        resp: aiohttp.ClientResponse,
        res: AttemptResult,
        t0: float,
        save_text: bool,
        api: str,
        body: dict[str, Any] | Encoded,
    ) -> None:
        """An answer of the other kinds (`mediareaders.py`): a ranking, a transcription, speech,
        images."""
        sent = body if isinstance(body, dict) else {}
        if api == "transcriptions":
            await read_transcription(resp, res, t0, save_text, self.limits)
        elif api == "speech":
            fmt = sent.get("response_format")
            await read_speech(resp, res, t0, self.limits, fmt if isinstance(fmt, str) else "mp3")
        elif api == "rerank":
            docs = sent.get("documents")
            await read_rerank(
                resp, res, t0, save_text, self.limits, len(docs) if isinstance(docs, list) else 0
            )
        else:
            await read_images(resp, res, t0, save_text, self.limits)

    async def _failed(self, resp: aiohttp.ClientResponse, res: AttemptResult) -> None:
        """A status that is not 2xx: its class, detail (the SDK's reading of the error body, read
        within `limits.error_body`), Retry-After and the field a 4xx names."""
        status = res.status = resp.status
        res.error = f"http_{status}"
        if 300 <= status < 400:
            res.detail = f"HTTP {status}: {_redirect_detail(resp, yarl.URL(str(self.sdk.base_url)))}"
            return
        cut = ""
        try:
            raw, _ = await collect(resp, self.limits.error_body, "error body")
            body = bytes(raw)
        except BadResponse:
            body = b""
            cut = f" (error body over {size_words(self.limits.error_body)}, not read)"
        err = internals.status_error(self.sdk, str(resp.url), status, list(resp.raw_headers), body)
        detail = _status_detail(err)
        if detail.endswith(f"Error code: {status}"):  # the SDK's words when the body says nothing
            detail = f"HTTP {status}: no reason given for {resp.method} {resp.url.path}"
        res.detail = detail + cut
        res.param = err.param if isinstance(err.param, str) else None
        res.retry_after = wait = parse_retry_after(resp.headers)
        if wait is not None and wait > RETRY_AFTER_MAX:
            cap = f"Retry-After {wait:g}s is over the {RETRY_AFTER_MAX:g}s cap, not retried; "
            res.detail = cap + res.detail
        if status == 404 and not self.sdk.base_url.path.rstrip("/").endswith("/v1"):
            hint = f" (is base_url {str(self.sdk.base_url).rstrip('/')!r} missing /v1?)"
            res.detail = scrub(res.detail, self._secrets, DETAIL_MAX - len(hint)) + hint


class Refused(Exception):
    """The endpoint refused every connection opened before the run's clock: its detail says where."""


def _refused(err: BaseException) -> bool:
    return isinstance(err, aiohttp.ClientConnectorError) and isinstance(err.os_error, ConnectionRefusedError)


class _Prepared:
    """An endpoint's request as the SDK built it, in aiohttp's types (parsed once)."""

    __slots__ = ("headers", "idempotency_header", "url")

    def __init__(self, url: yarl.URL, headers: multidict.CIMultiDict[str], idempotency_header: str | None):
        self.url = url
        self.headers = headers
        self.idempotency_header = idempotency_header


def _model_hint(detail: str, model: Any, listing: Sequence[str]) -> str:
    """A 404's detail for a model the endpoint does not list, with the name it most likely meant."""
    if not isinstance(model, str) or model in listing:
        return detail
    guess = did_you_mean(model, listing)
    if guess is None:
        return detail
    hint = f' (did you mean "{guess}"? the endpoint lists it)'
    return detail[: DETAIL_MAX - len(hint)] + hint


def _origin(url: yarl.URL) -> tuple[str, str | None, int | None]:
    return url.scheme, url.host, url.port


def _same_origin_target(resp: aiohttp.ClientResponse, base: yarl.URL) -> yarl.URL | None:
    """Where a 307/308 points, when that is the endpoint's own origin; None otherwise."""
    location = resp.headers.get("location")
    if not location:
        return None
    try:
        target = resp.url.join(yarl.URL(location))
    except ValueError:
        return None
    return target if _origin(target) == _origin(base) else None


def _redirect_detail(resp: aiohttp.ClientResponse, base: yarl.URL) -> str:
    """Why a redirect was not followed, naming the origin it pointed at (never its path or query,
    which may carry anything)."""
    location = resp.headers.get("location")
    if not location:
        return "redirect without a Location, not followed"
    try:
        target = resp.url.join(yarl.URL(location))
        other = _origin(target) != _origin(base)
        where = str(target.origin())
    except ValueError:
        return "redirect to an unreadable Location, not followed"
    if other:
        return (
            f"redirect to another origin ({where}) not followed: the body and the endpoint's "
            f"headers go only to {base.origin()}"
        )
    if resp.status in (307, 308):
        return f"more than {MAX_REDIRECTS} redirects"
    return "redirect not followed: an API POST follows only 307 and 308, which keep it a POST"


TLS_HINT = (
    "; a private CA: point SSL_CERT_FILE at its bundle (or set the endpoint's insecure = true to skip "
    "verification)"
)


def _cause_detail(err: BaseException) -> str:
    """What went wrong on the connection, in words: a TLS verification failure says so first."""
    e: BaseException | None = err
    while e is not None:
        if isinstance(e, ssl.SSLCertVerificationError | aiohttp.ClientConnectorCertificateError):
            reason = getattr(e, "verify_message", None) or "certificate verify failed"
            return f"TLS: {reason}{TLS_HINT}"
        e = e.__cause__ or e.__context__
    if _refused(err):
        assert isinstance(err, aiohttp.ClientConnectorError)
        return f"connection refused at {err.host}:{err.port}: is the server running?"
    return f"{type(err).__name__}: {err}"
