"""Requests a stop cancels are not errors: the summary counts them in `requests.cancelled` (not in
`requests.error` nor `errors`), `[slo]` judges only the requests that finished, their records keep
`error = "cancelled"` (so `--resume` sends them again), the exit code is the stop's (130), and the
summary `oxconsole report` rebuilds from the journal says the same.

A loopback server answers every prompt at once but those that ask to wait, which it holds until
the test ends: the run's stop cancels exactly those.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.commands import Stop
from oxconsole.workload import load_workload
from tests.support import engine_for, journal, oxconsole, oxconsole_here, run, until
from tests.support.http import chat_server, ok_answer
from tests.support.workloads import write_workload

FAST, SLOW = 20, 2


def workload(tmp_path: Path, base: str) -> Path:
    """tests/workloads/upstream.toml at `base`, the default retries, an SLO; FAST prompts answered at
    once around SLOW that wait."""
    lines = [{"id": f"f{i}", "prompt": "answer"} for i in range(FAST)]
    lines[FAST // 2 : FAST // 2] = [{"id": f"s{i}", "prompt": "wait for me"} for i in range(SLOW)]
    prompts = b"".join(orjson.dumps(x) + b"\n" for x in lines).decode()
    sets = {
        "name": "cancel",
        "run": {"concurrency": 6, "timeout": "60s", "grace": "0s"},
        "endpoints.up": {"base_url": f"{base}/v1"},  # no API key
        "retry": None,
        "slo": {"latency": "10s", "target": 0.95},
    }
    return write_workload("upstream", tmp_path, sets, prompts=prompts)


@pytest.mark.parametrize("cancel", [True, False], ids=["cancel", "grace-ends"])
async def test_requests_cancelled_by_a_stop_are_not_errors_and_not_judged(
    tmp_path: Path, cancel: bool
) -> None:
    held = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if b"wait for me" in body:
            await held.wait()
        return ok_answer()

    async with chat_server(handler) as base:
        w = load_workload(workload(tmp_path, base))
        e = engine_for(w)

        async def stop_once_the_fast_ones_are_done() -> None:
            await until(lambda: e.ok >= FAST, timeout=30, what=f"{FAST} answers")
            e.apply(Stop(cancel=cancel))  # without cancel, the 0 s grace cancels them at once

        stopper = asyncio.create_task(stop_once_the_fast_ones_are_done())
        out = await asyncio.wait_for(run(w, e), 60)
        await stopper
        held.set()

    recs = journal(w)
    assert sorted(r["error"] for r in recs if r["status"] != "ok") == ["cancelled"] * SLOW, recs
    req = out.summary["requests"]
    assert out.summary["errors"] == {}, out.summary["errors"]
    g = out.summary["goodput"]
    assert g["fraction"] == 1.0 and g["met"] is True, g  # 20 good of the 20 that finished
    got = tuple(req.get(k) for k in ("total", "ok", "error", "cancelled"))
    assert got == (FAST + SLOW, FAST, 0, SLOW), req
    assert out.exit_code == 130, (out.exit_code, req)

    # the summary rebuilt from the journal alone agrees
    p = await asyncio.to_thread(oxconsole_here, "report", str(w.results_path()), "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rebuilt = json.loads(p.stdout)
    assert rebuilt["requests"]["cancelled"] == SLOW and rebuilt["requests"]["error"] == 0, rebuilt["requests"]
    assert rebuilt["errors"] == {} and rebuilt["goodput"]["fraction"] == 1.0, (
        rebuilt["errors"],
        rebuilt["goodput"],
    )


@pytest.mark.subprocess
async def test_resume_sends_the_cancelled_requests_again(tmp_path: Path) -> None:
    held = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if b"wait for me" in body and not held.is_set():
            await held.wait()
        return ok_answer()

    async with chat_server(handler) as base:
        path = workload(tmp_path, base)
        w = load_workload(path)
        e = engine_for(w)

        async def stop() -> None:
            await until(lambda: e.ok >= FAST, timeout=30, what=f"{FAST} answers")
            e.apply(Stop(cancel=True))

        stopper = asyncio.create_task(stop())
        await asyncio.wait_for(run(w, e), 60)
        await stopper
        held.set()
        p = await asyncio.to_thread(oxconsole, str(path), "--headless", "--resume", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    ok = {r["id"] for r in journal(w) if r["status"] == "ok"}
    assert ok == {f"f{i}" for i in range(FAST)} | {f"s{i}" for i in range(SLOW)}, sorted(ok)
