"""Servers that reject a field the engine sends (HTTP 400): the engine sends it differently from
then on, says so once, and does not count the rejection as a retry or against the model's health.

The servers are small aiohttp apps on loopback answering as the real ones do: OpenAI's reasoning
models reject `max_tokens` and a non-default `temperature` with `error.param` set; older Azure API
versions reject `stream_options` in the message only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import RunOutcome, rejected_field
from oxconsole.engine.send.client import AttemptResult
from tests.support import journal, run
from tests.support.http import chat_server
from tests.support.workloads import load_workload

OPENAI_MAX_TOKENS = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}
OPENAI_TEMPERATURE = {
    "error": {
        "message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
        "Only the default (1) value is supported.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_value",
    }
}
AZURE_STREAM_OPTIONS = {
    "error": {
        "message": "Unrecognized request argument supplied: stream_options",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }
}


class Picky:
    """Answers 400 (with `bodies[field]`) to any request carrying one of `rejects`; streams otherwise."""

    def __init__(self, rejects: dict[str, dict[str, Any]]) -> None:
        self.rejects = rejects
        self.seen: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.seen.append(body)
        for key, err in self.rejects.items():
            if key in body:
                return web.Response(status=400, body=orjson.dumps(err), content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        head = b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":['
        for piece in (
            b'{"index":0,"delta":{"content":"ok"},"finish_reason":null}',
            b'{"index":0,"delta":{},"finish_reason":"stop"}',
        ):
            await resp.write(head + piece + b"]}\n\n")
        await resp.write_eof(b"data: [DONE]\n\n")
        return resp


async def run_against(
    picky: Picky, tmp_path: Path, model: dict[str, Any] | None = None
) -> tuple[RunOutcome, list[dict[str, Any]]]:
    """Twelve prompts to one model ("o-model", `model` keys added) on `picky`'s server."""
    async with chat_server(picky.handle) as base:
        w = load_workload(
            "sim_instant",
            tmp_path,
            {
                "run": {"concurrency": 8, "timeout": "5s"},
                "endpoints.default.base_url": f"{base}/v1",
                "models": [{"name": "o-model", "max_tokens": 64, "temperature": 0.2, **(model or {})}],
                "prompts.items": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"],
                "retry.max_attempts": 1,
                "sim": None,
            },
        )
        out = await run(w)
    return out, journal(w)


async def test_openai_reasoning_model_gets_max_completion_tokens_and_no_temperature(
    tmp_path: Path,
) -> None:
    picky = Picky({"max_tokens": OPENAI_MAX_TOKENS, "temperature": OPENAI_TEMPERATURE})
    out, recs = await run_against(picky, tmp_path)
    assert out.summary["requests"]["ok"] == 12 and out.summary["requests"]["error"] == 0
    assert out.summary["cooldowns"] == []
    # max_attempts = 1, yet each request got through: a rejected field is not a retry
    assert all(r["status"] == "ok" for r in recs), [r for r in recs if r["status"] != "ok"][:5]
    assert max(r["attempts"] for r in recs) >= 2
    for r in recs:
        if r["attempts"] > 1:
            assert r["attempt_errors"] == {"http_400": r["attempts"] - 1}
    ok_bodies = [b for b in picky.seen if "max_tokens" not in b and "temperature" not in b]
    assert len(ok_bodies) == 12 and all(b["max_completion_tokens"] == 64 for b in ok_bodies)
    notes = [x for x in out.warnings if "o-model" in x]
    assert len(notes) == 2  # once per field, not once per request
    assert any("max_tokens" in x and "max_completion_tokens instead" in x for x in notes), [x for x in notes][
        :5
    ]
    assert any("temperature" in x for x in notes), [x for x in notes][:5]
    # once adapted, later requests go right the first time
    assert len(picky.seen) <= 12 + 2 * 8


async def test_message_only_rejection_of_stream_options(tmp_path: Path) -> None:
    picky = Picky({"stream_options": AZURE_STREAM_OPTIONS})
    out, _ = await run_against(picky, tmp_path)
    assert out.summary["requests"]["ok"] == 12
    assert all("stream_options" not in b for b in picky.seen[-4:]), [
        b for b in picky.seen[-4:] if "stream_options" in b
    ][:5]
    assert any("stream_options" in x and "estimated" in x for x in out.warnings), [x for x in out.warnings][
        :5
    ]


