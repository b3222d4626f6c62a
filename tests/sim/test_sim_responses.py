"""The simulator's `/v1/responses` over real HTTP, read by the openai SDK's own Responses types:
events in order with their sequence numbers, reasoning before the answer, usage with its details,
the whole object, `max_output_tokens`, errors, and the same timing as chat."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from oxconsole.sim.encoded import answer_text
from oxconsole.workload import SimModelProfile
from tests.support.sim import assert_on_schedule, raw_post, running_sim, sse_events, trace_of

FAST: dict[str, Any] = {"ttft": 0.0, "tokens_per_s": 0.0, "output_tokens": 4, "jitter": 0.0}
PROFILES = {
    "plain": SimModelProfile(**FAST),
    "reasoner": SimModelProfile(reasoning_tokens=3, prefix_cache=True, **FAST),
    "timed": SimModelProfile(ttft=0.1, tokens_per_s=50.0, output_tokens=4, jitter=0.0, reasoning_tokens=2),
    "err": SimModelProfile(ttft=0.0, tokens_per_s=0.0, error_rate=1.0),
    "nousage": SimModelProfile(usage=False, **FAST),
}
EVENT = TypeAdapter(ResponseStreamEvent)


async def stream_of(url: str, payload: dict[str, Any]) -> list[Any]:
    """The streamed events, each validated strictly by the SDK's event types."""
    status, headers, body = await raw_post(url, payload | {"stream": True}, "/responses")
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(body)
    parsed = [EVENT.validate_python(data) for _, data in events]
    assert [name for name, _ in events] == [e.type for e in parsed]
    assert [e.sequence_number for e in parsed] == list(range(len(parsed)))
    return parsed


async def test_streamed_events_with_reasoning_first() -> None:
    async with running_sim(PROFILES) as url:
        events = await stream_of(url, {"model": "reasoner", "input": "x" * 40})
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    deltas = [e.type for e in events if e.type.endswith(".delta")]
    assert deltas == ["response.reasoning_text.delta"] * 3 + ["response.output_text.delta"] * 4, deltas
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert (text, reasoning) == (answer_text(4), answer_text(3))
    done = events[-1].response
    assert done.status == "completed"
    assert done.output_text == answer_text(4)
    assert [item.type for item in done.output] == ["reasoning", "message"]
    u = done.usage
    assert u is not None
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (10, 7, 17)
    assert u.output_tokens_details.reasoning_tokens == 3
    assert u.input_tokens_details.cached_tokens == 0


async def test_the_sdk_streams_and_reads_whole() -> None:
    async with running_sim(PROFILES) as url:
        c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        stream = await c.responses.create(model="plain", input="hello there", stream=True)
        got = [e async for e in stream]
        whole = await c.responses.create(
            model="plain",
            instructions="y" * 20,
            input=[
                {"role": "user", "content": "x" * 12},
                {"role": "user", "content": [{"type": "input_text", "text": "z" * 8}]},
            ],
        )
        await c.close()
    assert got[-1].type == "response.completed"
    assert "".join(e.delta for e in got if e.type == "response.output_text.delta") == answer_text(4)
    assert whole.output_text == answer_text(4)
    assert whole.usage is not None and whole.usage.input_tokens == 10  # 20 + 12 + 8 chars, 4 a token
    assert whole.usage.output_tokens_details.reasoning_tokens == 0
    Response.model_validate(whole.model_dump())  # strictly what the types say


async def test_cached_input_in_the_responses_form() -> None:
    async with running_sim(PROFILES) as url:
        status, _, _ = await raw_post(url, {"model": "reasoner", "input": "q" * 64 * 4}, "/responses")
        assert status == 200
        status, _, body = await raw_post(
            url, {"model": "reasoner", "input": "q" * 64 * 4 + "r" * 40}, "/responses"
        )
    r = Response.model_validate(json.loads(body))
    assert r.usage is not None
    assert (r.usage.input_tokens, r.usage.input_tokens_details.cached_tokens) == (74, 64), r.usage


async def test_max_output_tokens_makes_it_incomplete() -> None:
    async with running_sim(PROFILES) as url:
        events = await stream_of(url, {"model": "plain", "input": "x", "max_output_tokens": 2})
        _, _, body = await raw_post(
            url, {"model": "plain", "input": "x", "max_output_tokens": 2}, "/responses"
        )
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert len([e for e in events if e.type == "response.output_text.delta"]) == 2
    whole = Response.model_validate(json.loads(body))
    assert whole.status == "incomplete" and whole.usage is not None and whole.usage.output_tokens == 2


async def test_errors_as_chat_has_them() -> None:
    async with running_sim(PROFILES) as url:
        c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(openai.InternalServerError) as e:
            await c.responses.create(model="err", input="x")
        await c.close()
        status, _, body = await raw_post(url, {"model": "plain", "input": 5}, "/responses")
    assert e.value.status_code == 500
    assert status == 400
    assert json.loads(body)["error"]["message"] == "input must be a string or a list of input items"


async def test_no_usage_when_the_profile_sends_none() -> None:
    async with running_sim(PROFILES) as url:
        events = await stream_of(url, {"model": "nousage", "input": "x"})
    assert events[-1].response.usage is None


async def test_timed_as_chat(monkeypatch: pytest.MonkeyPatch) -> None:
    """ttft 100 ms, 50 tokens/s, 2 reasoning + 4 answer tokens: first event with a token at 100 ms,
    the last at 100 + 5 x 20 = 200 ms; not streamed, the whole answer leaves at 200 ms."""
    monkeypatch.setenv("OXCONSOLE_SIM_TRACE", "1")
    async with running_sim(PROFILES) as url:
        events = await stream_of(url, {"model": "timed", "input": "x" * 40})
        trace, late = await trace_of(url)
    assert len([e for e in events if e.type.endswith(".delta")]) == 6
    assert len(trace) == 1 and trace[0][0] == "x" * 40
    assert_on_schedule(trace, late, 0.1, 0.2)
