"""The workload's schema: frozen dataclasses with a docstring per field, one per table of the file.

Why this module exists: every other part (engine, simulator, console, report) reads the workload
through these types only; their defaults are the contract's defaults, and the keys a table accepts
are its dataclass's fields (`toml_keys`), so a key is declared once, here, and read by its section's
parser (`sections.py`, `simsection.py`, `loadshape.py`, `plans.py`, `slo.py`, `packing.py`, `quality.py`).
Every table is here, `[quality]`'s included, except the simulator's (`[sim.models.X]`, `[sim]`):
they describe the server, not the load, and are in `simschema.py`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Protocol

from oxconsole.workload.simschema import SimLimits, SimModelProfile
from oxconsole.workload.values import fmt_duration, split_host_port

Arrival = Literal["closed", "constant", "poisson"]
PromptsFormat = Literal["jsonl", "sharegpt", "openai-batch", "mooncake", "azure-trace", "burstgpt"]
Strategy = Literal["weighted", "round_robin", "least_loaded"]
Api = Literal[
    "chat", "completions", "embeddings", "responses", "rerank", "transcriptions", "speech", "images"
]
APIS: tuple[Api, ...] = (
    "chat", "completions", "embeddings", "responses", "rerank", "transcriptions", "speech", "images"
)  # fmt: skip
"""`[[models]] api`: the endpoint a model is called on (`engine/send/apis.py` `PATHS`)."""
API_PATHS: dict[str, str] = {
    "chat": "/chat/completions",
    "completions": "/completions",
    "embeddings": "/embeddings",
    "responses": "/responses",
    "rerank": "/rerank",
    "transcriptions": "/audio/transcriptions",
    "speech": "/audio/speech",
    "images": "/images/generations",
}
"""The path each API is called on, under the endpoint's base_url."""
GENERATING_APIS: tuple[Api, ...] = ("chat", "completions", "responses")
"""The APIs whose requests carry a cap on the tokens generated (`max_tokens`)."""
MEDIA_APIS: tuple[Api, ...] = ("rerank", "transcriptions", "speech", "images")
"""The APIs whose requests are not chat's: their records carry `api` (docs/media.md)."""

DEFAULT_RETRY_ON: tuple[int | str, ...] = (429, 500, 502, 503, 504, "timeout", "connection", "stream")
RETRY_WORDS = ("timeout", "connection", "stream")
"""The words `retry.on` accepts besides HTTP statuses."""


def toml_keys(cls: type[Any], *not_keys: str) -> tuple[str, ...]:
    """The keys a table read into `cls` accepts, in the order errors list them: the fields as
    declared, less `not_keys` (the table's own name, a value derived from another key) and fields
    the class computes itself (`init=False`)."""
    names = [f.name for f in fields(cls) if f.init]
    unknown = [k for k in not_keys if k not in names]
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {', '.join(unknown)}")
    return tuple(n for n in names if n not in not_keys)


