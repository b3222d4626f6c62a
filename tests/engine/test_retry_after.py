"""Retry semantics against a scripted upstream over loopback: which statuses are retried, every
Retry-After form, attempts counted honestly (the SDK's own retries off), keys kept out of error
details, TLS verification on by default.

The upstream is a tiny aiohttp app on the test's loop. Each model name scripts one behaviour; the
app records when each request arrived and the Authorization header it carried, so the tests can
measure the waits between attempts from the server's side.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import ssl
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import backoff_delay
from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.client import RETRY_AFTER_MAX, EndpointClient, parse_retry_after, redact
from oxconsole.engine.send.request import retryable
from oxconsole.workload import Workload, WorkloadError
from tests.support import journal, run
from tests.support.http import needs_openssl, self_signed
from tests.support.workloads import Sets, load_workload

KEY_ENV = "OXC_TEST_FAKE_KEY"
SK_KEY = "sk-test-9f8e7d6c5b4a3210"
PLAIN_KEY = "oxk_live_7f3a9c2b1d0e5a"  # a key that does not look like "sk-..."


ASKS = {
    "ra-inf": "inf",
    "ra-1e308": "1e308",
    "ra-2100": "Fri, 01 Jan 2100 00:00:00 GMT",
    "ra-61": "61",
}
"""Models whose every answer is a 429 asking for a wait over the cap."""


class Upstream:
    """Scripted OpenAI-compatible server. `first:<status>` models fail once, then answer."""

    def __init__(self) -> None:
        self.hits: dict[str, list[float]] = defaultdict(list)
        self.auth: list[str] = []
        self.url = ""
        self.retry_after_date: dict[str, float] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = body["model"]
        now = time.time()
        self.hits[model].append(now)
        auth = request.headers.get("Authorization", "")
        self.auth.append(auth)
        n = len(self.hits[model])
        if model in ASKS:  # a wait no run can honour
            return error(429, "slow down", {"Retry-After": ASKS[model]})
        if model.startswith("always-"):
            status = int(model.split("-")[1])
            return error(status, f"request rejected (status {status})")
        if model == "echo-header":
            return error(500, f"upstream refused the call; headers were Authorization: {auth}")
        if model == "echo-key":
            key = auth.removeprefix("Bearer ").strip()
            return error(401, f"Incorrect API key provided: {key}. Check your key.")
        if model == "echo-param":
            key = auth.removeprefix("Bearer ").strip()
            return error(403, f"forbidden for api_key={key}")
        if n == 1 and model == "first-408":
            return error(408, "request timeout")
        if n == 1 and model == "first-429-date":
            # an HTTP-date has whole seconds: aim at a whole second 1-2 s ahead, remember it
            target = math.floor(now) + 2
            self.retry_after_date[model] = target
            return error(429, "slow down", {"Retry-After": email.utils.formatdate(target, usegmt=True)})
        if n == 1 and model == "first-429-ms":
            return error(429, "slow down", {"retry-after-ms": "300"})
        if n == 1 and model == "first-429-seconds":
            return error(429, "slow down", {"Retry-After": "1"})
        return await answer(request, body, model)


def error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = orjson.dumps({"error": {"message": message, "type": "test_error", "code": None}})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


async def answer(request: web.Request, body: dict[str, Any], model: str) -> web.StreamResponse:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    if not body.get("stream"):
        return web.json_response(
            {
                "id": "x",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hi there"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
            }
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": "hi "}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "there"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": usage},
    ]
    for c in chunks:
        await resp.write(b"data: " + orjson.dumps({"id": "x", "model": model, **c}) + b"\n\n")
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def serve(up: Upstream, ssl_context: ssl.SSLContext | None = None) -> web.AppRunner:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", up.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    scheme = "https" if ssl_context else "http"
    up.url = f"{scheme}://127.0.0.1:{runner.addresses[0][1]}/v1"
    return runner


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    up = Upstream()
    runner = await serve(up)
    try:
        yield up
    finally:
        await runner.cleanup()


def workload_for(
    tmp_path: Path, up: Upstream, models: dict[str, int], *, sets: Sets | None = None
) -> Workload:
    """tests/workloads/upstream.toml at the upstream with the fake key, then `sets`; `models` maps
    a model to its prompt count."""
    lines = []
    for m, n in models.items():
        lines += [orjson.dumps({"id": f"{m}/{i}", "prompt": "hello", "model": m}).decode() for i in range(n)]
    listed = [{"name": m, "endpoint": "up"} for m in models]
    base = {"endpoints.up.base_url": up.url, "endpoints.up.api_key_env": KEY_ENV, "models": listed}
    return load_workload("upstream", tmp_path, {**base, **(sets or {})}, prompts="\n".join(lines) + "\n")


# --- which statuses are retried ---------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_other_4xx_never_retried_even_when_listed(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    model = f"always-{status}"
    w = workload_for(tmp_path, upstream, {model: 2}, sets={"retry.on": [status, 429, 500, "timeout"]})
    out = await run(w)
    recs = journal(w)
    assert [r["attempts"] for r in recs] == [1, 1]
    assert {r["error"] for r in recs} == {f"http_{status}"}
    assert all(r["error_detail"] for r in recs), [r for r in recs if not r["error_detail"]][:5]
    assert len(upstream.hits[model]) == 2  # one request each reached the server: no hidden SDK retry
    assert out.summary["errors"] == {f"http_{status}": 2}


@pytest.mark.asyncio
async def test_408_is_retried_like_a_timeout(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    # 408 is not listed; "timeout" is, and a 408 is the server's own timeout
    w = workload_for(tmp_path, upstream, {"first-408": 1}, sets={"retry.on": ["timeout"]})
    await run(w)
    (r,) = journal(w)
    assert r["status"] == "ok" and r["attempts"] == 2
    assert r["attempt_errors"] == {"http_408": 1}
    assert len(upstream.hits["first-408"]) == 2


@pytest.mark.asyncio
async def test_server_errors_reach_the_server_once_per_attempt(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK would retry 500/429/408 twice by itself; attempts must be the requests actually sent."""
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {"always-500": 1, "always-503": 1}, sets={"retry.max_attempts": 1})
    await run(w)
    assert all(r["attempts"] == 1 for r in journal(w)), [r for r in journal(w) if r["attempts"] != 1][:5]
    assert len(upstream.hits["always-500"]) == 1 and len(upstream.hits["always-503"]) == 1


