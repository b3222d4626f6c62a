"""Helpers shared by the tests: the fixtures, and an independent reading of them through
prometheus_client's parser (the oracle the expected values are computed from); what each
engine's figures should be read from (`EXPECTED`, `expected_value`); a small vLLM exposition
written to order (`vllm`)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

FIXTURES = Path(__file__).resolve().parent / "expositions"

Oracle = dict[str, list[tuple[dict[str, str], float]]]


def fixture_text(name: str) -> str:
    return (FIXTURES / f"{name}.prom").read_text()


def oracle(text: str) -> Oracle:
    """Every sample by its name as written, read by prometheus_client (not by the parser under test)."""
    out: Oracle = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((dict(s.labels), float(s.value)))
    return out


def halved(text: str) -> str:
    """The same exposition earlier in its life: every counter and histogram sample at half its
    value, gauges as they are. Rendered from the oracle's reading."""
    lines: list[str] = []
    for fam in text_string_to_metric_families(text):
        growing = fam.type in ("counter", "histogram")
        for s in fam.samples:
            v = float(s.value) / 2 if growing and not s.name.endswith("_created") else float(s.value)
            labels = ",".join(f'{k}="{x}"' for k, x in s.labels.items())
            lines.append(f"{s.name}{{{labels}}} {v!r}" if labels else f"{s.name} {v!r}")
    return "\n".join(lines) + "\n"


def ref_quantile(q: float, cumulative: list[tuple[float, float]]) -> float:
    """The q-quantile of cumulative (bound, count) pairs, linear inside the bucket, written here
    independently of oxconsole.metrics.server.buckets."""
    total = cumulative[-1][1]
    target = q * total
    low_bound, low_count = 0.0, 0.0
    for bound, count in cumulative:
        if count >= target:
            if math.isinf(bound):
                return low_bound
            return low_bound + (bound - low_bound) * (target - low_count) / (count - low_count)
        low_bound, low_count = bound, count
    raise AssertionError("no bucket holds the rank")


def vllm(
    *,
    running: float = 0,
    waiting: float = 0,
    kv: float = 0.0,
    prompt: float = 0,
    generation: float = 0,
    hits: float = 0,
    queries: float = 0,
    preempt: float = 0,
    ttft: tuple[float, ...] = (0, 0, 0, 0),
    model: str = "m",
    engine: str = "0",
) -> str:
    """A small vLLM exposition: TTFT buckets at 0.1, 0.5, 1 s and +Inf (cumulative counts)."""
    lab = f'engine="{engine}",model_name="{model}"'
    lines = [
        f"vllm:num_requests_running{{{lab}}} {running}",
        f"vllm:num_requests_waiting{{{lab}}} {waiting}",
        f"vllm:kv_cache_usage_perc{{{lab}}} {kv}",
        f"vllm:prompt_tokens_total{{{lab}}} {prompt}",
        f"vllm:generation_tokens_total{{{lab}}} {generation}",
        f"vllm:prefix_cache_hits_total{{{lab}}} {hits}",
        f"vllm:prefix_cache_queries_total{{{lab}}} {queries}",
        f"vllm:num_preemptions_total{{{lab}}} {preempt}",
    ]
    for le, c in zip(("0.1", "0.5", "1.0", "+Inf"), ttft, strict=True):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {c}')
    lines.append(f"vllm:time_to_first_token_seconds_count{{{lab}}} {ttft[-1]}")
    return "\n".join(lines) + "\n"


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