def fill_results(template: str, name: str) -> str:
    """`output.results` with every `{name}` replaced by `name` (`{{`/`}}` are literal braces).

    No other Python formatting runs: a field that is not exactly `{name}` (`{name.__class__}`,
    `{name[0]}`, `{name:>9}`, `{}`) raises ValueError, as an unbalanced brace does.
    """
    out: list[str] = []
    for literal, field_name, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if field_name is None:
            continue
        if field_name != "name" or spec or conversion:
            raise ValueError("only {name} is substituted")
        out.append(name)
    return "".join(out)


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
    """closed: send as fast as concurrency/rate allow; constant / poisson: open-loop schedule at `rate`."""
    requests: int = 0
    """Total requests; 0 = one per prompt (x repeat), or cycling until `duration` when that is set."""
    duration: float = 0.0
    """Wall-clock cap in seconds; 0 = none."""
    timeout: float = 60.0
    """Per attempt, seconds."""
    stream: bool = True
    """Stream responses (gives TTFT and inter-token latency)."""
    seed: int = 1
    """Seed for routing, arrival times and synthetic prompts (runs are reproducible)."""
    workers: int | Literal["auto"] = 1
    """Engine processes sharing the load; "auto" = one per CPU core."""
    grace: float = 10.0
    """On stop: seconds requests in flight may finish before they are cancelled."""
    concurrency_auto: bool = False
    """`concurrency = "auto"`: the engine finds and holds the highest concurrency meeting [slo]
    (engine/drivers/autosearch.py), starting from `concurrency`; needs [slo] and workers = 1."""
    concurrency_max: int = 1024
    """With auto: the most requests in flight it may set."""
    cluster: Literal["local", "ray"] = "local"
    """Where the engines run: "local" processes, or "ray" actors on a Ray cluster
    (engine/workers/raypool.py)."""
    trace_speed: float = 1.0
    """A trace's replay speed: 2.0 sends its rows twice as fast (at half their offsets)."""
    settle_tolerance: float = 0.05
    """A phase counts as settled once the 95% interval of its TTFT p50 (latency p50 when the run
    has no TTFT) and of its requests/s lies within this share of the figure (0.05 = ±5%); in (0, 1)
    (docs/statistics.md)."""
    trials: int = 1
    """Run the workload this many times in a row, each with fresh connections and the same seed,
    into one journal whose records carry `trial`; the summary's `trials` says how much the
    figures vary from one to the next (not `prompts.repeat`: passes over the prompts in one run)."""
    trial: int = 0
    """Not a key: the trial this workload runs (1..trials), set by the trial runner; 0 outside trials."""


@dataclass(frozen=True)
class OutputConfig:
    results: str = "runs/{name}/results.jsonl"
    """Per-request journal path; {name} is replaced by the workload name."""
    save_text: bool = True
    """Keep the response text in the journal."""
    html: bool = False
    """When the run ends, write `report.html` (self-contained) beside the journal."""
    prometheus: str | None = None
    """An address "HOST:PORT" where the engine serves `/metrics` while the run lasts; None = not served."""
    batch_output: str | None = None
    """Write an OpenAI Batch API output file here after the run (format = "openai-batch" only);
    {name} is replaced by the workload name."""

    def prometheus_address(self) -> tuple[str, int] | None:
        """`prometheus` as (host, port); None when unset or not a HOST:PORT."""
        return split_host_port(self.prometheus) if self.prometheus else None


@dataclass(frozen=True)
class EndpointConfig:
    name: str
    """The table name under [endpoints] (models refer to it)."""
    base_url: str
    """A URL such as http://127.0.0.1:8000/v1, or "sim" for the embedded simulator."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (never the key itself); None = no key."""
    max_connections: int = 1000
    """Connection pool size for this endpoint."""
    insecure: bool = False
    """Skip TLS verification (warned about)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers sent with every request to this endpoint."""
    headers_env: dict[str, str] = field(default_factory=dict)
    """Header name -> NAME of the environment variable holding its value (never the value itself;
    the values are kept out of logs, journals and error details)."""
    pace_by_headers: bool = False
    """Wait for the reset its x-ratelimit-* headers state rather than draw a 429 (engine/headroom.py)."""
    server_metrics: str | tuple[str, ...] = "auto"
    """Where the server's own metrics are read (Prometheus text): "auto" = the base URL's scheme,
    host and port + "/metrics"; "off"; or the URLs (replicas behind one endpoint: counts summed,
    fractions averaged). docs/server.md."""
    server_metrics_interval: float = 1.0
    """Seconds between two scrapes of `server_metrics` (0.25 to 60)."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    """Model name as sent in the request's `model` field."""
    endpoint: str = "default"
    """Name of a table under [endpoints]."""
    weight: float = 1.0
    """Share of traffic under weighted routing (adjustable live); 0 = only via rules/fallbacks."""
    max_tokens: int | None = None
    """Default max_tokens for requests (a prompt's own max_tokens wins); None = not sent."""
    max_tokens_param: str = "max_tokens"
    """The request field the cap is sent as: "max_tokens" (what llama.cpp reads) or
    "max_completion_tokens" (what OpenAI's reasoning models require). A server that rejects one
    with HTTP 400 gets the other for the rest of the run (with a warning)."""
    temperature: float | None = None
    """Sampling temperature in [0, 2]; None = not sent."""
    price_per_request: float = 0.0
    """Flat price per request."""
    price_per_1m_input: float = 0.0
    """Price per million input tokens."""
    price_per_1m_output: float = 0.0
    """Price per million output tokens (reasoning tokens included)."""
    price_per_1m_cached_input: float | None = None
    """Price per million cached input tokens; None = the input price."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Fields added to every request body built for this model (a server's own parameters)."""
    ignore_eos: bool = False
    """Send `ignore_eos = true` (vLLM, SGLang): answers run to max_tokens."""
    api: Api = "chat"
    """The endpoint the model is called on: "chat" (/chat/completions), "completions"
    (/completions, the prompt as text), "embeddings" (/embeddings: not streamed, no output),
    "responses", "rerank", "transcriptions", "speech" or "images" (docs/media.md)."""
    voice: str = "alloy"
    """api = "speech": the voice asked for."""
    size: str = "1024x1024"
    """api = "images": the size of each image asked for ("WIDTHxHEIGHT" or "auto")."""
    n: int = 1
    """api = "images": images asked for per request."""
    price_per_image: float = 0.0
    """Price per image generated (api = "images")."""
    price_per_audio_minute: float = 0.0
    """Price per minute of audio: a transcription's input, a speech answer's output."""
    price_per_1m_characters: float = 0.0
    """Price per million characters of a speech request's input text."""