# --- Retry-After forms ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_retry_after_http_date_is_honoured(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {"first-429-date": 1})
    await run(w)
    (r,) = journal(w)
    assert r["status"] == "ok" and r["attempts"] == 2
    first, second = upstream.hits["first-429-date"]
    target = upstream.retry_after_date["first-429-date"]
    # the retry left when the date said (whole-second resolution), not after the 1-2 ms backoff,
    # nor a second late (the room above is for a busy machine)
    assert target - first >= 1.0
    assert target - 0.05 <= second <= target + 0.8, (second - first, target - first)
    assert r["backoff_ms"] >= (target - first) * 1000 - 60
    assert r["latency_ms"] < r["backoff_ms"] / 2  # the wait is backoff, not latency


@pytest.mark.asyncio
async def test_retry_after_ms_is_honoured(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {"first-429-ms": 1}, sets={"run.stream": False})
    await run(w)
    (r,) = journal(w)
    assert r["status"] == "ok" and r["attempts"] == 2
    first, second = upstream.hits["first-429-ms"]
    # 300 ms, not the 1-2 ms backoff, nor 300 s (milliseconds read as seconds) or the next second
    assert 0.3 <= second - first < 1.0
    assert r["backoff_ms"] >= 300
    assert r["latency_ms"] < r["backoff_ms"]  # counted in, latency would be the larger


@pytest.mark.asyncio
async def test_retry_after_seconds_is_honoured(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {"first-429-seconds": 1})
    await run(w)
    (r,) = journal(w)
    assert r["status"] == "ok" and r["attempts"] == 2 and r["attempt_errors"] == {"http_429": 1}
    first, second = upstream.hits["first-429-seconds"]
    assert 1.0 <= second - first < 1.8  # one second, not two (nor the 1-2 ms backoff)


