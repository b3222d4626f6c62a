"""The simulator's `/metrics` over real HTTP: vLLM's names (llama.cpp's with `metrics_format`),
exact with `jitter = 0`, read by an independent parser (prometheus_client's) and by ours."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from oxconsole.metrics.server.parse import Exposition, parse
from oxconsole.metrics.server.scrapes import Part, Scrape, read
from oxconsole.workload import SimLimits, SimModelProfile
from tests.support.expositions import oracle
from tests.support.sim import raw_post, running_sim

PROMPT = "x" * 40  # (40 + 3) // 4 = 10 prompt tokens
PROMPT_TOKENS, OUTPUT = 10, 4
KV = 100
SLOW = SimModelProfile(ttft=0.6, tokens_per_s=0, output_tokens=OUTPUT, capacity=4, jitter=0, kv_tokens=KV)
CACHED = SimModelProfile(ttft=0, tokens_per_s=0, output_tokens=2, jitter=0, prefix_cache=True, cache_block=16)


async def metrics_text(url: str) -> tuple[str, str]:
    async with aiohttp.ClientSession() as s, s.get(url.removesuffix("/v1") + "/metrics") as r:
        assert r.status == 200, await r.text()
        return r.headers["Content-Type"], await r.text()


def sample(text: str, name: str, model: str = "slow", **labels: str) -> float:
    """The value of `name` for `model` (and `labels`), read by prometheus_client."""
    for got, v in oracle(text)[name]:
        if got.get("model_name", model) == model and all(got.get(k) == x for k, x in labels.items()):
            return v
    raise AssertionError(f"{name}{{model_name={model}, {labels}}} not in the exposition:\n{text}")


async def ask(url: str, model: str, content: str = PROMPT) -> None:
    status, _, body = await raw_post(
        url, {"model": model, "messages": [{"role": "user", "content": content}]}
    )
    assert status == 200, body


async def until(url: str, ok: Any, limit: float = 10.0) -> str:
    """Poll /metrics until `ok(text)`; the text that satisfied it."""
    deadline = time.monotonic() + limit
    text = ""
    while time.monotonic() < deadline:
        text = (await metrics_text(url))[1]
        if ok(text):
            return text
        await asyncio.sleep(0.01)
    raise AssertionError(f"never so within {limit} s; the last exposition:\n{text}")


async def test_running_waiting_and_kv_exact_then_the_counters() -> None:
    async with running_sim({"slow": SLOW}) as url:
        ctype, idle = await metrics_text(url)
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        assert sample(idle, "vllm:num_requests_running") == 0.0  # the model's series from the start
        tasks = [asyncio.create_task(ask(url, "slow")) for _ in range(10)]
        busy = await until(
            url,
            lambda t: sample(t, "vllm:num_requests_running") + sample(t, "vllm:num_requests_waiting") == 10,
        )
        # capacity 4: four in service, six queued; each holds its prompt and its whole answer
        assert sample(busy, "vllm:num_requests_running") == 4, busy
        assert sample(busy, "vllm:num_requests_waiting") == 6, busy
        assert sample(busy, "vllm:kv_cache_usage_perc") == 4 * (PROMPT_TOKENS + OUTPUT) / KV, busy
        await asyncio.gather(*tasks)
        done = await until(url, lambda t: sample(t, "vllm:num_requests_running") == 0)
    assert sample(done, "vllm:kv_cache_usage_perc") == 0.0, done
    assert sample(done, "vllm:prompt_tokens_total") == 10 * PROMPT_TOKENS, done
    assert sample(done, "vllm:generation_tokens_total") == 10 * OUTPUT, done
    assert sample(done, "vllm:prefix_cache_queries_total") == 0.0  # no prefix cache: no queries
    # three waves of 0.6 s: TTFT 0.6, 1.2 and 1.8 s from arrival; queued 0, 0.6 and 1.2 s
    ttft = "vllm:time_to_first_token_seconds_bucket"
    assert (sample(done, ttft, le="0.5"), sample(done, ttft, le="0.75")) == (0, 4), done
    assert (sample(done, ttft, le="1.0"), sample(done, ttft, le="2.5")) == (4, 10), done
    queue = "vllm:request_queue_time_seconds_bucket"
    assert [sample(done, queue, le=le) for le in ("0.3", "0.5", "0.8", "1.0", "1.5")] == [4, 4, 8, 8, 10], (
        done
    )
    assert sample(done, "vllm:time_to_first_token_seconds_count") == 10


async def test_prefix_cache_queries_and_hits_in_tokens() -> None:
    text = "a" * 64 * 4  # 4 blocks of 16 tokens
    async with running_sim({"cached": CACHED}) as url:
        await ask(url, "cached", text)
        await ask(url, "cached", text)
        got = (await metrics_text(url))[1]
    assert sample(got, "vllm:prefix_cache_queries_total", "cached") == 128, got
    assert sample(got, "vllm:prefix_cache_hits_total", "cached") == 64, got


async def test_read_back_as_a_vllm_engine() -> None:
    async with running_sim({"cached": CACHED, "slow": SLOW}) as url:
        before = parse((await metrics_text(url))[1].encode())
        t0 = time.monotonic()
        await ask(url, "cached", "a" * 256)
        await ask(url, "cached", "a" * 256)
        now = parse((await metrics_text(url))[1].encode())
        t1 = time.monotonic()
    assert isinstance(now, Exposition) and now.bad_lines == 0, now
    r = read(Scrape(t1, (Part(url, now),)), Scrape(t0, (Part(url, before),)))
    assert r.engine == "vllm" and r.missing == ("spec_acceptance",), r
    assert set(r.models) == {"cached", "slow"}, r.models
    assert r.models["cached"].prefix_hit_rate == 0.5, r.models["cached"]
    assert r.models["cached"].preemptions == 0.0
    assert r.models["slow"].prefix_hit_rate is None  # no queries: no ratio, not 0


async def test_llamacpp_names_with_metrics_format() -> None:
    async with running_sim({"slow": SLOW}, SimLimits(metrics_format="llamacpp")) as url:
        tasks = [asyncio.create_task(ask(url, "slow")) for _ in range(6)]
        busy = await until(url, lambda t: "llamacpp:requests_deferred 2" in t)
        await asyncio.gather(*tasks)
        done = (await metrics_text(url))[1]
    assert "llamacpp:requests_processing 4" in busy and "vllm:" not in busy, busy
    e = parse(done.encode())
    assert isinstance(e, Exposition)
    r = read(Scrape(1.0, (Part(url, e),)))
    assert r.engine == "llamacpp" and r.total.running == 0.0, r
    assert sample(done, "llamacpp:tokens_predicted_total") == 6 * OUTPUT, done
    assert sample(done, "llamacpp:prompt_tokens_total") == 6 * PROMPT_TOKENS, done
