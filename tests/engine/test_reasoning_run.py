"""Reasoning models and cached prompts end to end: a run on the simulator over real HTTP, its
journal's `ttfot_ms`, `reasoning_tokens` and `cached_tokens`, and the summary made of them, each
against what the workload and the simulator's own prefix cache say it must be."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.outcome import RunOutcome
from oxconsole.engine.workers.shardset import LocalShards
from oxconsole.metrics.histogram import DEFAULT_ALPHA, LogHistogram
from oxconsole.sim import start_sim
from oxconsole.sim.answerplan import cache_key
from oxconsole.sim.encoded import CHAT
from oxconsole.sim.prefix import PrefixCache
from oxconsole.workload import Workload, iter_prompts
from tests.support import engine_for, journal
from tests.support.sim import stats_of
from tests.support.workloads import load_workload


def expected_cached(w: Workload) -> dict[str, int]:
    """Each prompt's cached tokens as the simulator's cache finds them, prompts sent in order."""
    block = w.sim["r"].cache_block
    cache = PrefixCache(block)
    return {p.id: cache.serve(cache_key({"messages": p.messages}, CHAT))[0] for p in iter_prompts(w)}


async def run(w: Workload) -> RunOutcome:
    """Run `w` on a simulator of its own on this loop; `LATE["first"]` is then the most its first
    writes were late (ms), which the client cannot be blamed for on a loaded machine."""
    e = engine_for(w)
    runner, url = await start_sim(profiles=w.sim, seed=w.run.seed)
    assert isinstance(e.shards, LocalShards), e.shards  # a run in this process
    e.shards.endpoint_urls["default"] = url
    try:
        out = await e.run()
        LATE["first"] = (await stats_of(url))["lateness_ms"]["first"]["max"]
        return out
    finally:
        await runner.cleanup()


LATE: dict[str, float] = {}


def gap_tolerance() -> float:
    """2 ms, and what the simulator's own writes were late by."""
    return 2.0 + LATE["first"]


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "think_tags"])
@pytest.mark.timing  # TTFOT - TTFT against the simulator's exact figure
async def test_ttfot_reasoning_and_cached_tokens_in_journal_and_summary(tmp_path: Path, field: str) -> None:
    w = load_workload("reasoning", tmp_path, {"sim.models.r.reasoning_field": field})
    out = await run(w)
    recs = journal(w)
    prof = w.sim["r"]
    assert [r["status"] for r in recs] == ["ok"] * w.run.requests, recs
    # TTFOT - TTFT = reasoning tokens / tokens_per_s (the simulator's schedule), at p50 within 2 ms
    gaps = [r["ttfot_ms"] - r["ttft_ms"] for r in recs]
    want_gap = prof.reasoning_tokens / prof.tokens_per_s * 1000
    assert abs(median(gaps) - want_gap) <= gap_tolerance(), (gaps, want_gap, LATE)
    assert all(r["reasoning_tokens"] == prof.reasoning_tokens for r in recs), recs
    assert all(r["output_tokens"] == prof.reasoning_tokens + prof.output_tokens for r in recs), recs
    assert all(r["tokens_source"] == "usage" for r in recs), recs
    cached = expected_cached(w)
    assert {r["id"]: r["cached_tokens"] for r in recs} == cached
    assert sum(cached.values()) > 0, cached  # the prefix is cached from the second prompt on
    s = out.summary
    total_in = sum(r["input_tokens"] for r in recs)
    assert s["tokens"]["cached"] == sum(cached.values()), s["tokens"]
    assert s["tokens"]["reasoning"] == sum(r["reasoning_tokens"] for r in recs), s["tokens"]
    assert s["cache_hit_rate"] == round(sum(cached.values()) / total_in, 4), s
    assert s["models"]["r"]["cache_hit_rate"] == s["cache_hit_rate"], s["models"]["r"]
    assert s["models"]["r"]["tokens"]["cached"] == s["tokens"]["cached"]
    assert s["phases"][-1]["tokens"] == {
        "reasoning": s["tokens"]["reasoning"],
        "cached": s["tokens"]["cached"],
    }
    # the summary's percentiles are the log histogram's of the journal's values
    h = LogHistogram()
    for r in recs:
        h.record(r["ttfot_ms"])
    # (a bucket apart at most: the journal's values are rounded to 3 decimals)
    got, want = s["ttfot_ms"]["p50"], h.summary()["p50"]
    assert abs(got - want) <= 2 * DEFAULT_ALPHA * abs(want) + 0.002, (s["ttfot_ms"], h.summary())
    # cost: cached input at the cached price, reasoning as output; the journal's sum is the summary's
    m = w.models[0]
    for r in recs:
        c = r["cached_tokens"]
        want = ((r["input_tokens"] - c) * m.price_per_1m_input + c * 0.5 + r["output_tokens"] * 8.0) / 1e6
        assert r["cost"] == pytest.approx(want, rel=1e-12), (r, want)
    assert s["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs), abs=1e-9), s["cost"]
    plan = w.plans["cached"].default
    want_plan = sum(
        (
            (r["input_tokens"] - r["cached_tokens"]) * plan.per_1m_input
            + r["cached_tokens"] * (plan.per_1m_cached_input or 0.0)
            + r["output_tokens"] * plan.per_1m_output
        )
        / 1e6
        for r in recs
    )
    assert s["cost"]["plans"]["cached"]["total"] == pytest.approx(want_plan, abs=1e-9), s["cost"]


async def test_plain_model_ttfot_equals_ttft_and_no_new_keys(tmp_path: Path) -> None:
    sets: dict[str, Any] = {
        "sim.models.r.reasoning_tokens": 0,
        "sim.models.r.prefix_cache": False,
        "models.0.price_per_1m_cached_input": None,
    }
    w = load_workload("reasoning", tmp_path, sets)
    out = await run(w)
    recs = journal(w)
    assert all(r["ttfot_ms"] == r["ttft_ms"] for r in recs), recs
    for key in ("reasoning_tokens", "cached_tokens", "tool_calls"):
        assert not any(key in r for r in recs), (key, recs[0])
    s = out.summary
    assert set(s["tokens"]) == {"input", "output"}, s["tokens"]
    assert "cache_hit_rate" not in s, s
    assert s["ttfot_ms"] == s["ttft_ms"], (s["ttfot_ms"], s["ttft_ms"])


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.timing  # TTFOT - TTFT against the simulator's exact figure
async def test_responses_api_gives_the_same_figures(tmp_path: Path, stream: bool) -> None:
    w = load_workload("reasoning", tmp_path, {"models.0.api": "responses", "run.stream": stream})
    out = await run(w)
    recs = journal(w)
    prof = w.sim["r"]
    assert [r["status"] for r in recs] == ["ok"] * w.run.requests, recs
    assert all(r["reasoning_tokens"] == prof.reasoning_tokens for r in recs), recs
    assert all(r["output_tokens"] == prof.reasoning_tokens + prof.output_tokens for r in recs), recs
    assert {r["id"]: r["cached_tokens"] for r in recs} == expected_cached_responses(w)
    assert out.summary["tokens"]["cached"] == sum(r["cached_tokens"] for r in recs), out.summary["tokens"]
    if stream:
        gaps = [r["ttfot_ms"] - r["ttft_ms"] for r in recs]
        want_gap = prof.reasoning_tokens / prof.tokens_per_s * 1000
        assert abs(median(gaps) - want_gap) <= gap_tolerance(), (gaps, want_gap, LATE)
    else:
        assert not any("ttft_ms" in r or "ttfot_ms" in r for r in recs), recs[0]


def expected_cached_responses(w: Workload) -> dict[str, int]:
    """As `expected_cached`, for prompts sent as Responses input items."""
    from oxconsole.engine.send.apis import response_input
    from oxconsole.sim.encoded import RESPONSES

    cache = PrefixCache(w.sim["r"].cache_block)
    return {
        p.id: cache.serve(cache_key({"input": response_input(p.messages)}, RESPONSES))[0]
        for p in iter_prompts(w)
    }


async def test_slo_ttfot_judges_the_first_answer_token(tmp_path: Path) -> None:
    """A threshold between TTFT and TTFOT: met as `ttft`, missed as `ttfot`."""
    long: dict[str, Any] = {"sim.models.r.reasoning_tokens": 40}  # 200 ms of reasoning
    doc = load_workload("reasoning", tmp_path, long)
    prof = doc.sim["r"]
    between = prof.ttft + prof.reasoning_tokens / prof.tokens_per_s / 2
    verdicts = {}
    for key in ("ttft", "ttfot"):
        folder = tmp_path / key
        folder.mkdir()
        sets = {**long, f"slo.{key}": f"{between * 1000:g}ms", "slo.target": 0.5}
        w = load_workload("reasoning", folder, sets)
        out = await run(w)
        verdicts[key] = ({r["slo_ok"] for r in journal(w)}, out.summary["goodput"]["fraction"])
    assert verdicts == {"ttft": ({True}, 1.0), "ttfot": ({False}, 0.0)}, (verdicts, between)


async def test_workers_carry_the_new_fields_and_figures(tmp_path: Path) -> None:
    from tests.support import run as run_anywhere

    w = load_workload(
        "reasoning",
        tmp_path,
        {"run.workers": 2, "run.concurrency": 2, "run.requests": 8, "prompts.synthetic.count": 8},
    )
    out = await run_anywhere(w, sim="process")
    recs = journal(w)
    assert len(recs) == 8 and all(r["status"] == "ok" for r in recs), recs
    assert all(r["reasoning_tokens"] == w.sim["r"].reasoning_tokens and "ttfot_ms" in r for r in recs), recs
    s = out.summary
    assert s["tokens"]["reasoning"] == sum(r["reasoning_tokens"] for r in recs), s["tokens"]
    assert s["tokens"]["cached"] == sum(r["cached_tokens"] for r in recs) > 0, (s["tokens"], recs)
    assert s["cache_hit_rate"] == round(s["tokens"]["cached"] / s["tokens"]["input"], 4), s
    assert s["ttfot_ms"]["p50"] is not None and s["ttfot_ms"]["p50"] > s["ttft_ms"]["p50"], s
    assert s["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs), abs=1e-9), s["cost"]


@pytest.mark.parametrize("field", ["reasoning_content", "think_tags"])
async def test_without_usage_reasoning_is_estimated_and_marked(tmp_path: Path, field: str) -> None:
    w = load_workload(
        "reasoning", tmp_path, {"sim.models.r.usage": False, "sim.models.r.reasoning_field": field}
    )
    await run(w)
    recs = journal(w)
    prof = w.sim["r"]
    # one token a chunk, as the simulator (and servers) stream them
    assert [r["reasoning_tokens"] for r in recs] == [prof.reasoning_tokens] * len(recs), recs
    assert {r["tokens_source"] for r in recs} == {"estimate"}, recs
    assert all("cached_tokens" not in r for r in recs), recs  # no usage, no cache report


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reasoning-cached.toml"


@pytest.mark.timing  # TTFOT - TTFT against the simulator's exact figure
async def test_the_example_runs_on_the_simulator_with_its_exact_figures(tmp_path: Path) -> None:
    from oxconsole.workload import load_workload as load_file

    sets = ["run.requests=16", "prompts.synthetic.count=16", f'output.results="{tmp_path / "r.jsonl"}"']
    w = load_file(EXAMPLE, sets)
    await run(w)
    recs = journal(w)
    assert len(recs) == 16 and {r["status"] for r in recs} == {"ok"}, recs
    for r in recs:
        prof = w.sim[r["model"]]
        gap = r["ttfot_ms"] - r["ttft_ms"]
        want = prof.reasoning_tokens / prof.tokens_per_s * 1000
        assert abs(gap - want) <= 25.0, (r, want)  # one request; the 2 ms target is at p50
        cached = r.get("cached_tokens", 0)
        prefill = (r["input_tokens"] - cached) / prof.prefill_tokens_per_s * 1000
        assert r["ttft_ms"] >= prof.ttft * 1000 + prefill - 2.0, (r, prefill)
    assert any(r.get("cached_tokens") for r in recs if r["model"] == "cached"), recs
    assert not any("cached_tokens" in r for r in recs if r["model"] == "uncached"), recs