@pytest.mark.asyncio
@pytest.mark.timing
@pytest.mark.parametrize("model", sorted(ASKS))
async def test_a_wait_over_the_cap_ends_the_request_at_once(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {model: 1})
    t0 = time.perf_counter()
    try:
        await asyncio.wait_for(run(w), 20)
    except TimeoutError:
        pytest.fail(f"Retry-After {ASKS[model]!r}: the request was still waiting after 20 s")
    took = time.perf_counter() - t0
    (r,) = journal(w)
    assert r["status"] == "error" and r["error"] == "http_429" and r["attempts"] == 1, r
    assert "over the 60s cap" in r["error_detail"], r["error_detail"]
    assert len(upstream.hits[model]) == 1 and took < 15, (upstream.hits[model], took)


def test_retry_after_cap_forms() -> None:
    h = httpx2.Headers
    assert parse_retry_after(h({"Retry-After": "inf"})) == math.inf
    assert parse_retry_after(h({"Retry-After": "nan"})) is None
    assert parse_retry_after(h({"retry-after-ms": "nan", "Retry-After": "3"})) == 3.0
    far = parse_retry_after(h({"Retry-After": "Fri, 01 Jan 2100 00:00:00 GMT"}))
    assert far is not None and far > RETRY_AFTER_MAX
    on = frozenset({429})
    assert not retryable(AttemptResult(ok=False, error="http_429", status=429, retry_after=61.0), on)
    assert retryable(AttemptResult(ok=False, error="http_429", status=429, retry_after=59.0), on)


def test_parse_retry_after_forms() -> None:
    h = httpx2.Headers
    assert parse_retry_after(h({"retry-after-ms": "300"})) == pytest.approx(0.3)
    assert parse_retry_after(h({"Retry-After": "2"})) == 2.0
    assert parse_retry_after(h({"Retry-After": "1.5"})) == 1.5
    # retry-after-ms is the more precise one and wins when both are sent
    assert parse_retry_after(h({"Retry-After": "2", "retry-after-ms": "1500"})) == pytest.approx(1.5)
    ahead = parse_retry_after(h({"Retry-After": email.utils.formatdate(time.time() + 30, usegmt=True)}))
    assert ahead is not None and 28.5 <= ahead <= 30.5
    past = parse_retry_after(h({"Retry-After": email.utils.formatdate(time.time() - 30, usegmt=True)}))
    assert past == 0.0
    assert parse_retry_after(h({"Retry-After": "soon"})) is None
    assert parse_retry_after(h({"Retry-After": "-5"})) == 0.0
    assert parse_retry_after(h({})) is None
    assert parse_retry_after(None) is None


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    rng = random.Random(5)
    base, cap = 0.5, 4.0
    for attempt in range(1, 9):
        ceiling = min(cap, base * 2 ** (attempt - 1))
        draws = [backoff_delay(attempt, base, cap, rng, None) for _ in range(4000)]
        assert all(0.0 <= d <= ceiling for d in draws), [d for d in draws if not (0.0 <= d <= ceiling)][:5]
        # full jitter: uniform over [0, ceiling], so the mean is half the ceiling and small waits occur
        assert sum(draws) / len(draws) == pytest.approx(ceiling / 2, rel=0.05)
        assert min(draws) < 0.05 * ceiling
    # a server's Retry-After is a floor, even above the cap
    assert all(backoff_delay(1, base, cap, rng, 7.0) >= 7.0 for _ in range(100)), [
        _ for _ in range(100) if not (backoff_delay(1, base, cap, rng, 7.0) >= 7.0)
    ][:5]
    assert all(backoff_delay(3, base, cap, rng, 0.0) <= 2.0 for _ in range(100)), [
        _ for _ in range(100) if not (backoff_delay(3, base, cap, rng, 0.0) <= 2.0)
    ][:5]


# --- keys never in details --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_authorization_echoed_by_the_server_is_redacted(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, upstream, {"echo-header": 1, "echo-key": 1}, sets={"retry.max_attempts": 2})
    out = await run(w)
    assert f"Bearer {SK_KEY}" in upstream.auth  # the key from the env variable was sent ...
    recs = journal(w)
    assert {r["error"] for r in recs} == {"http_500", "http_401"}
    assert all(r["error_detail"] for r in recs), [r for r in recs if not r["error_detail"]][:5]
    raw = w.results_path().read_text() + orjson.dumps(out.summary).decode()
    assert SK_KEY not in raw  # ... and is nowhere in the journal or the summary
    assert SK_KEY[3:] not in raw


