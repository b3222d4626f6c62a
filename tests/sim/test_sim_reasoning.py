"""The simulator's reasoning models over real HTTP: `reasoning_tokens` streamed before the answer in
each of the three shapes servers use, reported in usage, and timed on the same schedule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from oxconsole.sim.encoded import answer_text
from oxconsole.workload import SimModelProfile, WorkloadError, load_sim_section
from tests.support.sim import assert_on_schedule, raw_post, running_sim, sse_chunks, trace_of

MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "x" * 40}]  # 10 prompt tokens


def profile(field: str = "reasoning_content", **kw: Any) -> SimModelProfile:
    base: dict[str, Any] = {"ttft": 0.0, "tokens_per_s": 0.0, "output_tokens": 4, "jitter": 0.0}
    return SimModelProfile(reasoning_tokens=5, reasoning_field=field, **(base | kw))


PROFILES = {
    "rc": profile("reasoning_content"),
    "rs": profile("reasoning"),
    "think": profile("think_tags"),
    "timed": profile(ttft=0.1, tokens_per_s=50.0),
    "plain": SimModelProfile(ttft=0.0, tokens_per_s=0.0, output_tokens=4, jitter=0.0),
}


def split(chunks: list[dict[str, Any]], field: str) -> tuple[list[str], list[str], dict[str, Any] | None]:
    """The reasoning deltas, the content deltas, in order, and the usage."""
    reasoning: list[str] = []
    content: list[str] = []
    usage = None
    for ch in chunks:
        if ch.get("usage"):
            usage = ch["usage"]
        for c in ch["choices"]:
            d = c.get("delta", {})
            if d.get(field):
                assert not d.get("content"), d  # one kind of token a chunk
                assert not content, "reasoning after the answer began"
                reasoning.append(d[field])
            if d.get("content"):
                content.append(d["content"])
    return reasoning, content, usage


@pytest.mark.parametrize("model", ["rc", "timed"])  # the zero-latency path and the timed one
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_field_streams_before_the_answer(model: str, field: str) -> None:
    profiles = {model: replace(PROFILES[model], reasoning_field=field)}
    async with running_sim(profiles) as url:
        payload = {
            "model": model,
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        status, _, body = await raw_post(url, payload)
    assert status == 200
    reasoning, content, usage = split(sse_chunks(body), field)
    assert len(reasoning) == 5 and len(content) == 4, (reasoning, content)
    assert "".join(content) == answer_text(4)
    assert usage == {
        "prompt_tokens": 10,
        "completion_tokens": 9,
        "total_tokens": 19,
        "completion_tokens_details": {"reasoning_tokens": 5},
    }, usage


@pytest.mark.parametrize("model", ["think", "timed"])
async def test_think_tags_inside_content(model: str) -> None:
    profiles = {model: replace(PROFILES[model], reasoning_field="think_tags")}
    async with running_sim(profiles) as url:
        payload = {
            "model": model,
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        _, _, body = await raw_post(url, payload)
    _, content, usage = split(sse_chunks(body), "reasoning_content")
    assert len(content) == 9, content  # 5 reasoning chunks (tags included) then 4 answer chunks
    text = "".join(content)
    assert text == "<think>" + answer_text(5) + "</think>" + answer_text(4), text
    assert content[0].startswith("<think>") and content[4].endswith("</think>"), content
    assert usage is not None and usage["completion_tokens_details"] == {"reasoning_tokens": 5}


async def test_the_sdk_reads_every_shape_whole() -> None:
    async with running_sim(PROFILES) as url:
        c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        rc = await c.chat.completions.create(model="rc", messages=MESSAGES)
        rs = await c.chat.completions.create(model="rs", messages=MESSAGES)
        think = await c.chat.completions.create(model="think", messages=MESSAGES)
        plain = await c.chat.completions.create(model="plain", messages=MESSAGES)
        text = await c.completions.create(model="rc", prompt="x" * 40)
        await c.close()
    assert rc.choices[0].message.content == answer_text(4)
    assert (rc.choices[0].message.model_extra or {}).get("reasoning_content") == answer_text(5)
    assert (rs.choices[0].message.model_extra or {}).get("reasoning") == answer_text(5)
    assert "reasoning_content" not in (rs.choices[0].message.model_extra or {})
    assert think.choices[0].message.content == "<think>" + answer_text(5) + "</think>" + answer_text(4)
    for r in (rc, rs, think):
        assert r.usage is not None and r.usage.completion_tokens == 9
        assert r.usage.completion_tokens_details is not None
        assert r.usage.completion_tokens_details.reasoning_tokens == 5
    # a model that does not reason: no details at all, as before
    assert plain.usage is not None and plain.usage.completion_tokens == 4
    assert plain.usage.completion_tokens_details is None
    # legacy text completions have no reasoning field: the reasoning is in think tags
    assert text.choices[0].text == "<think>" + answer_text(5) + "</think>" + answer_text(4)
    assert text.usage is not None and text.usage.completion_tokens == 9


async def test_the_sdk_streams_reasoning_then_content() -> None:
    async with running_sim(PROFILES) as url:
        c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        stream = await c.chat.completions.create(
            model="rc",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        kinds: list[str] = []
        usage = None
        async for ch in stream:
            if ch.usage is not None:
                usage = ch.usage
            for choice in ch.choices:
                if (choice.delta.model_extra or {}).get("reasoning_content"):
                    kinds.append("r")
                elif choice.delta.content:
                    kinds.append("c")
        await c.close()
    assert "".join(kinds) == "rrrrrcccc", kinds
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 5


async def test_reasoning_is_timed_as_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """ttft 100 ms, 50 tokens/s, 5 reasoning + 4 answer tokens: the first (reasoning) token at 100 ms,
    the last at 100 + (9 - 1) x 20 = 260 ms; so the first answer token is due 5 x 20 = 100 ms after
    the first token (the trace's first is the first token of any kind)."""
    monkeypatch.setenv("OXCONSOLE_SIM_TRACE", "1")
    async with running_sim(PROFILES) as url:
        for _ in range(2):
            status, _, _ = await raw_post(url, {"model": "timed", "messages": MESSAGES, "stream": True})
            assert status == 200
        trace, late = await trace_of(url)
    assert len(trace) == 2
    assert_on_schedule(trace, late, 0.1, 0.26)


async def test_max_tokens_caps_the_answer_not_the_reasoning() -> None:
    async with running_sim(PROFILES) as url:
        payload = {
            "model": "rc",
            "messages": MESSAGES,
            "max_tokens": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        _, _, body = await raw_post(url, payload)
    chunks = sse_chunks(body)
    reasoning, content, usage = split(chunks, "reasoning_content")
    assert (len(reasoning), len(content)) == (5, 2)
    assert usage is not None and usage["completion_tokens"] == 7
    assert [c["finish_reason"] for ch in chunks for c in ch["choices"] if c.get("finish_reason")] == [
        "length"
    ]


def test_workload_keys(tmp_path: Path) -> None:
    path = tmp_path / "sim.toml"
    path.write_text(
        '[sim.models.r1]\nreasoning_tokens = 300\nreasoning_field = "think_tags"\n'
        "prefix_cache = true\ncache_block = 32\nprefill_tokens_per_s = 20000\n"
    )
    p = load_sim_section(path)["r1"]
    assert (p.reasoning_tokens, p.reasoning_field, p.prefix_cache, p.cache_block, p.prefill_tokens_per_s) == (
        300, "think_tags", True, 32, 20000.0,
    )  # fmt: skip
    path.write_text('[sim.models.r1]\nreasoning_field = "thoughts"\nreasoning_tokens = -1\ncache_block = 0\n')
    with pytest.raises(WorkloadError) as e:
        load_sim_section(path)
    text = "\n".join(e.value.errors)
    assert (
        'sim.models.r1.reasoning_field: expected "reasoning_content" or "reasoning" or "think_tags"' in text
    ), text
    assert "sim.models.r1.reasoning_tokens" in text and "sim.models.r1.cache_block" in text, text


def test_the_child_process_gets_every_new_key() -> None:
    """The engine's simulator runs as a child (`SimProcess`, `--profiles-json`): the reasoning shape,
    the cache and prefill reach it."""
    from oxconsole.sim import SimProcess
    from oxconsole.sim.cli import profiles_from_json, profiles_to_json

    prof = profile("think_tags", prefix_cache=True, cache_block=4, prefill_tokens_per_s=1e5)
    assert profiles_from_json(profiles_to_json({"t": prof})) == {"t": prof}
    with pytest.raises(ValueError, match="reasoning_field: expected one of"):
        profiles_from_json('{"t": {"reasoning_field": "thoughts"}}')
    with SimProcess({"t": prof}) as sim:
        c = openai.OpenAI(base_url=sim.url, api_key="x", max_retries=0)
        c.chat.completions.create(model="t", messages=MESSAGES)
        r = c.chat.completions.create(model="t", messages=MESSAGES)
        c.close()
    assert r.choices[0].message.content == "<think>" + answer_text(5) + "</think>" + answer_text(4)
    assert r.usage is not None and r.usage.prompt_tokens_details is not None
    assert r.usage.prompt_tokens_details.cached_tokens == 8  # 10 tokens: two whole blocks of 4
