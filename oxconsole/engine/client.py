"""One attempt of one request (chat, text completion or embeddings): sent through the openai SDK,
its failures classified.

Why this module exists: the SDK builds, authenticates and sends the request and its error types
are ours, but its per-chunk parsing builds a pydantic model per chunk (~0.3 ms CPU each). So we ask
its low-level `post(..., stream=True)` for the raw response and read it ourselves (`stream.py`).

The SDK's per-request path costs about twice what the request itself costs on the wire (options
model copies, header merging, URL parsing, ~0.7 ms CPU per request), and none of it changes
between requests to one endpoint. So the request is built once per endpoint and timeout by the
SDK's own `_build_request` (its URL, auth and platform headers), and each attempt sends a copy
carrying its body through the SDK's HTTP client (`sdk._client.send`); a status error still becomes
the SDK's `APIStatusError` via `_make_status_error_from_response`. Clients whose auth changes per
request (key providers, workload identity, provider runtimes) keep the SDK's full `post()` path.
Every failure comes back as an `AttemptResult` with a short class (`http_429`, `timeout`,
`connection`, `stream_aborted`, `bad_response`) and a detail that never carries a credential.
"""

from __future__ import annotations

import asyncio
import email.utils
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx2
import openai
import orjson
from openai._base_client import get_platform
from openai._models import FinalRequestOptions

from oxconsole.engine.apis import PATHS
from oxconsole.engine.stream import _BadResponse, _read_embeddings, _read_json, _read_stream
from oxconsole.redaction import DETAIL_MAX as DETAIL_MAX
from oxconsole.redaction import redact as redact
from oxconsole.redaction import scrub as scrub
from oxconsole.redaction import secret_forms as secret_forms


