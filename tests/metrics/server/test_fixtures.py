"""Each engine's fixture is recognised and read into the vocabulary; every expected value is
computed here from the fixture's own numbers (read through prometheus_client), never copied.

The scrape before is the fixture with its counters and histograms at half their values, so over
a span of SPAN seconds a counter grew by half its value, and a histogram's growth has the
fixture's own distribution."""

from __future__ import annotations

import math
from typing import Any

import pytest

from oxconsole.metrics.server.parse import parse
from oxconsole.metrics.server.scrapes import Part, Percentiles, Scrape, read, read_gpus
from tests.support.expositions import fixture_text, halved, oracle, ref_quantile

SPAN = 4.0

# What each engine's figures should be read from, written out again here (from the engines'
# documentation, NOTES.md) rather than taken from oxconsole.metrics.server.vocabulary.
#   ("gauge", name, {label: value}, "sum" | "mean")   ("rate", name)   ("delta", name)
#   ("ratio", (numerators), (denominators))           ("hist", name, to_ms)   ("none",): exposed, no value
EXPECTED: dict[str, dict[str, tuple[Any, ...]]] = {
    "vllm": {
        "running": ("gauge", "vllm:num_requests_running", {}, "sum"),
        "waiting": ("gauge", "vllm:num_requests_waiting", {}, "sum"),
        "kv_usage": ("gauge", "vllm:kv_cache_usage_perc", {}, "mean"),
        "prefix_hit_rate": ("ratio", ("vllm:prefix_cache_hits_total",), ("vllm:prefix_cache_queries_total",)),
        "preemptions": ("delta", "vllm:num_preemptions_total"),
        "prompt_tokens_per_s": ("rate", "vllm:prompt_tokens_total"),
        "generation_tokens_per_s": ("rate", "vllm:generation_tokens_total"),
        "server_ttft_ms": ("hist", "vllm:time_to_first_token_seconds", 1000.0),
        "server_queue_ms": ("hist", "vllm:request_queue_time_seconds", 1000.0),
        "spec_acceptance": (
            "ratio",
            ("vllm:spec_decode_num_accepted_tokens_total",),
            ("vllm:spec_decode_num_draft_tokens_total",),
        ),
    },
    "vllm-old": {
        "running": ("gauge", "vllm:num_requests_running", {}, "sum"),
        "waiting": ("gauge", "vllm:num_requests_waiting", {}, "sum"),
        "kv_usage": ("gauge", "vllm:gpu_cache_usage_perc", {}, "mean"),
        "prefix_hit_rate": ("none",),  # the v0 gauge says -1: prefix caching is off
        "preemptions": ("delta", "vllm:num_preemptions_total"),
        "prompt_tokens_per_s": ("rate", "vllm:prompt_tokens_total"),
        "generation_tokens_per_s": ("rate", "vllm:generation_tokens_total"),
        "server_ttft_ms": ("hist", "vllm:time_to_first_token_seconds", 1000.0),
        "server_queue_ms": ("hist", "vllm:request_queue_time_seconds", 1000.0),
    },
    "sglang": {
        "running": ("gauge", "sglang:num_running_reqs", {}, "sum"),
        "waiting": ("gauge", "sglang:num_queue_reqs", {}, "sum"),
        "kv_usage": ("gauge", "sglang:token_usage", {}, "mean"),
        "prefix_hit_rate": ("ratio", ("sglang:cached_tokens_total",), ("sglang:prompt_tokens_total",)),
        "preemptions": ("delta", "sglang:num_retracted_requests_total"),
        "prompt_tokens_per_s": ("rate", "sglang:prompt_tokens_total"),
        "generation_tokens_per_s": ("rate", "sglang:generation_tokens_total"),
        "server_ttft_ms": ("hist", "sglang:time_to_first_token_seconds", 1000.0),
        "server_queue_ms": ("hist", "sglang:queue_time_seconds", 1000.0),
        "spec_acceptance": ("none",),  # written 0.0 with speculative decoding off
    },
    "tgi": {
        "running": ("gauge", "tgi_batch_current_size", {}, "sum"),
        "waiting": ("gauge", "tgi_queue_size", {}, "sum"),
        "prompt_tokens_per_s": ("rate", "tgi_request_input_length_sum"),
        "generation_tokens_per_s": ("rate", "tgi_request_generated_tokens_sum"),
        "server_queue_ms": ("hist", "tgi_request_queue_duration", 1000.0),
    },
    "llamacpp": {
        "running": ("gauge", "llamacpp:requests_processing", {}, "sum"),
        "waiting": ("gauge", "llamacpp:requests_deferred", {}, "sum"),
        "prefix_hit_rate": (
            "ratio",
            ("llamacpp:prompt_tokens_cached_total",),
            ("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total"),
        ),
        "prompt_tokens_per_s": ("rate", "llamacpp:prompt_tokens_total"),
        "generation_tokens_per_s": ("rate", "llamacpp:tokens_predicted_total"),
        "spec_acceptance": (
            "ratio",
            ("llamacpp:spec_decode_num_accepted_tokens_total",),
            ("llamacpp:spec_decode_num_draft_tokens_total",),
        ),
    },
    "trtllm": {
        "running": ("gauge", "trtllm_num_requests_running", {}, "sum"),
        "waiting": ("gauge", "trtllm_num_requests_waiting", {}, "sum"),
        "kv_usage": ("gauge", "trtllm_kv_cache_utilization", {}, "mean"),
        "prefix_hit_rate": ("ratio", ("trtllm_prompt_cached_tokens_total",), ("trtllm_prompt_tokens_total",)),
        "prompt_tokens_per_s": ("rate", "trtllm_prompt_tokens_total"),
        "generation_tokens_per_s": ("rate", "trtllm_generation_tokens_total"),
        "server_ttft_ms": ("hist", "trtllm_time_to_first_token_seconds", 1000.0),
        "server_queue_ms": ("hist", "trtllm_request_queue_time_seconds", 1000.0),
        "spec_acceptance": (
            "ratio",
            ("trtllm_spec_decode_num_accepted_tokens_total",),
            ("trtllm_spec_decode_num_draft_tokens_total",),
        ),
    },
    "triton": {
        "running": ("gauge", "nv_trt_llm_request_metrics", {"request_type": "scheduled"}, "sum"),
        "waiting": ("gauge", "nv_trt_llm_request_metrics", {"request_type": "waiting"}, "sum"),
        "kv_usage": (
            "gauge",
            "nv_trt_llm_kv_cache_block_metrics",
            {"kv_cache_block_type": "fraction"},
            "mean",
        ),
        "server_ttft_ms": ("hist", "nv_inference_first_response_histogram_ms", 1.0),
    },
}

