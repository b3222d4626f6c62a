"""Every inference engine's metric names, read into one vocabulary of figures.

Why this module exists: vLLM, SGLang, TGI, llama.cpp, TensorRT-LLM and Triton each name their
`/metrics` differently (and rename them between versions); the console, the server series and the
summary speak one vocabulary (`running`, `waiting`, `kv_usage`, ...). This is the one table that
says, for each engine and each figure, which series to read, how (a gauge, a counter's growth,
a ratio of growths, percentiles of a histogram's growth) and in which unit. A figure is a list of
sources tried in order: the first whose series the server exposes is read (a renamed metric is
one more source, not a branch in the reading code); a figure none of whose sources is exposed is
`missing`, never estimated from something else. The names and where each was found are in
docs/server.md.

Nothing here does I/O; `scrapes.py` applies the table to two scrapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = [
    "DCGM",
    "ENGINES",
    "FIGURES",
    "GPU_FIGURES",
    "MODEL_LABELS",
    "WANTED",
    "CounterDelta",
    "CounterRate",
    "CounterRatio",
    "Engine",
    "FigureName",
    "Gauge",
    "GpuFigureName",
    "Histogram",
    "Profile",
    "ProfileName",
    "Source",
    "detect_engine",
    "profile",
    "source_names",
]

Engine = Literal["vllm", "sglang", "tgi", "llamacpp", "trtllm", "triton", "unknown"]
"""An endpoint's engine, as the contract names it."""

ProfileName = Literal["vllm", "sglang", "tgi", "llamacpp", "trtllm", "triton", "dcgm"]
"""A row of the table: the six engines and the GPU telemetry."""

FigureName = Literal[
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
]
GpuFigureName = Literal["gpu_util", "gpu_mem_used_mb", "gpu_power_w"]

FIGURES: Final[tuple[FigureName, ...]] = get_args(FigureName)
"""The contract's figures, in the order the server series and the summary write them."""

GPU_FIGURES: Final[tuple[GpuFigureName, ...]] = get_args(GpuFigureName)

MODEL_LABELS: Final = ("model_name", "model")
"""The labels that split an engine's series per model (the contract's), first present wins."""

S_TO_MS: Final = 1000.0
"""Histograms in seconds (every engine but Triton) are read in milliseconds."""


@dataclass(frozen=True, slots=True)
class Gauge:
    """The value now. Series of one key (a model, a GPU) are summed, or averaged when `combine`
    is "mean" (fractions: two replicas at 0.5 KV usage are at 0.5, not 1.0). `match` keeps only
    the series carrying those labels (Triton's `request_type="waiting"`). A value outside
    `bounds`, or equal to `unused` (what an engine writes when the feature is off), is dropped."""

    metric: str
    combine: Literal["sum", "mean"] = "sum"
    scale: float = 1.0
    match: tuple[tuple[str, str], ...] = ()
    bounds: tuple[float, float] | None = None
    unused: float | None = None


@dataclass(frozen=True, slots=True)
class CounterRate:
    """Growth between the two scrapes per second of the span (a restart's growth is its new value)."""

    metric: str


@dataclass(frozen=True, slots=True)
class CounterDelta:
    """Growth between the two scrapes, a count over the span."""

    metric: str


@dataclass(frozen=True, slots=True)
class CounterRatio:
    """Summed growth of `numerator` over summed growth of `denominator` (absent when the
    denominator did not grow: nothing happened, which is not a ratio of 0)."""

    numerator: tuple[str, ...]
    denominator: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Histogram:
    """p50 / p90 / p99 of the observations made during the span (the buckets' growth), times
    `scale` (to milliseconds)."""

    metric: str
    scale: float = S_TO_MS


Source = Gauge | CounterRate | CounterDelta | CounterRatio | Histogram

Figures = Mapping[str, tuple[Source, ...]]


@dataclass(frozen=True, slots=True)
class Profile:
    """One engine: the prefix that recognises it, the labels that split its series, its figures."""

    engine: ProfileName
    prefix: str
    split: tuple[str, ...]
    figures: Figures


FRACTION = (0.0, 1.0)