@dataclass(slots=True)
class AttemptResult:
    ok: bool
    error: str | None = None
    detail: str | None = None
    retry_after: float | None = None
    t_sent: float = 0.0  # unix time
    latency_ms: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    content_chunks: int = 0
    text: str | None = None
    status: int | None = None
    unstreamed: bool = False
    """Asked to stream, the server answered with one JSON body (no TTFT or inter-token figures)."""
    param: str | None = None
    """The request field a 4xx error names (OpenAI's `error.param`), when it names one."""
    extra: dict[str, Any] = field(default_factory=dict)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` in seconds or HTTP-date form."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, dt.timestamp() - time.time())


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


@dataclass(slots=True, frozen=True)
class _Template:
    """What the SDK builds for every request to one endpoint with one timeout."""

    url: httpx2.URL
    headers: httpx2.Headers
    """The SDK's headers without Content-Length (aiohttp sets it from the body)."""
    encoding: str
    extensions: dict[str, Any]
    idempotency_header: str | None


class EndpointClient:
    """One `AsyncOpenAI` per endpoint, created on the engine's loop, SDK retries off."""

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
    ) -> None:
        self.name = name
        self._secrets: tuple[str, ...] = ((api_key,) if api_key else ()) + tuple(secrets)
        """Only to take them out of error details (the key; header values from the environment)."""
        limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        http_client = openai.DefaultAioHttpClient(limits=limits, timeout=timeout, verify=not insecure)
        self.sdk = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers (vLLM, llama.cpp, the simulator) need no key; the SDK insists on one.
            api_key=api_key or "no-key",
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
            default_headers=headers or None,
        )
        self._templates: dict[tuple[float, str], _Template] = {}
        self.prebuilt = self._can_prebuild()
        """Requests are built once and copied (True), or each one by the SDK's `post()`."""

    def _can_prebuild(self) -> bool:
        """Whether every request to this endpoint gets the same URL and headers from the SDK."""
        sdk = self.sdk
        for per_request in ("_provider_runtime", "_api_key_provider", "_workload_identity_auth"):
            if getattr(sdk, per_request, None) is not None:
                return False
        return sdk.custom_auth is None and isinstance(sdk._client, httpx2.AsyncClient)

    async def close(self) -> None:
        await self.sdk.close()

    async def _template(self, timeout: float, path: str) -> _Template:
        """Let the SDK build a request to `path` once; later requests copy it."""
        sdk = self.sdk
        if sdk._platform is None:
            # what the SDK's request() does before its first request: this may block on IO
            sdk._platform = await asyncio.to_thread(get_platform)
        options = FinalRequestOptions.construct(method="post", url=path, json_data={}, timeout=timeout)
        options = await sdk._prepare_options(options)
        req = sdk._build_request(options)
        await sdk._prepare_request(req)
        headers = httpx2.Headers([(k, v) for k, v in req.headers.raw if k.lower() != b"content-length"])
        extensions = dict(req.extensions)
        limits = extensions.get("timeout")
        if isinstance(limits, dict):
            # No per-read timeout: aiohttp would cancel and re-arm a timer on every network read
            # (~9k a second at 1,000 streams). `attempt` bounds the whole attempt by the same
            # timeout, so no gap between reads can outlast it anyway.
            extensions["timeout"] = {**limits, "read": None}
        tmpl = _Template(req.url, headers, headers.encoding, extensions, sdk._idempotency_header)
        self._templates[timeout, path] = tmpl
        return tmpl

    def _request(self, tmpl: _Template, body: dict[str, Any]) -> httpx2.Request:
        req = httpx2.Request(
            "POST", tmpl.url, stream=httpx2.ByteStream(orjson.dumps(body)), extensions=tmpl.extensions
        )
        req.read()  # the body is in memory: the transport sends it as bytes, with its length
        # a copy of the list of headers, with their encoding known (not re-detected per request)
        req.headers = httpx2.Headers(tmpl.headers, encoding=tmpl.encoding)
        if tmpl.idempotency_header is not None:
            req.headers[tmpl.idempotency_header] = self.sdk._idempotency_key()
        return req

    async def _send(self, body: dict[str, Any], timeout: float, path: str) -> httpx2.Response:
        """The response once its headers are in; a non-2xx status raises the SDK's status error."""
        if not self.prebuilt:
            resp: httpx2.Response = await self.sdk.post(
                path,
                cast_to=httpx2.Response,
                body=body,
                stream=True,
                options={"timeout": timeout},
            )
            return resp
        tmpl = self._templates.get((timeout, path)) or await self._template(timeout, path)
        resp = await self.sdk._client.send(self._request(tmpl, body), stream=True)
        if not 200 <= resp.status_code < 300:
            try:
                await resp.aread()
            finally:
                await resp.aclose()
            raise self.sdk._make_status_error_from_response(resp)
        return resp

    async def attempt(
        self, body: dict[str, Any], *, stream: bool, timeout: float, save_text: bool, api: str = "chat"
    ) -> AttemptResult:
        """Send one request on `api` (`[[models]] api`) and read it to the end. Never raises except
        on cancellation."""
        res = AttemptResult(ok=False)
        res.t_sent = time.time()
        t0 = time.perf_counter()
        headers_seen = False
        try:
            async with asyncio.timeout(timeout):
                resp = await self._send(body, timeout, PATHS[api])
                headers_seen = True
                try:
                    if api == "embeddings":
                        await _read_embeddings(resp, res, t0, save_text)
                    elif stream and not resp.headers.get("content-type", "").startswith("application/json"):
                        await _read_stream(resp, res, t0, save_text)
                    else:  # asked to stream, some servers answer with one JSON body anyway
                        res.unstreamed = stream
                        await _read_json(resp, res, t0, save_text)
                finally:
                    await resp.aclose()
        except openai.APIStatusError as err:
            res.error = f"http_{err.status_code}"
            res.status = err.status_code
            res.detail = _status_detail(err)
            res.retry_after = parse_retry_after(err.response.headers)
            res.param = err.param if isinstance(err.param, str) else None
            if err.status_code == 404 and not self.sdk.base_url.path.rstrip("/").endswith("/v1"):
                hint = f" (is base_url {str(self.sdk.base_url).rstrip('/')!r} missing /v1?)"
                res.detail = scrub(res.detail, self._secrets, DETAIL_MAX - len(hint)) + hint
        except (TimeoutError, openai.APITimeoutError, httpx2.TimeoutException) as err:
            # The SDK's aiohttp transport maps every aiohttp connection error (reset, refused,
            # TLS failure) to ConnectTimeout: the cause chain tells a real timeout from those.
            cause = _connection_cause(err)
            if cause is None:
                res.error = "timeout"
                res.detail = f"no complete answer within {timeout:g}s"
            else:
                res.error = "stream_aborted" if headers_seen else "connection"
                res.detail = _cause_detail(cause)
        except openai.APIConnectionError as err:
            res.error = "connection"
            cause = err.__cause__
            res.detail = _cause_detail(cause) if cause else str(err)
        except (httpx2.RequestError, httpx2.StreamError, OSError) as err:
            # before the headers: what the SDK's post() reports as APIConnectionError
            res.error = "stream_aborted" if headers_seen else "connection"
            res.detail = _cause_detail(err)
        except _BadResponse as err:
            res.error = err.cls
            res.detail = str(err)
        if res.error is None:
            res.ok = True
        elif res.detail:
            res.detail = scrub(res.detail, self._secrets)
        if res.latency_ms is None and res.ok:
            res.latency_ms = (time.perf_counter() - t0) * 1000.0
        return res


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
    return f"{type(err).__name__}: {err}"


def _connection_cause(err: BaseException) -> BaseException | None:
    """The connection error behind a transport's "timeout", or None when it really timed out."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, TimeoutError) and e is not err:
            return None  # aiohttp's socket/connect timeouts are TimeoutErrors too
        if isinstance(e, aiohttp.ClientError | ConnectionError) or (
            isinstance(e, OSError) and not isinstance(e, TimeoutError)
        ):
            return e
        e = e.__cause__ or e.__context__
    return None