ENGINE = {"vllm-old": "vllm"}

ALL_FIGURES = (
    "running",
    "waiting",
    "kv_usage",
    "prefix_hit_rate",
    "preemptions",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "server_ttft_ms",
    "server_queue_ms",
    "spec_acceptance",
)


def expected_value(spec: tuple[Any, ...], samples: dict[str, list[tuple[dict[str, str], float]]]) -> Any:
    kind = spec[0]
    if kind == "none":
        return None
    if kind == "gauge":
        _, name, match, how = spec
        vs = [v for labels, v in samples[name] if all(labels.get(k) == x for k, x in match.items())]
        return sum(vs) if how == "sum" else sum(vs) / len(vs)
    if kind == "rate":
        return sum(v for _, v in samples[spec[1]]) / 2 / SPAN
    if kind == "delta":
        return sum(v for _, v in samples[spec[1]]) / 2
    if kind == "ratio":
        top = sum(v for n in spec[1] for _, v in samples[n])
        bottom = sum(v for n in spec[2] for _, v in samples[n])
        return top / bottom
    if kind == "hist":
        _, name, to_ms = spec
        by_bound: dict[float, float] = {}
        for labels, v in samples[name + "_bucket"]:
            b = float(labels["le"])
            by_bound[b] = by_bound.get(b, 0.0) + v
        cumulative = sorted(by_bound.items())
        return tuple(ref_quantile(q, cumulative) * to_ms for q in (0.5, 0.9, 0.99))
    raise AssertionError(kind)