ENGINES: Final[tuple[Profile, ...]] = (
    Profile(
        "vllm",
        "vllm:",
        MODEL_LABELS,
        {
            "running": (Gauge("vllm:num_requests_running"),),
            "waiting": (Gauge("vllm:num_requests_waiting"),),
            "kv_usage": (
                Gauge("vllm:kv_cache_usage_perc", "mean", bounds=FRACTION),
                # the name until 0.9 (deprecated then, hidden in 0.10, removed in late 2025)
                Gauge("vllm:gpu_cache_usage_perc", "mean", bounds=FRACTION),
            ),
            "prefix_hit_rate": (
                CounterRatio(("vllm:prefix_cache_hits_total",), ("vllm:prefix_cache_queries_total",)),
                CounterRatio(("vllm:gpu_prefix_cache_hits_total",), ("vllm:gpu_prefix_cache_queries_total",)),
                # the v0 engine's own rate (its window, not the span); -1 when caching is off
                Gauge("vllm:gpu_prefix_cache_hit_rate", "mean", bounds=FRACTION),
            ),
            "preemptions": (CounterDelta("vllm:num_preemptions_total"),),
            "prompt_tokens_per_s": (CounterRate("vllm:prompt_tokens_total"),),
            "generation_tokens_per_s": (CounterRate("vllm:generation_tokens_total"),),
            "server_ttft_ms": (Histogram("vllm:time_to_first_token_seconds"),),
            "server_queue_ms": (Histogram("vllm:request_queue_time_seconds"),),
            "spec_acceptance": (
                CounterRatio(
                    ("vllm:spec_decode_num_accepted_tokens_total",),
                    ("vllm:spec_decode_num_draft_tokens_total",),
                ),
            ),
        },
    ),
    Profile(
        "sglang",
        "sglang:",
        MODEL_LABELS,
        {
            "running": (Gauge("sglang:num_running_reqs"),),
            "waiting": (Gauge("sglang:num_queue_reqs"),),
            "kv_usage": (Gauge("sglang:token_usage", "mean", bounds=FRACTION),),
            "prefix_hit_rate": (
                # prompt_tokens counts every prompt token, cached_tokens the part served from the cache
                CounterRatio(("sglang:cached_tokens_total",), ("sglang:prompt_tokens_total",)),
                Gauge("sglang:cache_hit_rate", "mean", bounds=FRACTION),
            ),
            # SGLang calls a preemption a retraction
            "preemptions": (CounterDelta("sglang:num_retracted_requests_total"),),
            "prompt_tokens_per_s": (CounterRate("sglang:prompt_tokens_total"),),
            "generation_tokens_per_s": (CounterRate("sglang:generation_tokens_total"),),
            "server_ttft_ms": (Histogram("sglang:time_to_first_token_seconds"),),
            "server_queue_ms": (Histogram("sglang:queue_time_seconds"),),
            # a gauge of the last batches, written 0.0 whether or not speculative decoding is on
            "spec_acceptance": (Gauge("sglang:spec_accept_rate", "mean", bounds=FRACTION, unused=0.0),),
        },
    ),
    Profile(
        "tgi",
        "tgi_",
        MODEL_LABELS,
        {
            "running": (Gauge("tgi_batch_current_size"),),
            "waiting": (Gauge("tgi_queue_size"),),
            # a histogram's _sum is a counter: the tokens of the requests recorded during the span
            "prompt_tokens_per_s": (CounterRate("tgi_request_input_length_sum"),),
            "generation_tokens_per_s": (CounterRate("tgi_request_generated_tokens_sum"),),
            "server_queue_ms": (Histogram("tgi_request_queue_duration"),),
        },
    ),
    Profile(
        "llamacpp",
        "llamacpp:",
        MODEL_LABELS,
        {
            "running": (Gauge("llamacpp:requests_processing"),),
            "waiting": (Gauge("llamacpp:requests_deferred"),),
            # builds before mid-2025 only; current servers expose no KV usage
            "kv_usage": (Gauge("llamacpp:kv_cache_usage_ratio", "mean", bounds=FRACTION),),
            "prefix_hit_rate": (
                # prompt_tokens_total excludes the cached tokens, so the queries are both
                CounterRatio(
                    ("llamacpp:prompt_tokens_cached_total",),
                    ("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total"),
                ),
            ),
            "prompt_tokens_per_s": (CounterRate("llamacpp:prompt_tokens_total"),),
            "generation_tokens_per_s": (CounterRate("llamacpp:tokens_predicted_total"),),
            "spec_acceptance": (
                CounterRatio(
                    ("llamacpp:spec_decode_num_accepted_tokens_total",),
                    ("llamacpp:spec_decode_num_draft_tokens_total",),
                ),
            ),
        },
    ),
    Profile(
        "trtllm",
        "trtllm_",
        MODEL_LABELS,
        {
            "running": (Gauge("trtllm_num_requests_running"),),
            "waiting": (Gauge("trtllm_num_requests_waiting"),),
            "kv_usage": (Gauge("trtllm_kv_cache_utilization", "mean", bounds=FRACTION),),
            "prefix_hit_rate": (
                CounterRatio(("trtllm_prompt_cached_tokens_total",), ("trtllm_prompt_tokens_total",)),
                CounterRatio(
                    ("trtllm_kv_cache_reused_blocks_total",),
                    ("trtllm_kv_cache_reused_blocks_total", "trtllm_kv_cache_missed_blocks_total"),
                ),
            ),
            "prompt_tokens_per_s": (CounterRate("trtllm_prompt_tokens_total"),),
            "generation_tokens_per_s": (CounterRate("trtllm_generation_tokens_total"),),
            "server_ttft_ms": (Histogram("trtllm_time_to_first_token_seconds"),),
            "server_queue_ms": (Histogram("trtllm_request_queue_time_seconds"),),
            "spec_acceptance": (
                CounterRatio(
                    ("trtllm_spec_decode_num_accepted_tokens_total",),
                    ("trtllm_spec_decode_num_draft_tokens_total",),
                ),
            ),
        },
    ),
    Profile(
        "triton",
        "nv_inference_",
        MODEL_LABELS,
        {
            # the TensorRT-LLM backend's gauges; plain Triton has no count of requests executing
            "running": (Gauge("nv_trt_llm_request_metrics", match=(("request_type", "scheduled"),)),),
            "waiting": (
                Gauge("nv_trt_llm_request_metrics", match=(("request_type", "waiting"),)),
                Gauge("nv_inference_pending_request_count"),
            ),
            "kv_usage": (
                Gauge(
                    "nv_trt_llm_kv_cache_block_metrics",
                    "mean",
                    match=(("kv_cache_block_type", "fraction"),),
                    bounds=FRACTION,
                ),
            ),
            # only with --metrics-config histogram_latencies=true; already in milliseconds
            "server_ttft_ms": (Histogram("nv_inference_first_response_histogram_ms", scale=1.0),),
        },
    ),
)
"""The six engines the contract names, in its order (which is also the order of detection)."""

