"""The workload file: one typed, immutable structure loaded from TOML.

Why this module exists: every other part (engine, simulator, console, report) reads the workload
through these dataclasses only, so the schema, its defaults and its error messages live in one place.
Errors are raised as `WorkloadError` whose message is already in the user's words:
``workload.toml: run.concurrency: expected an integer >= 1, got "fifty"``.

INTERFACE (fixed; other modules rely on these names):
  load_workload(path, overrides=()) -> Workload      # overrides: ["run.concurrency=200", ...]
  iter_prompts(workload) -> Iterator[Prompt]          # streams; applies repeat/requests/duration cycling
  check_prompts(workload) -> int                      # full validation pass over the prompt source; returns count
  resolve_api_key(workload, endpoint_name) -> str | None
  WorkloadError(Exception)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Arrival = Literal["closed", "constant", "poisson"]
Strategy = Literal["weighted", "round_robin", "least_loaded"]

DEFAULT_RETRY_ON: tuple[int | str, ...] = (429, 500, 502, 503, 504, "timeout", "connection", "stream")


class WorkloadError(Exception):
    """Bad input. The message names the file, the key path and what was expected (exit 2)."""


@dataclass(frozen=True)
class RunConfig:
    concurrency: int = 50
    """Maximum requests in flight (adjustable live)."""
    rate: float = 0.0
    """Requests per second; 0 = unlimited (closed) — required > 0 for constant/poisson arrival."""
    burst: int = 1
    """Token-bucket capacity in requests (1 = smooth pacing)."""
    tpm: int = 0
    """Tokens-per-minute budget across the run; 0 = off."""
    arrival: Arrival = "closed"
    requests: int = 0
    """Total requests; 0 = one per prompt (x repeat), or cycling until `duration` when that is set."""
    duration: float = 0.0
    """Wall-clock cap in seconds; 0 = none."""
    timeout: float = 60.0
    """Per attempt, seconds."""
    stream: bool = True
    seed: int = 1
    workers: int | Literal["auto"] = 1
    grace: float = 10.0
    """On stop: seconds requests in flight may finish before they are cancelled."""


@dataclass(frozen=True)
class OutputConfig:
    results: str = "runs/{name}/results.jsonl"
    save_text: bool = True


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    base_url: str
    """A URL such as http://127.0.0.1:8000/v1, or "sim" for the embedded simulator."""
    api_key_env: str | None = None
    max_connections: int = 1000
    insecure: bool = False
    """Skip TLS verification (warned about)."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    endpoint: str = "default"
    weight: float = 1.0
    max_tokens: int | None = None
    temperature: float | None = None
    price_per_request: float = 0.0
    price_per_1m_input: float = 0.0
    price_per_1m_output: float = 0.0


@dataclass(frozen=True)
class SyntheticConfig:
    count: int
    input_tokens: int = 200
    output_tokens: int = 64


@dataclass(frozen=True)
class PromptsConfig:
    file: Path | None = None
    """Resolved relative to the workload file's folder."""
    items: tuple[str, ...] | None = None
    synthetic: SyntheticConfig | None = None
    repeat: int = 1


@dataclass(frozen=True)
class RoutingRule:
    tag: str
    models: tuple[str, ...]
    fallback: tuple[str, ...] = ()


@dataclass(frozen=True)
class RoutingConfig:
    strategy: Strategy = "weighted"
    rules: tuple[RoutingRule, ...] = ()


@dataclass(frozen=True)
class RetryConfig:
    max_attempts: int = 3
    backoff: float = 0.5
    backoff_max: float = 30.0
    on: frozenset[int | str] = frozenset(DEFAULT_RETRY_ON)


@dataclass(frozen=True)
class SimModelProfile:
    ttft: float = 0.12
    """Seconds from admission to the first content token."""
    tokens_per_s: float = 80.0
    """Decode speed per request; 0 = all tokens at once."""
    output_tokens: int = 64
    capacity: int = 64
    jitter: float = 0.1
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


@dataclass(frozen=True)
class Prompt:
    id: str
    """Unique per run (repeats carry "#n")."""
    messages: list[dict[str, Any]]
    tag: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    """Per-prompt cap (synthetic prompts set it from output_tokens); None = the model's max_tokens."""
    input_chars: int = 0
    """Characters of message content, for input-token estimates (~4 chars a token)."""


@dataclass(frozen=True)
class Workload:
    path: Path
    name: str
    run: RunConfig
    output: OutputConfig
    endpoints: dict[str, EndpointConfig]
    models: tuple[ModelConfig, ...]
    prompts: PromptsConfig
    routing: RoutingConfig
    retry: RetryConfig
    sim: dict[str, SimModelProfile] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    """The TOML document after --set overrides (used to write tuned workloads back)."""

    def model(self, name: str) -> ModelConfig:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    def results_path(self) -> Path:
        """`output.results` with {name} filled in, relative to the current directory."""
        return Path(self.output.results.format(name=self.name))
