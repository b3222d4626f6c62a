"""A hostile `/metrics` costs the run nothing: a 30 s stall, a 200 MB body (with a length and
chunked), binary garbage. Each round fails within its bound, is counted and said once; the run's
requests are timed as without it and its end does not wait for a stalled scrape."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from aiohttp import web

from oxconsole.engine.serverwatch import FETCH_TIMEOUT_S
from oxconsole.metrics.server.parse import MAX_BODY
from tests.support import engine_for, run
from tests.support.metricsserver import Served, huge, metrics_server, rounds, stall, text, workload
from tests.support.workloads import load_workload

HUGE = 200 * 1000 * 1000


async def test_a_stall_fails_the_round_within_its_bound(tmp_path: Path) -> None:
    async with metrics_server(stall(30.0)) as (origin, _):
        t0 = time.monotonic()
        watch, warnings = await rounds(workload(tmp_path, origin), 1)
        took = time.monotonic() - t0
    assert took < FETCH_TIMEOUT_S + 5.0, took  # one round: the bound, not the stall (load margin)
    assert len(warnings) == 1 and f"no whole answer within {FETCH_TIMEOUT_S:g} s" in warnings[0], warnings
    assert watch.targets[0].run.as_dict()["failed_scrapes"] == 1


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "chunked"])
async def test_a_200_mb_answer_is_not_read(tmp_path: Path, length: bool) -> None:
    sent = [Served()]
    async with metrics_server(huge(HUGE, sent, length=length)) as (origin, _):
        watch, warnings = await rounds(workload(tmp_path, origin), 1)
    assert len(warnings) == 1 and "MiB" in warnings[0], warnings
    assert watch.targets[0].run.as_dict()["failed_scrapes"] == 1
    # the client stopped reading at 8 MiB (or before, told the length): the server could not
    # write much more than that and the socket buffers
    assert sent[0].written < MAX_BODY + 16 * 2**20, sent[0].written


async def test_binary_garbage_is_a_failed_round(tmp_path: Path) -> None:
    garbage = os.urandom(1 << 20)
    async with metrics_server(text(garbage)) as (origin, _):
        watch, warnings = await rounds(workload(tmp_path, origin), 2)
    assert len(warnings) == 1, warnings
    assert any(w in warnings[0] for w in ("binary", "not UTF-8", "not Prometheus text")), warnings
    d = watch.targets[0].run.as_dict()
    assert (d["scrapes"], d["failed_scrapes"]) == (2, 2), d


@pytest.mark.slow
async def test_a_run_beside_a_stalled_metrics_server_is_timed_as_without_it(tmp_path: Path) -> None:
    """The simulator answers every request exactly 200 ms after admission; the run beside a
    `/metrics` that stalls 30 s measures the same TTFTs and ends without waiting for the stall."""

    async def never(request: web.Request, n: int) -> web.StreamResponse:
        return await stall(30.0)(request, n)

    async with metrics_server(never) as (origin, served):
        w = load_workload(
            "sim_exact",
            tmp_path,
            {
                "run.requests": 60,
                "prompts.synthetic.count": 60,
                "endpoints.default.server_metrics": origin + "/metrics",
                "endpoints.default.server_metrics_interval": "250ms",
            },
        )
        t0 = time.monotonic()
        out = await run(w, engine_for(w))
        took = time.monotonic() - t0
    assert served.asked >= 1, served
    assert out.summary["requests"]["ok"] == 60, out.summary["requests"]
    ttft = out.summary["ttft_ms"]
    assert 200.0 <= ttft["p50"] < 200.0 + 60.0, ttft  # the sim's 200 ms, plus loopback and load
    assert took < 60 / 4 * 0.2 + 10.0, took  # 3 s of requests; never the 30 s stall
    s = out.summary["server"]["default"]
    assert s["failed_scrapes"] >= 1 and s["engine"] == "unknown", s
    assert any("no whole answer" in x for x in out.warnings), out.warnings


async def test_a_refusal_is_quoted_safe_to_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal's body is quoted in the warning: never the key it may echo, never a terminal
    escape it may carry."""
    key = "sk-metrics-echo-0123456789"

    async def echo(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(
            status=401, text=f"\x1b]52;c;aGk=\x07bad key {request.headers.get('Authorization')}"
        )

    monkeypatch.setenv("SRV_KEY", key)
    async with metrics_server(echo) as (origin, _):
        w = workload(tmp_path, origin, **{"endpoints.default.api_key_env": "SRV_KEY"})
        _, warnings = await rounds(w, 1)
    assert len(warnings) == 1 and "HTTP 401" in warnings[0], warnings
    assert key not in warnings[0] and key[:12] not in warnings[0], warnings
    assert "\x1b" not in warnings[0] and "\x07" not in warnings[0] and "\\x1b" in warnings[0], warnings
