"""The simulator's prefix cache and prefill over real HTTP: cached tokens are the longest prefix
already served, in whole blocks, reported where providers report them, and the uncached rest costs
prefill time before the first token."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from oxconsole.sim.prefix import PrefixCache
from oxconsole.workload import SimModelProfile
from tests.support.sim import assert_on_schedule, raw_post, running_sim, sse_chunks, stats_of, trace_of

FAST: dict[str, Any] = {"ttft": 0.0, "tokens_per_s": 0.0, "output_tokens": 3, "jitter": 0.0}
PROFILES = {
    "cached": SimModelProfile(prefix_cache=True, cache_block=16, **FAST),
    "other": SimModelProfile(prefix_cache=True, cache_block=16, **FAST),
    "plain": SimModelProfile(**FAST),
    "prefill": SimModelProfile(
        ttft=0.05,
        tokens_per_s=100.0,
        output_tokens=3,
        jitter=0.0,
        prefix_cache=True,
        prefill_tokens_per_s=2000.0,
    ),
}
A = "a" * 64 * 5  # 5 blocks of 16 tokens (64 characters each)
B = "b" * 64 * 3


async def usage_of(
    url: str, model: str, content: str | list[dict[str, Any]], stream: bool = False
) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": content}]}
    if stream:
        payload |= {"stream": True, "stream_options": {"include_usage": True}}
    status, _, body = await raw_post(url, payload)
    assert status == 200, body
    if stream:
        usage: dict[str, Any] = [ch for ch in sse_chunks(body) if ch.get("usage")][-1]["usage"]
        return usage
    out: dict[str, Any] = json.loads(body)["usage"]
    return out


def cached(u: dict[str, Any]) -> int:
    return int(u["prompt_tokens_details"]["cached_tokens"])


async def test_the_longest_prefix_seen_in_whole_blocks() -> None:
    async with running_sim(PROFILES) as url:
        first = await usage_of(url, "cached", A + B)
        again = await usage_of(url, "cached", A + B, stream=True)
        shared = await usage_of(url, "cached", A + "c" * 100)  # A's 5 blocks, then new text
        part = await usage_of(url, "cached", A[:100])  # 1 whole block of A (100 chars = 25 tokens)
        other = await usage_of(url, "other", A + B)  # each model has its own cache
        fresh = await usage_of(url, "cached", "z" + A)  # a different first block: nothing cached
        plain = await usage_of(url, "plain", A)
    assert (first["prompt_tokens"], cached(first)) == (128, 0), first
    assert cached(again) == 128, again  # 8 whole blocks
    assert (shared["prompt_tokens"], cached(shared)) == (105, 80), shared
    assert (part["prompt_tokens"], cached(part)) == (25, 16), part
    assert cached(other) == 0 and cached(fresh) == 0, (other, fresh)
    assert "prompt_tokens_details" not in plain, plain  # no cache: no report, as before


async def test_content_parts_and_messages_are_one_text() -> None:
    """Tokens are counted over all messages' content, and so are the blocks: the same text split
    differently over parts is the same prefix."""
    async with running_sim(PROFILES) as url:
        await usage_of(url, "cached", A + B)
        parts = await usage_of(
            url, "cached", [{"type": "text", "text": A[:30]}, {"type": "text", "text": A[30:] + B}]
        )
    assert cached(parts) == 128, parts


async def test_token_id_prompts_are_blocks_of_ids() -> None:
    async with running_sim(PROFILES) as url:
        c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        ids = list(range(40))
        await c.completions.create(model="cached", prompt=ids)
        r = await c.completions.create(model="cached", prompt=ids[:35] + [999] * 5)
        await c.close()
    assert r.usage is not None and r.usage.prompt_tokens == 40
    assert r.usage.prompt_tokens_details is not None and r.usage.prompt_tokens_details.cached_tokens == 32


async def test_prefill_adds_uncached_tokens_to_ttft(monkeypatch: pytest.MonkeyPatch) -> None:
    """ttft 50 ms, 2000 prefill tokens/s, 100 tokens/s, 3 answer tokens. A 200-token prompt never
    seen: 50 + 200/2000 = 150 ms to the first token, 150 + 2 x 10 = 170 ms to the last. The same
    prompt again (200 tokens cached, 12 whole blocks = 192): 50 + 8/2000 = 54 ms, 74 ms."""
    monkeypatch.setenv("OXCONSOLE_SIM_TRACE", "1")
    text = "p" * 800
    async with running_sim(PROFILES) as url:
        payload = {"model": "prefill", "messages": [{"role": "user", "content": text}], "stream": True}
        await raw_post(url, payload)
        cold, late = await trace_of(url)
        assert_on_schedule(cold, late, 0.15, 0.17)
        await raw_post(url, payload)
        both, late = await trace_of(url)
    assert_on_schedule(both[1:], late, 0.054, 0.074)


def test_memory_is_bounded_least_recently_used_first() -> None:
    cache = PrefixCache(block=2, cap=4)
    assert cache.serve("a" * 8 * 3) == (0, 6)  # 3 blocks of 8 characters
    assert cache.serve("b" * 8 * 2) == (0, 4)  # 5 blocks now: the oldest of a's is forgotten
    assert len(cache) == 4
    assert cache.serve("a" * 8 * 3) == (0, 6), "a's first block was forgotten, so nothing is a prefix"
    assert len(cache) == 4


async def test_the_time_to_read_each_body_is_reported() -> None:
    """`/sim/stats` `read_ms`: from a request's headers to its body read and parsed (what a long
    prompt's upload costs before admission), one a request."""
    async with running_sim(PROFILES) as url:
        await usage_of(url, "plain", "w" * 1_000_000)
        await usage_of(url, "plain", "w")
        read = (await stats_of(url))["read_ms"]
    assert read["n"] == 2 and read["max"] > 0, read