def reading_of(name: str) -> Any:
    text = fixture_text(name)
    before = Scrape(100.0, (Part("http://h:8000/metrics", parse(halved(text).encode())),))
    now = Scrape(100.0 + SPAN, (Part("http://h:8000/metrics", parse(text.encode())),))
    return read(now, before)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_recognised(name: str) -> None:
    assert reading_of(name).engine == ENGINE.get(name, name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_figures(name: str) -> None:
    reading = reading_of(name)
    samples = oracle(fixture_text(name))
    for figure, spec in EXPECTED[name].items():
        want = expected_value(spec, samples)
        got = getattr(reading.total, figure)
        if want is None:
            assert got is None, figure
        elif isinstance(want, tuple):
            assert isinstance(got, Percentiles), figure
            assert (got.p50, got.p90, got.p99) == pytest.approx(want, rel=1e-9), figure
        else:
            assert got == pytest.approx(want, rel=1e-9), figure


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_missing_figures(name: str) -> None:
    want = tuple(f for f in ALL_FIGURES if f not in EXPECTED[name])
    assert reading_of(name).missing == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_model_split_matches_total(name: str) -> None:
    """A fixture serves one model (Triton: its TensorRT-LLM step): the per-model figures are the
    total's, under the model's label."""
    reading = reading_of(name)
    samples = oracle(fixture_text(name))
    labelled = {
        labels.get("model_name") or labels.get("model")
        for series in samples.values()
        for labels, _ in series
        if labels.get("model_name") or labels.get("model")
    }
    if not labelled:
        assert reading.models == {}
        return
    assert set(reading.models) <= labelled
    if len(reading.models) == 1:
        (only,) = reading.models.values()
        assert only == reading.total


def test_dcgm_fixture_per_gpu() -> None:
    text = fixture_text("dcgm")
    gpus = read_gpus(Scrape(0.0, (Part("http://h:9400/metrics", parse(text.encode())),)))
    samples = oracle(text)
    uuids = {labels["UUID"] for labels, _ in samples["DCGM_FI_DEV_GPU_UTIL"]}
    assert set(gpus) == uuids
    for figure, metric in (
        ("gpu_util", "DCGM_FI_DEV_GPU_UTIL"),
        ("gpu_mem_used_mb", "DCGM_FI_DEV_FB_USED"),
        ("gpu_power_w", "DCGM_FI_DEV_POWER_USAGE"),
    ):
        for labels, v in samples[metric]:
            assert getattr(gpus[labels["UUID"]], figure) == pytest.approx(v)


def test_dcgm_is_not_an_endpoint_engine() -> None:
    """DCGM is telemetry, read with read_gpus; as an endpoint's answer it is an unknown engine."""
    reading = read(Scrape(0.0, (Part("u", parse(fixture_text("dcgm").encode())),)))
    assert reading.engine == "unknown"
    assert reading.total.as_dict() == {}


def test_first_scrape_reads_gauges_only() -> None:
    text = fixture_text("vllm")
    reading = read(Scrape(0.0, (Part("u", parse(text.encode())),)))
    samples = oracle(text)
    assert reading.span_s is None
    assert reading.total.running == sum(v for _, v in samples["vllm:num_requests_running"])
    assert reading.total.prompt_tokens_per_s is None
    assert reading.total.server_ttft_ms is None
    assert reading.missing == ()


def test_as_dict_uses_the_series_keys() -> None:
    d = reading_of("vllm").total.as_dict()
    assert set(d) == set(ALL_FIGURES)
    ttft = d["server_ttft_ms"]
    assert isinstance(ttft, dict) and set(ttft) == {"p50", "p90", "p99"}
    assert all(math.isfinite(v) for v in ttft.values())
