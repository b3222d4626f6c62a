"""One attempt of one chat completion: sent through the openai SDK, the stream read by us.

Why this module exists: the SDK builds, authenticates and sends the request and its error types
are ours, but its per-chunk parsing builds a pydantic model per chunk (~0.3 ms CPU each). So we ask
its low-level `post(..., stream=True)` for the raw response and parse the server-sent events
ourselves with orjson, timing the first content token and the gaps between content chunks.
Every failure comes back as an `AttemptResult` with a short class (`http_429`, `timeout`,
`connection`, `stream_aborted`, `bad_response`) and a detail that never carries a credential.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import orjson

_DONE = b"[DONE]"
_SECRET_RE = re.compile(r"(Bearer\s+|sk-|api[_-]?key[\"'=:\s]+)[A-Za-z0-9._\-]{4,}", re.IGNORECASE)


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
    extra: dict[str, Any] = field(default_factory=dict)


def redact(text: str) -> str:
    """Remove anything that looks like a credential from an error detail."""
    return _SECRET_RE.sub(lambda m: m.group(1) + "***", text)


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


def _short(s: str, n: int = 200) -> str:
    s = " ".join(s.split())
    return redact(s if len(s) <= n else s[: n - 1] + "…")


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
    return _short(f"HTTP {err.status_code}: {msg}")


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
    ) -> None:
        self.name = name
        limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        http_client = openai.DefaultAioHttpClient(limits=limits, timeout=timeout, verify=not insecure)
        self.sdk = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers (vLLM, llama.cpp, the simulator) need no key; the SDK insists on one.
            api_key=api_key or "no-key",
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    async def close(self) -> None:
        await self.sdk.close()

    async def attempt(
        self, body: dict[str, Any], *, stream: bool, timeout: float, save_text: bool
    ) -> AttemptResult:
        """Send one request and read it to the end. Never raises except on cancellation."""
        res = AttemptResult(ok=False)
        res.t_sent = time.time()
        t0 = time.perf_counter()
        headers_seen = False
        try:
            async with asyncio.timeout(timeout):
                resp: httpx2.Response = await self.sdk.post(
                    "/chat/completions",
                    cast_to=httpx2.Response,
                    body=body,
                    stream=True,
                    options={"timeout": timeout},
                )
                headers_seen = True
                try:
                    if stream:
                        await _read_stream(resp, res, t0, save_text)
                    else:
                        await _read_json(resp, res, t0, save_text)
                finally:
                    await resp.aclose()
        except openai.APIStatusError as err:
            res.error = f"http_{err.status_code}"
            res.status = err.status_code
            res.detail = _status_detail(err)
            res.retry_after = parse_retry_after(err.response.headers)
        except (TimeoutError, openai.APITimeoutError, httpx2.TimeoutException):
            res.error = "timeout"
            res.detail = f"no complete answer within {timeout:g}s"
        except openai.APIConnectionError as err:
            res.error = "connection"
            cause = err.__cause__
            res.detail = _short(f"{type(cause).__name__}: {cause}" if cause else str(err))
        except (httpx2.TransportError, httpx2.StreamError, ConnectionError) as err:
            res.error = "stream_aborted" if headers_seen else "connection"
            res.detail = _short(f"{type(err).__name__}: {err}")
        except _BadResponse as err:
            res.error = err.cls
            res.detail = _short(str(err))
        if res.error is None:
            res.ok = True
        if res.latency_ms is None and res.ok:
            res.latency_ms = (time.perf_counter() - t0) * 1000.0
        return res


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


async def _read_stream(resp: httpx2.Response, res: AttemptResult, t0: float, save_text: bool) -> None:
    perf = time.perf_counter
    loads = orjson.loads
    buf = b""
    first = last = 0.0
    n = 0
    parts: list[str] | None = [] if save_text else None
    finished = False
    done = False
    async for data in resp.aiter_bytes():
        buf = buf + data if buf else data
        if b"\n" not in buf:
            continue
        now = perf()
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, event:/id: fields
            payload = line[5:].strip()
            if payload == _DONE:
                done = True
                continue
            if not payload:
                continue
            try:
                obj = loads(payload)
            except orjson.JSONDecodeError:
                raise _BadResponse("bad_response", f"malformed SSE chunk: {payload[:80]!r}") from None
            if not isinstance(obj, dict):
                raise _BadResponse("bad_response", f"SSE chunk is not an object: {payload[:80]!r}")
            choices = obj.get("choices")
            if choices:
                c0 = choices[0]
                delta = c0.get("delta") or {}
                piece = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                if piece or delta.get("tool_calls"):
                    if n == 0:
                        first = now
                    last = now
                    n += 1
                    if parts is not None and isinstance(piece, str):
                        parts.append(piece)
                if c0.get("finish_reason"):
                    finished = True
            elif "error" in obj:
                err = obj["error"]
                msg = err.get("message") if isinstance(err, dict) else err
                raise _BadResponse("stream_error", f"error event in stream: {msg}")
            if obj.get("usage"):
                _usage(obj, res)
    end = perf()
    if not (done or finished):
        raise _BadResponse("stream_aborted", f"stream ended without finish_reason or [DONE] after {n} chunks")
    res.latency_ms = (end - t0) * 1000.0
    res.content_chunks = n
    if n:
        res.ttft_ms = (first - t0) * 1000.0
        if n > 1:
            res.itl_ms = (last - first) * 1000.0 / (n - 1)
    if parts is not None:
        res.text = "".join(parts)


async def _read_json(resp: httpx2.Response, res: AttemptResult, t0: float, save_text: bool) -> None:
    raw = await resp.aread()
    res.latency_ms = (time.perf_counter() - t0) * 1000.0
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _BadResponse("bad_response", f"malformed JSON body: {raw[:80]!r}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        raise _BadResponse("bad_response", f"unexpected response body: {raw[:80]!r}")
    _usage(obj, res)
    text = ""
    if obj["choices"]:
        msg = obj["choices"][0].get("message") or {}
        text = msg.get("content") or msg.get("reasoning_content") or ""
    res.content_chunks = 1 if text else 0
    if save_text:
        res.text = text
    if res.output_tokens is None:
        res.extra["estimated_output"] = max(1, round(len(text) / 4)) if text else 0
