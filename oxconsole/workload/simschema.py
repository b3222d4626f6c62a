"""The simulator's tables: `[sim.models.X]` (a model's profile) and `[sim]` (server-wide limits).

Why this module exists: these tables describe the embedded simulator, not the load: the
simulator serves by them, `simsection.py` parses them, and the client's side reads them only to
estimate how long a simulated request takes (`loadshape.py`). `Workload` carries them
(`schema.py`) so one file describes both the load and the server it runs against; as in
`schema.py`, a table's keys are its dataclass's fields, each with its docstring.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SimModelProfile:
    ttft: float = 0.12
    """Seconds from admission to the first content token."""
    tokens_per_s: float = 80.0
    """Decode speed per request; 0 = all tokens at once."""
    output_tokens: int = 64
    """Tokens generated per answer (capped by the request's max_tokens)."""
    capacity: int = 64
    """Requests served at once before further ones queue."""
    jitter: float = 0.1
    """Relative spread of ttft and token gaps in [0, 1]; 0 = exact."""
    error_rate: float = 0.0
    """Fraction of requests answered with HTTP 500."""
    rate_limit: float = 0.0
    """Requests/s above which the model answers 429 with Retry-After; 0 = no limit."""
    retry_after: float = 1.0
    """Seconds sent in Retry-After (and retry-after-ms) on simulated 429s."""
    throttle_rate: float = 0.0
    """Fraction of requests answered 429 with Retry-After regardless of load."""
    reset_rate: float = 0.0
    """Fraction of requests whose connection is dropped before any response."""
    abort_rate: float = 0.0
    """Fraction of streams that stop mid-way (connection closed, no finish_reason, no [DONE])."""
    malformed_rate: float = 0.0
    """Fraction of responses carrying a malformed (non-JSON) chunk or body."""
    stall_rate: float = 0.0
    """Fraction of requests that stall for `stall` seconds before answering."""
    stall: float = 120.0
    """Seconds a stalled request waits before answering."""
    usage: bool = True
    """Send `usage` when the client asks for it; false mimics llama.cpp's server (none in streams)."""
    pack_error_rate: float = 0.0
    """Fraction of packed requests answered with one section missing (the client must re-send)."""
    knee: float = 0.0
    """Load curve: the batch (requests in service, itself included) at which ttft and every token
    gap are twice the profile's; 0 = no curve, flat until `capacity` (see oxconsole/sim/curve.py)."""
    knee_power: float = 2.0
    """Load curve's steepness p: a request admitted into a batch of b is slowed 1 + (b/knee)**p times."""
    # Reasoning, prefix caching and prefill (docs/simulator.md).
    reasoning_tokens: int = 0
    """Reasoning tokens streamed before the answer at `tokens_per_s`, counted in completion tokens."""
    reasoning_field: str = "reasoning_content"
    """Where reasoning goes: "reasoning_content" or "reasoning" (a chat delta field), or
    "think_tags" (inside `content`, between <think> and </think>)."""
    prefix_cache: bool = False
    """Remember the prompts served and report the longest prefix already seen as cached tokens."""
    cache_block: int = 16
    """Tokens per prefix-cache block: cached tokens are whole blocks."""
    prefill_tokens_per_s: float = 0.0
    """Uncached prompt tokens prefilled per second, added to `ttft`; 0 = instant."""
    quality: float | None = None
    """Share of answers that are right under [quality] (`sim/quality.py`); None = filler text."""
    replicas: int = 1
    """Replicas ready at the start; each serves `capacity` requests at once (sim/replicas.py)."""
    max_replicas: int = 0
    """Replicas it may scale to while requests queue; 0 = `replicas` (no scaling)."""
    cold_start: float = 10.0
    """Seconds from a replica's start to its first request (only when it may scale)."""
    # Every kind of model (docs/simulator.md, "Media").
    rtf: float = 0.1
    """Transcriptions: seconds of work per second of audio; latency = ttft + rtf x audio seconds."""
    audio_rtf: float = 0.2
    """Speech: audio streams at 1/audio_rtf times real time (15 characters a second of audio), the
    first byte `ttft` after admission."""
    image_s: float = 2.0
    """Image generation: seconds per image; a request for n images is answered n x image_s after
    admission."""
    image_tokens: int = 256
    """Chat and Responses: prompt tokens per image sent, prefilled like text."""
    kv_tokens: int = 65536
    """KV cache per replica, in tokens: `/metrics`' KV usage is the tokens held by the requests in
    service (each its prompt and its whole answer, from admission to its end) over this."""


REASONING_FIELDS = ("reasoning_content", "reasoning", "think_tags")
"""The values of `SimModelProfile.reasoning_field`."""


METRICS_FORMATS = ("vllm", "llamacpp")
"""The values of `SimLimits.metrics_format`: whose names the simulator's `/metrics` speaks."""


@dataclass(frozen=True)
class SimLimits:
    """`[sim]`'s server-wide keys: provider-style rate limits (`rpm_limit` / `tpm_limit`) and the
    names its `/metrics` speaks."""

    rpm_limit: int = 0
    """Requests per window (a minute); 0 = no limit."""
    tpm_limit: int = 0
    """Tokens (prompt + completion) per window; 0 = no limit."""
    window: float = 60.0
    """Seconds per fixed window, from the first request (`ratelimit_window`: tests shorten it)."""
    metrics_format: str = "vllm"
    """`/metrics` in vLLM's names (label `model_name`) or, with "llamacpp", llama-server's
    (no labels: the models' figures together, as one llama-server serves one model)."""