Dist = Literal["normal", "lognormal", "uniform"]


@dataclass(frozen=True)
class LengthDist:
    """A distribution of lengths in tokens, each draw rounded and kept within [min, max]."""

    dist: Dist
    """normal / lognormal (mean and stddev of the lengths themselves) or uniform (min to max)."""
    mean: float
    """Mean length (uniform: the midpoint of min and max)."""
    stddev: float
    """Standard deviation of the lengths (uniform: that of the range)."""
    min: int
    """Shortest length drawn (draws below are raised to it)."""
    max: int
    """Longest length drawn (draws above are cut to it)."""


@dataclass(frozen=True)
class SyntheticImages:
    """`synthetic.images = { count, width, height }`: generated PNGs sent with every prompt."""

    count: int = 1
    """Images per request."""
    width: int = 512
    """Pixels across."""
    height: int = 512
    """Pixels down."""


@dataclass(frozen=True)
class SyntheticConfig:
    count: int
    """Number of distinct synthetic prompts in one pass."""
    input_tokens: int | LengthDist = 200
    """Prompt length in tokens (about 4 characters a token), fixed or drawn per prompt."""
    output_tokens: int | LengthDist = 64
    """max_tokens sent with each synthetic prompt, fixed or drawn per prompt."""
    prefix_tokens: int = 0
    """A prefix of this many tokens shared by every prompt, before its own text (prefix caching)."""
    images: SyntheticImages | None = None
    """Generated PNGs sent with each prompt (chat and Responses), a different one per request."""
    audio_s: float = 0.0
    """Seconds of generated WAV audio per prompt: a transcription's file, chat's `input_audio`; 0 = none."""
    documents: int = 0
    """Documents per prompt for a reranker, each of `input_tokens`; 0 = none."""


@dataclass(frozen=True)
class PromptsConfig:
    file: Path | None = None
    """Resolved relative to the workload file's folder."""
    format: PromptsFormat = "jsonl"
    """What the file holds: oxconsole's JSONL prompts, ShareGPT conversations or OpenAI Batch input."""
    items: tuple[str, ...] | None = None
    """Inline prompts (ids item-0, item-1, ...)."""
    synthetic: SyntheticConfig | None = None
    """Generated prompts (ids syn-0, syn-1, ...), deterministic from run.seed."""
    repeat: int = 1
    """Passes over the whole prompt sequence."""
    tokenizer: Path | None = None
    """A Hugging Face tokenizer.json (resolved against the workload's folder): exact token counts
    for synthetic prompts and estimates; None = about 4 characters a token."""