@pytest.mark.asyncio
async def test_key_of_any_shape_echoed_by_the_server_is_redacted(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, PLAIN_KEY)
    w = workload_for(tmp_path, upstream, {"echo-key": 1, "echo-param": 1})
    out = await run(w)
    assert f"Bearer {PLAIN_KEY}" in upstream.auth
    recs = journal(w)
    assert all(r["error_detail"] for r in recs), [r for r in recs if not r["error_detail"]][:5]
    raw = w.results_path().read_text() + orjson.dumps(out.summary).decode()
    assert PLAIN_KEY not in raw


def test_redact_known_shapes() -> None:
    for text in (
        f"Authorization: Bearer {SK_KEY}",
        f"Incorrect API key provided: {SK_KEY}",
        "api_key=abcd1234efgh",
        'apikey: "abcd1234efgh"',
    ):
        out = redact(text)
        assert "abcd1234efgh" not in out and SK_KEY[3:] not in out, out


# --- TLS ----------------------------------------------------------------------------------------


@pytest.fixture
async def tls_upstream(tmp_path: Path) -> AsyncIterator[Upstream]:
    up = Upstream()
    runner = await serve(up, self_signed(tmp_path))
    try:
        yield up
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
@needs_openssl
async def test_tls_verified_by_default_insecure_opt_in_warned(
    tmp_path: Path, tls_upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    up = tls_upstream
    w = workload_for(tmp_path, up, {"ok-model": 1}, sets={"retry.max_attempts": 1})
    out = await run(w)
    (r,) = journal(w)
    assert r["status"] == "error" and r["error_detail"], r
    assert not up.hits  # a self-signed certificate is refused: the request (and key) never left
    assert not any("insecure" in x for x in out.warnings)

    w.results_path().unlink()
    w = workload_for(tmp_path, up, {"ok-model": 1}, sets={"endpoints.up.insecure": True})
    out = await run(w)
    (r,) = journal(w)
    assert r["status"] == "ok", r
    assert len(up.hits["ok-model"]) == 1
    assert any("insecure" in x and "up" in x for x in out.warnings), out.warnings


@pytest.mark.asyncio
@needs_openssl
async def test_tls_failure_is_a_connection_error_saying_why(
    tmp_path: Path, tls_upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    w = workload_for(tmp_path, tls_upstream, {"ok-model": 1}, sets={"retry.max_attempts": 1})
    await run(w)
    (r,) = journal(w)
    assert r["error"] == "connection", r
    assert r["error_detail"].startswith("TLS: certificate verify failed"), r
    assert "SSL_CERT_FILE" in r["error_detail"], r  # and what to do about it


@pytest.mark.asyncio
async def test_connection_refused_is_a_connection_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attempt refused is a `connection` error saying so; a run whose endpoint refuses even the
    connections opened before its clock is bad input, nothing sent (test_refused_endpoint.py)."""
    monkeypatch.setenv(KEY_ENV, SK_KEY)
    up = Upstream()
    runner = await serve(up)
    await runner.cleanup()  # the port is closed now: nothing listens there
    c = EndpointClient("up", up.url, SK_KEY, max_connections=2, timeout=5.0)
    body = {"model": "ok-model", "messages": [{"role": "user", "content": "hi"}]}
    try:
        res = await c.attempt(body, stream=False, timeout=5.0, save_text=False)
    finally:
        await c.close()
    assert res.error == "connection", res
    assert res.detail is not None and res.detail.startswith("connection refused at 127.0.0.1:"), res
    w = workload_for(tmp_path, up, {"ok-model": 1}, sets={"retry.max_attempts": 1})
    with pytest.raises(WorkloadError, match=r"endpoints\.up\.base_url: expected a server that accepts"):
        await run(w)
    assert not w.results_path().exists() or not journal(w)
