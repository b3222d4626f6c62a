"""The simulator's `/metrics`: what it served, counted as vLLM counts it, in vLLM's names or llama.cpp's.

Why this module exists: the contract has the simulator impersonate a vLLM server (label
`model_name`), or a llama-server with `[sim] metrics_format = "llamacpp"`, so that the server's side
(`engine/serverwatch.py`) is tested end to end and shown in the demo without a GPU. Each model
counts what it serves in a `Served` (a few integer additions per request, nothing per token); the
exposition is rendered only when `/metrics` is asked for, written the way each engine writes it:
HELP and TYPE lines, vLLM's `engine` label and histogram bounds, llama.cpp's unlabelled series.

With `jitter = 0` every figure is exact: `running` is the requests in service (at most `capacity`
per ready replica), `waiting` those queued for a slot, the KV usage the tokens the requests in
service hold (each its prompt and its whole answer, from admission to its end) over `kv_tokens`
per ready replica (at most 1: the simulator does not preempt), prompt tokens counted at admission
(cached ones included, as vLLM's `prompt_tokens_total`), generated tokens when an answer ends
(those of an answer the client dropped are not counted), prefix-cache queries and hits in tokens
(with `prefix_cache = true`), the queue time from the request's arrival at the gate to its
admission and the TTFT from that arrival to its first token's scheduled time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "QUEUE_BOUNDS_S",
    "TTFT_BOUNDS_S",
    "ModelFigures",
    "Served",
    "render",
    "render_llamacpp",
    "render_vllm",
]

TTFT_BOUNDS_S: Final = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                        7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
"""vLLM's `time_to_first_token_seconds` bounds (vllm/v1/metrics/loggers.py)."""
QUEUE_BOUNDS_S: Final = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                         120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip
"""vLLM's request-latency bounds, which its `request_queue_time_seconds` uses."""


@dataclass(slots=True)
class Served:
    """One model's counters since the simulator started; histograms as counts per bucket (index i
    counts observations in (bound[i-1], bound[i]], the last index those above every bound)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    held_tokens: int = 0
    """KV tokens held by the requests in service now."""
    ttft: list[int] = field(default_factory=lambda: [0] * (len(TTFT_BOUNDS_S) + 1))
    ttft_sum_s: float = 0.0
    queue: list[int] = field(default_factory=lambda: [0] * (len(QUEUE_BOUNDS_S) + 1))
    queue_sum_s: float = 0.0

    def admitted(self, queued_s: float, prompt_tokens: int, cached: int | None, held: int) -> None:
        """A request given a slot after `queued_s` in the queue, holding `held` KV tokens;
        `cached`: its prompt tokens the prefix cache served (None: the model has no cache)."""
        self.prompt_tokens += prompt_tokens
        if cached is not None:
            self.prefix_queries += prompt_tokens
            self.prefix_hits += cached
        self.held_tokens += held
        q = max(0.0, queued_s)
        self.queue[bisect_left(QUEUE_BOUNDS_S, q)] += 1
        self.queue_sum_s += q

    def first_token(self, ttft_s: float) -> None:
        """A request's first token is due `ttft_s` after its arrival at the gate."""
        t = max(0.0, ttft_s)
        self.ttft[bisect_left(TTFT_BOUNDS_S, t)] += 1
        self.ttft_sum_s += t

    def ended(self, held: int, generated: int) -> None:
        """A request in service ended, its `held` KV tokens freed, `generated` tokens sent."""
        self.held_tokens -= held
        self.generation_tokens += generated


@dataclass(frozen=True, slots=True)
class ModelFigures:
    """One model at the moment `/metrics` is read."""

    running: int
    waiting: int
    kv_usage: float
    served: Served


def _num(v: float) -> str:
    return repr(float(v))


def _family(out: list[str], name: str, kind: str, help_: str) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {kind}")


def _histogram(
    out: list[str],
    name: str,
    help_: str,
    models: Iterable[tuple[str, Sequence[int], float]],
    bounds: Sequence[float],
) -> None:
    _family(out, name, "histogram", help_)
    for lab, counts, total in models:
        cum = 0
        for b, c in zip((*bounds, float("inf")), counts, strict=True):
            cum += c
            le = "+Inf" if b == float("inf") else _num(b)
            out.append(f'{name}_bucket{{{lab},le="{le}"}} {_num(cum)}')
        out.append(f"{name}_count{{{lab}}} {_num(cum)}")
        out.append(f"{name}_sum{{{lab}}} {_num(total)}")


def _label(name: str) -> str:
    """A model name as a label value (the text format's three escapes)."""
    return name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_vllm(models: Mapping[str, ModelFigures]) -> bytes:
    """vLLM's exposition (the v1 engine's names, labels `engine` and `model_name`)."""
    out: list[str] = []
    labs = {name: f'engine="0",model_name="{_label(name)}"' for name in models}
    gauges = (
        ("vllm:num_requests_running", "Number of requests in model execution batches.", "running"),
        ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "waiting"),
        ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_usage"),
    )
    for name, help_, attr in gauges:
        _family(out, name, "gauge", help_)
        out += [f"{name}{{{labs[m]}}} {_num(getattr(f, attr))}" for m, f in models.items()]
    counters = (
        ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "prompt_tokens"),
        ("vllm:generation_tokens_total", "Number of generation tokens processed.", "generation_tokens"),
        ("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
         "prefix_queries"),
        ("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
         "prefix_hits"),
        ("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", ""),
    )  # fmt: skip
    for name, help_, attr in counters:  # "": the simulator never preempts
        _family(out, name, "counter", help_)
        out += [
            f"{name}{{{labs[m]}}} {_num(getattr(f.served, attr) if attr else 0)}" for m, f in models.items()
        ]
    _histogram(
        out,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        ((labs[m], f.served.ttft, f.served.ttft_sum_s) for m, f in models.items()),
        TTFT_BOUNDS_S,
    )
    _histogram(
        out,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        ((labs[m], f.served.queue, f.served.queue_sum_s) for m, f in models.items()),
        QUEUE_BOUNDS_S,
    )
    return ("\n".join(out) + "\n").encode()


def render_llamacpp(models: Mapping[str, ModelFigures]) -> bytes:
    """llama-server's exposition: one model's names, no labels, no histograms (several models'
    figures together). Its prompt counter leaves out the cached tokens, which have their own."""
    ms = list(models.values())
    prompt = sum(m.served.prompt_tokens for m in ms)
    cached = sum(m.served.prefix_hits for m in ms)
    rows = (
        ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", prompt - cached),
        ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache.", cached),
        ("tokens_predicted_total", "counter", "Number of generation tokens processed.",
         sum(m.served.generation_tokens for m in ms)),
        ("requests_processing", "gauge", "Number of requests processing.", sum(m.running for m in ms)),
        ("requests_deferred", "gauge", "Number of requests deferred.", sum(m.waiting for m in ms)),
    )  # fmt: skip
    out: list[str] = []
    for name, kind, help_, value in rows:
        _family(out, f"llamacpp:{name}", kind, help_)
        out.append(f"llamacpp:{name} {int(value)}")
    return ("\n".join(out) + "\n").encode()


def render(fmt: str, models: Mapping[str, ModelFigures]) -> bytes:
    """`/metrics` in `fmt`'s names ("vllm" or "llamacpp", `[sim] metrics_format`)."""
    return render_llamacpp(models) if fmt == "llamacpp" else render_vllm(models)