async def test_both_caps_rejected_is_an_error_not_a_loop(tmp_path: Path) -> None:
    both = {
        "max_tokens": OPENAI_MAX_TOKENS,
        "max_completion_tokens": {
            "error": {
                "message": "Unsupported parameter: 'max_completion_tokens'",
                "param": "max_completion_tokens",
            }
        },
    }
    picky = Picky(both)
    out, recs = await run_against(picky, tmp_path, {"max_tokens_param": "max_completion_tokens"})
    assert out.summary["requests"]["error"] == 12
    assert all(r["error"] == "http_400" for r in recs), [r for r in recs if r["error"] != "http_400"][:5]
    assert len(picky.seen) <= 12 * 2
    assert "max_completion_tokens" in picky.seen[0]  # the configured field was sent first


async def test_other_400s_fail_at_once(tmp_path: Path) -> None:
    picky = Picky({"messages": {"error": {"message": "prompt is too long", "param": "messages"}}})
    out, recs = await run_against(picky, tmp_path)
    assert out.summary["requests"]["error"] == 12
    assert all(r["attempts"] == 1 for r in recs), [r for r in recs if r["attempts"] != 1][:5]
    assert len(picky.seen) == 12
    assert not [x for x in out.warnings if "rejected" in x]


@pytest.mark.parametrize(
    "detail, param, expected",
    [
        ("HTTP 400: Unsupported parameter: 'max_tokens' is not supported", None, "max_tokens"),
        ("HTTP 400: Unrecognized request argument supplied: stream_options", None, "stream_options"),
        ("HTTP 400: temperature: Extra inputs are not permitted", None, "temperature"),
        ("HTTP 400: max_completion_tokens must be at least 1", None, None),  # not a rejection of the field
        ("HTTP 400: prompt too long", "max_tokens", "max_tokens"),  # param names it
        ("HTTP 400: Unsupported parameter: 'top_k'", None, None),  # not one the engine adapts
    ],
)
def test_rejected_field(detail: str, param: str | None, expected: str | None) -> None:
    res = AttemptResult(ok=False, error="http_400", detail=detail, status=400, param=param)
    body = {"model": "m", "max_tokens": 5, "stream_options": {}, "temperature": 0.2}
    assert rejected_field(res, body) == expected


@pytest.mark.slow
async def test_with_workers_the_warning_shows_while_the_run_goes(tmp_path: Path) -> None:
    """run.workers = 2: a worker's warning reaches the parent's snapshot during the run, not only
    at its end."""
    import asyncio

    from oxconsole.engine.runner import make_engine
    from oxconsole.engine.workers.pool import ProcessShards

    picky = Picky({"max_tokens": OPENAI_MAX_TOKENS})

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return await picky.handle(request)

    seen_running: list[str] = []
    async with chat_server(slow) as base:
        w = load_workload(
            "sim_instant",
            tmp_path,
            {
                "run": {"concurrency": 4, "workers": 2, "timeout": "5s"},
                "endpoints.default.base_url": f"{base}/v1",
                "endpoints.default.server_metrics": "off",  # this server has no /metrics to warn of
                "models": [{"name": "o-model", "max_tokens": 64}],
                "prompts": {"synthetic": {"count": 120, "input_tokens": 5, "output_tokens": 8}},
                "sim": None,
            },
        )
        e = make_engine(w, results_path=w.results_path(), total_expected=120, publish_interval=0.05)
        assert isinstance(e.shards, ProcessShards)

        async def watch() -> None:
            while e.state != "done":
                snap = e.latest
                if snap is not None and snap.gauges.state == "running" and snap.gauges.warnings:
                    seen_running.extend(snap.gauges.warnings)
                    return
                await asyncio.sleep(0.02)

        watcher = asyncio.create_task(watch())
        out = await e.run()
        watcher.cancel()
    assert out.summary["requests"]["ok"] == 120
    assert any("max_completion_tokens instead" in x for x in seen_running), seen_running
    assert sum("rejected max_tokens" in x for x in out.warnings) >= 1