DCGM: Final = Profile(
    "dcgm",
    "DCGM_FI_",
    ("UUID", "uuid", "gpu"),
    {
        "gpu_util": (Gauge("DCGM_FI_DEV_GPU_UTIL"),),  # percent, 0 to 100
        "gpu_mem_used_mb": (Gauge("DCGM_FI_DEV_FB_USED"),),  # MiB, as DCGM counts
        "gpu_power_w": (Gauge("DCGM_FI_DEV_POWER_USAGE"),),
    },
)
"""NVIDIA's DCGM exporter (`[telemetry] dcgm`): per GPU, keyed by its UUID (unique across hosts)."""

_BY_ENGINE: Final[dict[str, Profile]] = {p.engine: p for p in (*ENGINES, DCGM)}


def profile(engine: str) -> Profile | None:
    """The table's row for `engine` ("dcgm" included); None for "unknown"."""
    return _BY_ENGINE.get(engine)


def source_names(source: Source) -> tuple[str, ...]:
    """The series names a source reads (a histogram's buckets)."""
    match source:
        case Gauge(metric=m) | CounterRate(metric=m) | CounterDelta(metric=m):
            return (m,)
        case CounterRatio(numerator=n, denominator=d):
            return tuple(dict.fromkeys((*n, *d)))
        case Histogram(metric=m):
            return (m + "_bucket",)


def _wanted() -> frozenset[str]:
    names: set[str] = set()
    for p in (*ENGINES, DCGM):
        for sources in p.figures.values():
            for s in sources:
                names.update(source_names(s))
    return frozenset(names)


WANTED: Final = _wanted()
"""Every series name the table reads: the parser keeps the labels and values of these only."""


_PREFIXES: Final = tuple(p.prefix for p in ENGINES)


def detect_engine(names: Iterable[str]) -> Engine:
    """The engine whose prefix the exposition's metric names carry, in the contract's order
    (`vllm:` `sglang:` `tgi_` `llamacpp:` `trtllm_` `nv_inference_`), else "unknown"."""
    seen = set()
    for name in names:
        if name.startswith(_PREFIXES):  # one C call for the many names that are no engine's
            for p in ENGINES:
                if name.startswith(p.prefix):
                    seen.add(p.engine)
    for p in ENGINES:
        if p.engine in seen and p.engine != "dcgm":
            return p.engine
    return "unknown"