@dataclass(frozen=True)
class RoutingRule:
    tag: str
    """Prompts carrying this tag match the rule."""
    models: tuple[str, ...]
    """Candidate models (chosen among by the routing strategy)."""
    fallback: tuple[str, ...] = ()
    """Tried in order when a request fails after its retries."""


@dataclass(frozen=True)
class RoutingConfig:
    strategy: Strategy = "weighted"
    """How a model is chosen when no rule (or several rule models) apply."""
    rules: tuple[RoutingRule, ...] = ()
    """First match wins; no match = the strategy over all models."""
    cascade: tuple[str, ...] = ()
    """Models in order: an answer failing [quality] goes to the next (`workload/quality.py`)."""


@dataclass(frozen=True)
class RetryConfig:
    max_attempts: int = 3
    """Attempts per request including the first (1 = no retry)."""
    backoff: float = 0.5
    """Base of the exponential backoff with full jitter, seconds."""
    backoff_max: float = 30.0
    """Cap on one backoff wait, seconds."""
    on: frozenset[int | str] = frozenset(DEFAULT_RETRY_ON)
    """HTTP statuses (400-599) and "timeout" / "connection" / "stream" that are retried."""


@dataclass(frozen=True)
class PackingConfig:
    size: int = 1
    """Tasks per request; 1 = off."""
    max_input_tokens: int = 0
    """Also close a pack before its estimated input tokens pass this; 0 = no cap."""
    tags: tuple[str, ...] = ()
    """Pack only prompts with one of these tags (others go alone); empty = all."""


@dataclass(frozen=True)
class Stage:
    """One `[[stages]]` table: a step of the load shape (`workload/loadshape.py` reads them)."""

    duration: float
    """Seconds the stage lasts (required, > 0)."""
    concurrency: int | None = None
    """Requests in flight during the stage (reached at its end when ramping); None = unchanged."""
    rate: float | None = None
    """Requests per second (0 = unlimited); None = unchanged."""
    ramp: bool = False
    """Move linearly from the values before the stage to these over its duration."""
    warmup: bool = False
    """Requests sent during the stage are journaled (`"warmup": true`) but left out of the summary."""


@dataclass(frozen=True, slots=True)
class Prices:
    """One model's prices under a plan, in the currency of the models' own prices."""

    per_request: float = 0.0
    """Flat price per request that ends ok."""
    per_1m_input: float = 0.0
    """Price per million input tokens."""
    per_1m_output: float = 0.0
    """Price per million output tokens (reasoning tokens included)."""
    per_1m_cached_input: float | None = None
    """Price per million cached input tokens; None = `per_1m_input`."""
    per_image: float = 0.0
    """Price per image generated."""
    per_audio_minute: float = 0.0
    """Price per minute of audio (a transcription's input, a speech answer's output)."""
    per_1m_characters: float = 0.0
    """Price per million characters of speech input text."""

    def given(self) -> list[tuple[float, str]]:
        """The prices set, each with what it is per ("request", "1M input", "1M output", "image",
        "audio minute", "1M characters", "1M cached input"), in that order: a price of 0 is not
        set, but a cached price of 0 is."""
        flat = [
            (self.per_request, "request"),
            (self.per_1m_input, "1M input"),
            (self.per_1m_output, "1M output"),
            (self.per_image, "image"),
            (self.per_audio_minute, "audio minute"),
            (self.per_1m_characters, "1M characters"),
        ]
        given = [(v, what) for v, what in flat if v]
        if self.per_1m_cached_input is not None:
            given.append((self.per_1m_cached_input, "1M cached input"))
        return given


@dataclass(frozen=True)
class PricePlan:
    """A what-if price table: `default` for every model, `models` overriding it key by key."""

    name: str
    """The table's name under [plans] (the summary's `cost.plans` key)."""
    default: Prices = Prices()
    """Prices of a model the plan does not name."""
    models: Mapping[str, Prices] = field(default_factory=dict)
    """A model's own prices: each key it gives replaces the default's, the others are the default's."""

    def prices(self, model: str) -> Prices:
        """The prices `model` pays under this plan."""
        return self.models.get(model, self.default)


