"""A model the endpoint's `GET /models` does not list is said at the start, naming what it lists
(closest first), and the run goes on; a 404 for it carries the name it most likely meant. A
server without `/models`, or one that answers it slowly or hugely, says nothing and delays the
start by at most the bound.

Each server is a small aiohttp app on loopback: one that answers any name (llama.cpp's server
answered "gpt-4o" with its Gemma), one that refuses unknown names with a 404 (vLLM's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send.listed import LIST_WITHIN_S
from tests.support import journal, run
from tests.support.http import chat_server, ok_answer
from tests.support.workloads import load_workload

LISTED = ["gemma-3-4b-it", "Qwen/Qwen3-0.6B", "gpt-oss-20b"]


def models_body() -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": n, "object": "model"} for n in LISTED]})


async def any_name(request: web.Request) -> web.StreamResponse:
    await request.read()
    return ok_answer()


async def vllm_like(request: web.Request) -> web.StreamResponse:
    model = orjson.loads(await request.read())["model"]
    if model not in LISTED:
        err = {"message": f"The model `{model}` does not exist.", "type": "NotFoundError", "code": 404}
        return web.json_response({"object": "error", **err}, status=404)
    return ok_answer()


@asynccontextmanager
async def server(
    chat: Callable[[web.Request], Awaitable[web.StreamResponse]],
    models: Callable[[web.Request], Awaitable[web.StreamResponse]] | None,
) -> AsyncIterator[str]:
    async with chat_server(chat, models) as origin:
        yield origin + "/v1"


def workload(tmp_path: Path, url: str, model: str) -> Any:
    """tests/workloads/minimal.toml with `model` at endpoint "local" (`url`): 3 prompts, 1 attempt."""
    sets = {
        "run": {"concurrency": 2, "timeout": "10s"},
        "endpoints": {"local": {"base_url": url}},
        "models": [{"name": model}],
        "prompts.items": ["a", "b", "c"],
        "retry.max_attempts": 1,
    }
    return load_workload("minimal", tmp_path, sets)


async def listed_ok(request: web.Request) -> web.StreamResponse:
    return models_body()


async def test_a_model_the_server_does_not_list_is_said_at_the_start_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    async with server(any_name, listed_ok) as url:
        w = workload(tmp_path, url, "gpt-4o")
        out = await run(w)
    assert out.summary["requests"]["ok"] == 3, out.summary["requests"]
    said = [x for x in out.warnings if "is not among the models" in x]
    assert len(said) == 1, out.warnings
    assert said[0].startswith(
        f'endpoints.local: model "gpt-4o" is not among the models GET {url}/models lists'
    ), said
    # closest first: gpt-oss-20b is the most like gpt-4o
    assert '("gpt-oss-20b", ' in said[0] and "closest first" in said[0], said


async def test_a_listed_model_is_not_mentioned(tmp_path: Path) -> None:
    async with server(any_name, listed_ok) as url:
        w = workload(tmp_path, url, "gemma-3-4b-it")
        out = await run(w)
    assert not [x for x in out.warnings if "is not among" in x], out.warnings


async def test_a_404_for_a_name_that_differs_by_case_says_the_listed_one(tmp_path: Path) -> None:
    async with server(vllm_like, listed_ok) as url:
        w = workload(tmp_path, url, "qwen/qwen3-0.6b")
        out = await run(w)
    recs = journal(w)
    assert {r["error"] for r in recs} == {"http_404"}, recs
    detail = recs[0]["error_detail"]
    assert "does not exist" in detail and 'did you mean "Qwen/Qwen3-0.6B"?' in detail, detail
    assert 'did you mean "Qwen/Qwen3-0.6B"?' in out.summary["error_details"]["http_404"], out.summary


async def no_models(request: web.Request) -> web.StreamResponse:
    raise web.HTTPNotFound()


async def slow_models(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(60)
    return models_body()


async def huge_models(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    await resp.write(b'{"data": [')
    piece = b'{"id": "x"},' * 10_000
    for _ in range(60):  # ~7 MB, over the 4 MiB read
        await resp.write(piece)
    await resp.write(b'{"id": "y"}]}')
    return resp


@pytest.mark.parametrize(
    "models", [None, no_models, slow_models, huge_models], ids=["none", "404", "slow", "huge"]
)
async def test_a_server_that_does_not_list_says_nothing_within_the_bound(
    tmp_path: Path, models: Callable[[web.Request], Awaitable[web.StreamResponse]] | None
) -> None:
    async with server(any_name, models) as url:
        w = workload(tmp_path, url, "gpt-4o")
        t0 = time.monotonic()
        out = await run(w)
        took = time.monotonic() - t0
    assert out.summary["requests"]["ok"] == 3, out.summary["requests"]
    assert not [x for x in out.warnings if "is not among" in x], out.warnings
    assert took < LIST_WITHIN_S + 5, f"the start waited {took:.1f} s for /models"