DEFAULT_TARGET = 0.95
"""The share of finished requests that must be good when `target` is not given: the contract's
example, and the usual "95% of requests" of a latency SLO (one straggler never fails a run)."""

_INF = math.inf


class Judged(Protocol):
    """What `SloConfig.good` reads of a finished request (a `RequestRecord` has it)."""

    @property
    def status(self) -> str: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def itl_ms(self) -> float | None: ...
    @property
    def latency_ms(self) -> float | None: ...
    @property
    def ttfot_ms(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class SloConfig:
    """The `[slo]` table: when a request is good (`good`, the rule in `workload/slo.py`'s docstring)."""

    ttft: float | None = None
    """Seconds to the first content token at most (a request without one: its latency)."""
    itl: float | None = None
    """Seconds of mean gap between content chunks at most (a request without gaps meets it)."""
    latency: float | None = None
    """Seconds from send to the last byte at most."""
    target: float = DEFAULT_TARGET
    """Share of finished requests that must be good, in (0, 1]; below it the run exits 3."""
    ttfot: float | None = None
    """Seconds to the first answer token (after any reasoning) at most; without one: as ttft."""
    _ms: tuple[float, float, float, float] = field(init=False, repr=False, compare=False)
    """(ttft, itl, latency, ttfot) in milliseconds, as records keep them; inf where not given."""

    def __post_init__(self) -> None:
        given = (self.ttft, self.itl, self.latency, self.ttfot)
        ms = tuple(_INF if v is None else v * 1000.0 for v in given)
        object.__setattr__(self, "_ms", ms)

    def good(self, rec: Judged) -> bool:
        """Whether a finished request is good: `ok` and within every threshold given. O(1): a
        few comparisons, no allocation (thresholds not given are infinite)."""
        if rec.status != "ok":
            return False
        ttft_ms, itl_ms, latency_ms, ttfot_ms = self._ms
        lat = rec.latency_ms
        if lat is None:
            lat = _INF  # no latency measured: only a request without a latency threshold is good
        if lat > latency_ms:
            return False
        ttft = rec.ttft_ms
        first = lat if ttft is None else ttft
        if first > ttft_ms:
            return False
        answer = rec.ttfot_ms
        if (first if answer is None else answer) > ttfot_ms:
            return False
        itl = rec.itl_ms
        return itl is None or itl <= itl_ms

    def thresholds(self) -> dict[str, float]:
        """The thresholds given, in seconds, by key (`ttft`, `ttfot`, `itl`, `latency`)."""
        given = (("ttft", self.ttft), ("ttfot", self.ttfot), ("itl", self.itl), ("latency", self.latency))
        return {k: v for k, v in given if v}

    def describe(self) -> str:
        """One line for people: `ttft <= 500ms, latency <= 20s for 95% of requests`."""
        parts = [f"{k} <= {fmt_duration(v)}" for k, v in self.thresholds().items()] or ["ok"]
        return f"{', '.join(parts)} for {self.target * 100:g}% of requests"

    def to_dict(self) -> dict[str, Any]:
        """As the journal's manifest keeps it (seconds; absent thresholds null)."""
        out = {"ttft": self.ttft, "itl": self.itl, "latency": self.latency, "target": self.target}
        return out | ({"ttfot": self.ttfot} if self.ttfot is not None else {})


@dataclass(frozen=True)
class JudgeConfig:
    """`judge = { model, prompt, pass }`: a request to a judge model about each answer."""

    model: str
    """The judge: a model in [[models]] (its prices bill each judge request)."""
    prompt: str
    """The judge's prompt (read from its file): `{prompt}` and `{answer}` are filled in."""
    pass_: str
    """The first non-empty line of the judge's answer must match this (Python's syntax, run on RE2
    in linear time: `workload/userregex.py`)."""
    prompt_file: str = ""
    """The file the prompt came from, as written (for `validate`)."""


@dataclass(frozen=True)
class QualityConfig:
    """`[quality]`: every check given must pass for an answer to be valid."""

    json_schema: dict[str, Any] | bool | None = None
    """The schema the answer (JSON, a ```json fence allowed) must validate against; None = no check."""
    schema_source: str = ""
    """Where the schema came from: its file as written, or "inline"."""
    regex: str | None = None
    """The answer must match this (Python's `re.search` syntax and answer, run on RE2 in linear
    time: no lookarounds or backreferences, `workload/userregex.py`); None = no check."""
    expected: bool = False
    """Prompts lines carry `"expected"`: the answer must equal it, trimmed, case-insensitive (a
    prompt without one is not held to it)."""
    expected_path: tuple[str, ...] | None = None
    """With `expected`: the answer must be JSON and its value at this dotted path (`"label"`,
    `"items.0.name"`, read into its parts) must equal the expected answer
    (`workload/answerpath.py` says how numbers, booleans and null compare); None = the whole answer."""
    judge: JudgeConfig | None = None
    """A judge model's verdict on each answer that passed the other checks; None = no judge."""

    def checks(self) -> list[str]:
        """The checks given, by key, in the order they run (for `validate` and the docs)."""
        given = (
            ("json_schema", self.json_schema is not None),
            ("regex", self.regex is not None),
            ("expected", self.expected),
            ("judge", self.judge is not None),
        )
        return [k for k, on in given if on]


@dataclass(frozen=True)
class TelemetryConfig:
    """`[telemetry]`: GPU telemetry read beside the run (`engine/serverwatch.py`)."""

    dcgm: tuple[str, ...] = ()
    """DCGM exporters' URLs (Prometheus text, such as "http://127.0.0.1:9400/metrics"); () = none."""


@dataclass(frozen=True)
class Workload:
    path: Path
    """The workload file as the user gave it."""
    name: str
    """`name` key, or the file's stem."""
    run: RunConfig
    """[run]: how much load, how fast, for how long."""
    output: OutputConfig
    """[output]: where the journal and the reports go."""
    endpoints: dict[str, EndpointConfig]
    """[endpoints.NAME] by name, in file order."""
    models: tuple[ModelConfig, ...]
    """[[models]] in file order (at least one)."""
    prompts: PromptsConfig
    """[prompts]: where the prompts come from."""
    routing: RoutingConfig
    """[routing]: which model a prompt goes to."""
    retry: RetryConfig
    """[retry]: which failures are retried, how often, after what wait."""
    sim: dict[str, SimModelProfile] = field(default_factory=dict)
    """[sim.models."NAME"] profiles for the embedded simulator."""
    raw: dict[str, Any] = field(default_factory=dict)
    """The TOML document after --set overrides (used to write tuned workloads back)."""
    slo: SloConfig | None = None
    """[slo]: when a request is good and the share that must be (`workload/slo.py`); None = no SLO."""
    stages: tuple[Stage, ...] = ()
    """[[stages]]: the load shape, run in order (`workload/loadshape.py`); () = none."""
    plans: dict[str, PricePlan] = field(default_factory=dict)
    """[plans.NAME] what-if price tables (`workload/plans.py`), in file order."""
    packing: PackingConfig = field(default_factory=PackingConfig)
    """[packing]: several tasks per request (`workload/packing.py`)."""
    sim_limits: SimLimits = field(default_factory=SimLimits)
    """[sim] rpm_limit / tpm_limit for the embedded simulator."""
    quality: QualityConfig | None = None
    """[quality]: when an answer is valid (`workload/quality.py`); None = every ok answer stands."""
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    """[telemetry]: GPU telemetry (DCGM exporters) read beside the run."""

    def model(self, name: str) -> ModelConfig:
        for m in self.models:
            if m.name == name:
                return m
        raise KeyError(name)

    def results_path(self) -> Path:
        """`output.results` with {name} filled in, relative to the current directory."""
        return Path(fill_results(self.output.results, self.name))
