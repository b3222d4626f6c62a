"""The workload file: one typed, immutable structure loaded from TOML.

Why this module exists: every other part (engine, simulator, console, report) reads the workload
through these dataclasses only, so the schema, its defaults and its error messages live in one place.
Errors are raised as `WorkloadError` whose message is already in the user's words:
``workload.toml: run.concurrency: expected an integer >= 1, got "fifty"``.

INTERFACE (fixed; other modules rely on these names):
  load_workload(path, overrides=()) -> Workload      # overrides: ["run.concurrency=200", ...]
  iter_prompts(workload) -> Iterator[Prompt]          # streams; applies repeat/requests/duration cycling
  check_prompts(workload) -> PromptStats              # full validation pass over the prompt source
  resolve_api_key(workload, endpoint_name) -> str | None
  describe(workload, stats) -> str                    # the text `oxconsole validate` prints
  load_sim_section(path) -> dict[str, SimModelProfile]
  parse_sim_profiles(sim_table, file_label) -> dict[str, SimModelProfile]
  WorkloadError(Exception)

Stdlib only (plus orjson for the prompts file): importing this module never loads the UI or HTTP stack.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
import re
import tomllib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, cast

import orjson

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


@dataclass(frozen=True)
class OutputConfig:
    results: str = "runs/{name}/results.jsonl"
    """Per-request journal path; {name} is replaced by the workload name."""
    save_text: bool = True
    """Keep the response text in the journal."""


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
    """Price per million output tokens."""


@dataclass(frozen=True)
class SyntheticConfig:
    count: int
    """Number of distinct synthetic prompts in one pass."""
    input_tokens: int = 200
    """Approximate prompt length in tokens (about 4 characters a token)."""
    output_tokens: int = 64
    """max_tokens sent with each synthetic prompt."""


@dataclass(frozen=True)
class PromptsConfig:
    file: Path | None = None
    """Resolved relative to the workload file's folder."""
    items: tuple[str, ...] | None = None
    """Inline prompts (ids item-0, item-1, ...)."""
    synthetic: SyntheticConfig | None = None
    """Generated prompts (ids syn-0, syn-1, ...), deterministic from run.seed."""
    repeat: int = 1
    """Passes over the whole prompt sequence."""


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


@dataclass(frozen=True)
class Prompt:
    id: str
    """Unique per run (repeats carry "#n")."""
    messages: list[dict[str, Any]]
    """Chat messages sent as-is."""
    tag: str | None = None
    """Routing tag (matched by [[routing.rules]])."""
    model: str | None = None
    """Pin this prompt to one model (bypasses routing)."""
    max_tokens: int | None = None
    """Per-prompt cap (synthetic prompts set it from output_tokens); None = the model's max_tokens."""
    input_chars: int = 0
    """Characters of message content, for input-token estimates (~4 chars a token)."""


@dataclass(frozen=True)
class Workload:
    path: Path
    """The workload file as the user gave it."""
    name: str
    """`name` key, or the file's stem."""
    run: RunConfig
    output: OutputConfig
    endpoints: dict[str, EndpointConfig]
    models: tuple[ModelConfig, ...]
    prompts: PromptsConfig
    routing: RoutingConfig
    retry: RetryConfig
    sim: dict[str, SimModelProfile] = field(default_factory=dict)
    """[sim.models."NAME"] profiles for the embedded simulator."""
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


@dataclass(frozen=True)
class PromptStats:
    """What `check_prompts` learned from one full pass over the prompt source."""

    count: int
    """Prompts in one pass."""
    total_requests: int | None
    """Requests the run will send; None = unbounded (cycling until run.duration)."""
    tags: frozenset[str] = frozenset()
    """Tags seen on prompts."""
    models_referenced: frozenset[str] = frozenset()
    """Models named by prompts' own `model` key."""


# --------------------------------------------------------------------------------------------
# Error text helpers
# --------------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHOW_MAX = 60


def _show(value: Any) -> str:
    """A short TOML-ish rendering of a user value for 'got ...'."""
    text = _render(value)
    if len(text) > _SHOW_MAX:
        text = text[: _SHOW_MAX - 1] + "…"
    return text


def _render(value: Any, depth: int = 0) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value[:200], ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "a table" if depth == 0 else "{…}"
    if isinstance(value, list):
        if depth > 1:
            return "[…]"
        parts = [_render(v, depth + 1) for v in value[:8]]
        if len(value) > 8:
            parts.append("…")
        return "[" + ", ".join(parts) + "]"
    return f"{type(value).__name__} {value}"


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        k = str(key)
    else:
        k = key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)
    return f"{path}.{k}" if path else k


def _err(label: str, path: str, expected: str, got: str) -> WorkloadError:
    where = f"{label}: {path}" if path else label
    return WorkloadError(f"{where}: expected {expected}, got {got}")


def _fail(label: str, path: str, expected: str, value: Any) -> NoReturn:
    raise _err(label, path, expected, _show(value))


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    pool = list(choices)
    found = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not found:
        lower = {c.lower(): c for c in pool}
        found = [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=1, cutoff=0.6)]
    return found[0] if found else None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_DURATION_FULL = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ms|s|m|h))+")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_HELP = 'seconds, or a string such as "500ms", "1.5s", "10m", "1h"'


def parse_duration(value: Any) -> float | None:
    """Seconds from a TOML number or a string like "500ms", "1.5s", "10m", "1h", "1m30s"; else None."""
    if _is_num(value):
        return float(value)
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if _DURATION_FULL.fullmatch(text):
            return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(text))
    return None


def _fmt_duration(seconds: float) -> str:
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    if seconds < 120 or seconds % 60:
        return f"{seconds:g}s"
    if seconds < 7200 or seconds % 3600:
        return f"{seconds / 60:g}m"
    return f"{seconds / 3600:g}h"


# --------------------------------------------------------------------------------------------
# Table reader: typed getters with the error format built in
# --------------------------------------------------------------------------------------------


class _Table:
    """One TOML table being validated: rejects unknown keys, reads typed values with range checks."""

    def __init__(
        self,
        label: str,
        data: Any,
        path: str,
        known: Sequence[str],
        section: str,
        elsewhere: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(data, dict):
            _fail(label, path, f"a table ({section})", data)
        self.label = label
        self.data: dict[str, Any] = data
        self.path = path
        for key in data:
            if key in known:
                continue
            hint = _did_you_mean(key, known)
            if hint is not None:
                expected = f'a key of {section} (did you mean "{hint}"?)'
            elif elsewhere and key in elsewhere:
                expected = f'a key of {section} ("{key}" belongs under {elsewhere[key]})'
            else:
                expected = f"a key of {section} (one of: {', '.join(known)})"
            raise _err(label, _join(path, key), expected, "an unknown key")

    def p(self, key: str | int) -> str:
        return _join(self.path, key)

    def has(self, key: str) -> bool:
        return key in self.data

    def fail(self, key: str, expected: str) -> NoReturn:
        _fail(self.label, self.p(key), expected, self.data.get(key))

    def int_(self, key: str, default: int, lo: int | None = None) -> int:
        if key not in self.data:
            return default
        v = self.data[key]
        if not _is_int(v) or (lo is not None and v < lo):
            self.fail(key, "an integer" + (f" >= {lo}" if lo is not None else ""))
        return cast(int, v)

    def opt_int(self, key: str, lo: int) -> int | None:
        return self.int_(key, 0, lo) if key in self.data else None

    def num(
        self, key: str, default: float, lo: float = 0.0, hi: float | None = None, above: bool = False
    ) -> float:
        if key not in self.data:
            return default
        v = self.data[key]
        ok = _is_num(v) and (v > lo if above else v >= lo) and (hi is None or v <= hi)
        if not ok:
            if hi is not None:
                self.fail(key, f"a number between {lo:g} and {hi:g}")
            self.fail(key, f"a number {'>' if above else '>='} {lo:g}")
        return float(v)

    def opt_num(self, key: str, lo: float = 0.0, hi: float | None = None) -> float | None:
        return self.num(key, 0.0, lo, hi) if key in self.data else None

    def str_(self, key: str, default: str | None = None, what: str = "a non-empty string") -> str:
        if key not in self.data:
            if default is None:
                raise _err(self.label, self.p(key), what, "nothing (the key is required)")
            return default
        v = self.data[key]
        if not isinstance(v, str) or not v.strip():
            self.fail(key, what)
        return v

    def bool_(self, key: str, default: bool) -> bool:
        if key not in self.data:
            return default
        v = self.data[key]
        if not isinstance(v, bool):
            self.fail(key, "true or false")
        return v

    def duration(self, key: str, default: float, positive: bool = False) -> float:
        if key not in self.data:
            return default
        v = self.data[key]
        seconds = parse_duration(v)
        if seconds is None or seconds < 0 or (positive and seconds == 0):
            self.fail(key, f"a duration {'> 0' if positive else '>= 0'} ({_DURATION_HELP})")
        return seconds

    def enum(self, key: str, default: str, choices: Sequence[str]) -> str:
        if key not in self.data:
            return default
        v = self.data[key]
        if v not in choices or not isinstance(v, str):
            hint = _did_you_mean(v, choices) if isinstance(v, str) else None
            extra = f' (did you mean "{hint}"?)' if hint else ""
            self.fail(key, " | ".join(f'"{c}"' for c in choices) + extra)
        return v

    def str_list(self, key: str, what: str, allow_empty: bool = True) -> list[str] | None:
        if key not in self.data:
            return None
        v = self.data[key]
        if not isinstance(v, list) or (not allow_empty and not v):
            self.fail(key, f"{'a non-empty' if not allow_empty else 'an'} array of {what}")
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                _fail(self.label, _join(self.p(key), i), "a non-empty string", item)
        return cast(list[str], v)


# --------------------------------------------------------------------------------------------
# Reading the file and applying --set
# --------------------------------------------------------------------------------------------

_TOML_POS = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


def _read_toml(path: Path, label: str) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadError(f"{label}: expected a workload file, got no such file") from None
    except IsADirectoryError:
        raise WorkloadError(f"{label}: expected a workload file, got a directory") from None
    except PermissionError:
        raise WorkloadError(f"{label}: expected a readable workload file, got permission denied") from None
    except OSError as e:
        raise WorkloadError(f"{label}: expected a readable workload file, got {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WorkloadError(
            f"{label}: expected a UTF-8 TOML text file, got bytes that are not UTF-8 (at byte {e.start})"
        ) from None
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        raise WorkloadError(f"{label}: expected a TOML text file, got binary data (NUL bytes)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        where = label
        if m:
            msg = msg[: m.start()]
            where = (
                f"{label}: line {m.group(1)}, column {m.group(2)}" if m.group(1) else f"{label}: end of file"
            )
        msg = msg[:1].lower() + msg[1:]
        raise WorkloadError(f"{where}: expected valid TOML, got a syntax error: {msg}") from None
    except RecursionError:
        raise WorkloadError(f"{label}: expected valid TOML, got values nested too deeply") from None


def _split_assignment(arg: str) -> tuple[str, str] | None:
    """Split KEY=VALUE at the first '=' outside quotes (keys may be quoted: sim.models."a.b".ttft)."""
    quote = ""
    for i, ch in enumerate(arg):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return arg[:i], arg[i + 1 :]
    return None


def _parse_key(key: str) -> list[str] | None:
    """A dotted TOML key as its parts, parsed by tomllib itself; None when it is not a key."""
    if not key or "\n" in key or "\r" in key:
        return None
    try:
        doc: Any = tomllib.loads(f"{key} = 0")
    except (tomllib.TOMLDecodeError, RecursionError):
        return None
    parts: list[str] = []
    while isinstance(doc, dict):
        if len(doc) != 1:
            return None
        ((k, doc),) = doc.items()
        parts.append(k)
    return parts if doc == 0 and _is_int(doc) else None


def _parse_value(text: str) -> tuple[bool, Any]:
    """Parse a --set value as TOML; a bare word that is not TOML becomes a string."""
    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        doc = tomllib.loads(f"v = {stripped}")
    except (tomllib.TOMLDecodeError, RecursionError):
        if stripped[0] in "[{\"'" or "\n" in stripped:
            return False, None
        return True, stripped
    if len(doc) != 1 or "v" not in doc:
        return False, None
    return True, doc["v"]


def apply_override(raw: dict[str, Any], arg: str, label: str) -> None:
    """Apply one `--set KEY=VALUE` to the raw TOML dict (in place)."""
    where = f"{label}: --set {_show(arg)}"
    split = _split_assignment(arg)
    if split is None:
        raise WorkloadError(f"{where}: expected KEY=VALUE (such as run.concurrency=200), got no '='")
    key_text, value_text = split[0].strip(), split[1]
    if not key_text:
        raise WorkloadError(f"{where}: expected a dotted key before '=' (such as run.concurrency), got none")
    parts = _parse_key(key_text)
    if parts is None:
        raise WorkloadError(
            f"{where}: expected a dotted key (such as models.0.weight), got {_show(key_text)}"
        )
    ok, value = _parse_value(value_text)
    if not ok:
        raise WorkloadError(
            f"{where}: expected a TOML value after '=' (such as 200, 1.5, true, \"90s\", [429, 500]), "
            f"got {_show(value_text)}"
        )
    cur: Any = raw
    done = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            if not part.isdigit():
                raise WorkloadError(
                    f"{where}: expected an array index (0, 1, ...) after {done or 'the top level'}, "
                    f"got {_show(part)}"
                )
            idx = int(part)
            if idx >= len(cur):
                raise WorkloadError(
                    f"{where}: expected an index below {len(cur)} for {done} "
                    f"(it has {len(cur)} entr{'y' if len(cur) == 1 else 'ies'}), got {idx}"
                )
            if last:
                cur[idx] = value
            else:
                cur = cur[idx]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                if part not in cur:
                    cur[part] = {}
                cur = cur[part]
        else:
            raise WorkloadError(f"{where}: expected {done} to be a table or an array, got {_show(cur)}")
        done = _join(done, part)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

_TOP = ("name", "run", "output", "endpoints", "models", "prompts", "routing", "retry", "sim")
_RUN = (
    "concurrency", "rate", "burst", "tpm", "arrival", "requests", "duration",
    "timeout", "stream", "seed", "workers", "grace",
)  # fmt: skip
_OUTPUT = ("results", "save_text")
_ENDPOINT = ("base_url", "api_key_env", "max_connections", "insecure")
_MODEL = (
    "name", "endpoint", "weight", "max_tokens", "max_tokens_param", "temperature",
    "price_per_request", "price_per_1m_input", "price_per_1m_output",
)  # fmt: skip
_PROMPTS = ("file", "items", "synthetic", "repeat")
_SYNTHETIC = ("count", "input_tokens", "output_tokens")
_ROUTING = ("strategy", "rules")
_RULE = ("tag", "models", "fallback")
_RETRY = ("max_attempts", "backoff", "backoff_max", "on")
_SIM = ("models",)
_PROFILE = (
    "ttft", "tokens_per_s", "output_tokens", "capacity", "jitter", "error_rate", "rate_limit",
    "retry_after", "throttle_rate", "reset_rate", "abort_rate", "malformed_rate", "stall_rate", "stall",
    "usage",
)  # fmt: skip
_RETRY_WORDS = ("timeout", "connection", "stream")

_ELSEWHERE: dict[str, str] = {}
for _section, _keys in (
    ("[run]", _RUN), ("[output]", _OUTPUT), ("[prompts]", _PROMPTS),
    ("[routing]", _ROUTING), ("[retry]", _RETRY),
):  # fmt: skip
    for _k in _keys:
        _ELSEWHERE.setdefault(_k, _section)


def _array_of_tables(label: str, value: Any, path: str, toml_name: str) -> list[Any]:
    if isinstance(value, dict):
        _fail(label, path, f"an array of tables (write [[{toml_name}]], not [{toml_name}])", value)
    if not isinstance(value, list):
        _fail(label, path, f"an array of tables ([[{toml_name}]])", value)
    return value


def _parse_run(label: str, data: Any) -> RunConfig:
    t = _Table(label, data, "run", _RUN, "[run]", _ELSEWHERE)
    d = RunConfig()
    arrival = cast(Arrival, t.enum("arrival", d.arrival, ("closed", "constant", "poisson")))
    rate = t.num("rate", d.rate)
    if arrival != "closed" and rate <= 0:
        raise _err(
            label,
            "run.rate",
            f'a number > 0 with arrival = "{arrival}" (open-loop arrival needs a rate)',
            _show(t.data.get("rate", 0)) + (" (the default)" if "rate" not in t.data else ""),
        )
    workers: int | Literal["auto"] = d.workers
    if t.has("workers"):
        w = t.data["workers"]
        if w == "auto" and isinstance(w, str):
            workers = "auto"
        elif _is_int(w) and w >= 1:
            workers = w
        else:
            t.fail("workers", 'an integer >= 1 or "auto"')
    return RunConfig(
        concurrency=t.int_("concurrency", d.concurrency, 1),
        rate=rate,
        burst=t.int_("burst", d.burst, 1),
        tpm=t.int_("tpm", d.tpm, 0),
        arrival=arrival,
        requests=t.int_("requests", d.requests, 0),
        duration=t.duration("duration", d.duration),
        timeout=t.duration("timeout", d.timeout, positive=True),
        stream=t.bool_("stream", d.stream),
        seed=t.int_("seed", d.seed),
        workers=workers,
        grace=t.duration("grace", d.grace),
    )


def _parse_output(label: str, data: Any) -> OutputConfig:
    t = _Table(label, data, "output", _OUTPUT, "[output]", _ELSEWHERE)
    d = OutputConfig()
    results = t.str_("results", d.results, "a non-empty path")
    try:
        results.format(name="x")
    except (KeyError, IndexError, ValueError, AttributeError):
        t.fail("results", "a path where {name} is the only placeholder (write {{ and }} for braces)")
    return OutputConfig(results=results, save_text=t.bool_("save_text", d.save_text))


def _parse_endpoints(label: str, data: Any) -> dict[str, EndpointConfig]:
    if data is None:
        raise _err(
            label, "endpoints", 'at least one [endpoints.NAME] table (such as base_url = "sim")', "none"
        )
    if not isinstance(data, dict):
        _fail(label, "endpoints", "a table of [endpoints.NAME] tables", data)
    if not data:
        raise _err(label, "endpoints", "at least one [endpoints.NAME] table", "an empty table")
    out: dict[str, EndpointConfig] = {}
    for name, value in data.items():
        path = _join("endpoints", name)
        t = _Table(label, value, path, _ENDPOINT, "an [endpoints.NAME] table")
        base_url = t.str_("base_url", None, 'an http(s):// URL or "sim"')
        if base_url != "sim" and not re.match(r"https?://[^\s/]+", base_url):
            t.fail("base_url", 'an http(s):// URL (such as "http://127.0.0.1:8000/v1") or "sim"')
        key_env: str | None = None
        if t.has("api_key_env"):
            v = t.data["api_key_env"]
            if not isinstance(v, str) or not _ENV_NAME.fullmatch(v):
                # Never echo the value: people paste the key itself here.
                got = "a value that is not a variable name (not shown, it may be a secret)"
                if not isinstance(v, str):
                    got = _show(v)
                raise _err(
                    label,
                    t.p("api_key_env"),
                    "the NAME of an environment variable (such as OXLO_API_KEY)",
                    got,
                )
            key_env = v
        out[name] = EndpointConfig(
            name=name,
            base_url=base_url,
            api_key_env=key_env,
            max_connections=t.int_("max_connections", 1000, 1),
            insecure=t.bool_("insecure", False),
        )
    return out


def _parse_models(label: str, data: Any, endpoints: Mapping[str, EndpointConfig]) -> tuple[ModelConfig, ...]:
    if data is None:
        raise _err(label, "models", "at least one [[models]] table with a name", "none")
    items = _array_of_tables(label, data, "models", "models")
    if not items:
        raise _err(label, "models", "at least one [[models]] table", "an empty array")
    seen: dict[str, int] = {}
    out: list[ModelConfig] = []
    for i, value in enumerate(items):
        t = _Table(label, value, _join("models", i), _MODEL, "[[models]]")
        name = t.str_("name", None, "a model name (non-empty string)")
        if name in seen:
            t.fail("name", f"a unique model name (models.{seen[name]}.name is the same)")
        seen[name] = i
        endpoint = t.str_("endpoint", "default", "the name of an [endpoints.NAME] table")
        if endpoint not in endpoints:
            hint = _did_you_mean(endpoint, endpoints)
            what = "the name of an [endpoints.NAME] table" + (
                f' (did you mean "{hint}"?)' if hint else f" (defined: {', '.join(endpoints)})"
            )
            if t.has("endpoint"):
                t.fail("endpoint", what)
            raise _err(label, t.p("endpoint"), what, '"default" (the default; no [endpoints.default] table)')
        out.append(
            ModelConfig(
                name=name,
                endpoint=endpoint,
                weight=t.num("weight", 1.0),
                max_tokens=t.opt_int("max_tokens", 1),
                max_tokens_param=t.enum(
                    "max_tokens_param", "max_tokens", ("max_tokens", "max_completion_tokens")
                ),
                temperature=t.opt_num("temperature", 0.0, 2.0),
                price_per_request=t.num("price_per_request", 0.0),
                price_per_1m_input=t.num("price_per_1m_input", 0.0),
                price_per_1m_output=t.num("price_per_1m_output", 0.0),
            )
        )
    if all(m.weight == 0 for m in out):
        raise _err(label, "models", "at least one model with weight > 0", "every weight 0")
    return tuple(out)


def _parse_prompts(label: str, data: Any, base: Path) -> PromptsConfig:
    if data is None:
        raise _err(label, "prompts", "a [prompts] table with one of file, items or synthetic", "none")
    t = _Table(label, data, "prompts", _PROMPTS, "[prompts]", _ELSEWHERE)
    sources = [k for k in ("file", "items", "synthetic") if t.has(k)]
    if len(sources) != 1:
        raise _err(
            label,
            "prompts",
            "exactly one of prompts.file, prompts.items, prompts.synthetic",
            "none" if not sources else " and ".join(sources),
        )
    repeat = t.int_("repeat", 1, 1)
    if t.has("file"):
        rel = t.str_("file", None, "a path to a JSONL file")
        path = base / Path(rel).expanduser()
        try:
            with open(path, "rb"):
                pass
        except FileNotFoundError:
            raise _err(
                label, "prompts.file", "an existing file", f"{_show(rel)} (no such file: {path})"
            ) from None
        except IsADirectoryError:
            raise _err(label, "prompts.file", "a file", f"{_show(rel)} (a directory: {path})") from None
        except PermissionError:
            raise _err(
                label, "prompts.file", "a readable file", f"{_show(rel)} (permission denied: {path})"
            ) from None
        except OSError as e:
            raise _err(
                label, "prompts.file", "a readable file", f"{_show(rel)} ({e.strerror}: {path})"
            ) from None
        return PromptsConfig(file=path, repeat=repeat)
    if t.has("items"):
        items = t.str_list("items", "prompt strings", allow_empty=False)
        return PromptsConfig(items=tuple(items or ()), repeat=repeat)
    s = _Table(label, t.data["synthetic"], "prompts.synthetic", _SYNTHETIC, "prompts.synthetic")
    if not s.has("count"):
        raise _err(label, "prompts.synthetic.count", "an integer >= 1", "nothing (the key is required)")
    syn = SyntheticConfig(
        count=s.int_("count", 1, 1),
        input_tokens=s.int_("input_tokens", 200, 1),
        output_tokens=s.int_("output_tokens", 64, 1),
    )
    return PromptsConfig(synthetic=syn, repeat=repeat)


def _model_names(
    label: str, t: _Table, key: str, models: Sequence[str], allow_empty: bool
) -> tuple[str, ...]:
    names = t.str_list(key, "model names", allow_empty=allow_empty)
    if names is None:
        if not allow_empty:
            raise _err(label, t.p(key), "a non-empty array of model names", "nothing (the key is required)")
        return ()
    for i, n in enumerate(names):
        if n not in models:
            hint = _did_you_mean(n, models)
            what = "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else "")
            _fail(label, _join(t.p(key), i), what, n)
    return tuple(names)


def _parse_routing(label: str, data: Any, models: Sequence[str]) -> RoutingConfig:
    t = _Table(label, data, "routing", _ROUTING, "[routing]", _ELSEWHERE)
    strategy = cast(Strategy, t.enum("strategy", "weighted", ("weighted", "round_robin", "least_loaded")))
    rules: list[RoutingRule] = []
    if t.has("rules"):
        for i, value in enumerate(_array_of_tables(label, t.data["rules"], "routing.rules", "routing.rules")):
            r = _Table(label, value, _join("routing.rules", i), _RULE, "[[routing.rules]]")
            tag = r.str_("tag", None, "a tag (non-empty string)")
            rules.append(
                RoutingRule(
                    tag=tag,
                    models=_model_names(label, r, "models", models, allow_empty=False),
                    fallback=_model_names(label, r, "fallback", models, allow_empty=True),
                )
            )
    return RoutingConfig(strategy=strategy, rules=tuple(rules))


def _parse_retry(label: str, data: Any) -> RetryConfig:
    t = _Table(label, data, "retry", _RETRY, "[retry]", _ELSEWHERE)
    d = RetryConfig()
    backoff = t.duration("backoff", d.backoff)
    backoff_max = t.duration("backoff_max", d.backoff_max)
    if backoff_max < backoff:
        t.fail("backoff_max", f"a duration >= retry.backoff ({_fmt_duration(backoff)})")
    on = d.on
    if t.has("on"):
        v = t.data["on"]
        if not isinstance(v, list):
            t.fail("on", 'an array of HTTP statuses (400-599) and "timeout" / "connection" / "stream"')
        items: set[int | str] = set()
        for i, item in enumerate(v):
            if (_is_int(item) and 400 <= item <= 599) or (isinstance(item, str) and item in _RETRY_WORDS):
                items.add(item)
            else:
                hint = _did_you_mean(item, _RETRY_WORDS) if isinstance(item, str) else None
                extra = f' (did you mean "{hint}"?)' if hint else ""
                _fail(
                    label,
                    _join("retry.on", i),
                    f'an HTTP status 400-599 or "timeout" / "connection" / "stream"{extra}',
                    item,
                )
        on = frozenset(items)
    return RetryConfig(
        max_attempts=t.int_("max_attempts", d.max_attempts, 1),
        backoff=backoff,
        backoff_max=backoff_max,
        on=on,
    )


def parse_sim_profiles(table: Any, file_label: str) -> dict[str, SimModelProfile]:
    """Validate a `[sim]` table (the value of the document's "sim" key) into profiles by model name.

    Shared by `load_workload` and `load_sim_section`; error paths read `sim.models."NAME".key`.
    """
    t = _Table(file_label, table, "sim", _SIM, "[sim]")
    if not t.has("models"):
        return {}
    models = t.data["models"]
    if not isinstance(models, dict):
        _fail(file_label, "sim.models", 'tables [sim.models."NAME"]', models)
    d = SimModelProfile()
    out: dict[str, SimModelProfile] = {}
    for name, value in models.items():
        p = _Table(file_label, value, _join("sim.models", name), _PROFILE, 'a [sim.models."NAME"] table')
        out[name] = SimModelProfile(
            ttft=p.duration("ttft", d.ttft),
            tokens_per_s=p.num("tokens_per_s", d.tokens_per_s),
            output_tokens=p.int_("output_tokens", d.output_tokens, 1),
            capacity=p.int_("capacity", d.capacity, 1),
            jitter=p.num("jitter", d.jitter, 0.0, 1.0),
            error_rate=p.num("error_rate", d.error_rate, 0.0, 1.0),
            rate_limit=p.num("rate_limit", d.rate_limit),
            retry_after=p.duration("retry_after", d.retry_after),
            throttle_rate=p.num("throttle_rate", d.throttle_rate, 0.0, 1.0),
            reset_rate=p.num("reset_rate", d.reset_rate, 0.0, 1.0),
            abort_rate=p.num("abort_rate", d.abort_rate, 0.0, 1.0),
            malformed_rate=p.num("malformed_rate", d.malformed_rate, 0.0, 1.0),
            stall_rate=p.num("stall_rate", d.stall_rate, 0.0, 1.0),
            stall=p.duration("stall", d.stall),
            usage=p.bool_("usage", d.usage),
        )
    return out


def load_sim_section(path: str | Path) -> dict[str, SimModelProfile]:
    """Read only the `[sim.models.*]` tables of a workload or of a file holding just those tables."""
    label = str(path)
    raw = _read_toml(Path(path), label)
    if "sim" not in raw:
        raise _err(label, "sim.models", 'one or more [sim.models."NAME"] tables', "no [sim] table")
    return parse_sim_profiles(raw["sim"], label)


def load_workload(path: str | Path, overrides: Sequence[str] = ()) -> Workload:
    """Read, override (--set) and validate a workload file. Raises WorkloadError with the user's words."""
    p = Path(path)
    label = str(path)
    raw = _read_toml(p, label)
    for arg in overrides:
        apply_override(raw, arg, label)
    return _build(raw, p, label)


def _build(raw: dict[str, Any], path: Path, label: str) -> Workload:
    top = _Table(label, raw, "", _TOP, "the top level", _ELSEWHERE)
    name = top.str_("name", path.stem or "workload", "a non-empty string")
    run = _parse_run(label, raw.get("run", {}))
    output = _parse_output(label, raw.get("output", {}))
    endpoints = _parse_endpoints(label, raw.get("endpoints"))
    models = _parse_models(label, raw.get("models"), endpoints)
    prompts = _parse_prompts(label, raw.get("prompts"), path.parent)
    routing = _parse_routing(label, raw.get("routing", {}), [m.name for m in models])
    retry = _parse_retry(label, raw.get("retry", {}))
    sim = parse_sim_profiles(raw["sim"], label) if "sim" in raw else {}
    return Workload(
        path=path,
        name=name,
        run=run,
        output=output,
        endpoints=endpoints,
        models=models,
        prompts=prompts,
        routing=routing,
        retry=retry,
        sim=sim,
        raw=raw,
    )


# --------------------------------------------------------------------------------------------
# API keys
# --------------------------------------------------------------------------------------------


def resolve_api_key(w: Workload, endpoint: str) -> str | None:
    """The key for one endpoint from its `api_key_env` variable; None when the endpoint needs no key."""
    label = str(w.path)
    ep = w.endpoints.get(endpoint)
    if ep is None:
        hint = _did_you_mean(endpoint, w.endpoints)
        raise _err(
            label,
            _join("endpoints", endpoint),
            "an endpoint defined in [endpoints]" + (f' (did you mean "{hint}"?)' if hint else ""),
            "no such table",
        )
    if ep.api_key_env is None:
        return None
    value = os.environ.get(ep.api_key_env, "")
    if not value.strip():
        state = "is not set" if ep.api_key_env not in os.environ else "is not set (it is empty)"
        raise WorkloadError(
            f"{label}: {_join(_join('endpoints', endpoint), 'api_key_env')}: environment variable "
            f"{ep.api_key_env} {state}; expected it to hold the API key "
            f"(export {ep.api_key_env}=..., or remove api_key_env for a server that needs no key)"
        )
    return value


# --------------------------------------------------------------------------------------------
# Prompts: streaming, validation
# --------------------------------------------------------------------------------------------

_WORD_TEXT = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law car "
    "city community name president team minute idea kid body information back parent face others level "
    "office door health person art war history party result change morning reason research girl guy "
    "moment air teacher force education river garden window market light table paper music energy "
    "model token engine signal memory cloud server request answer latency stream batch vector graph "
    "simple quick bright quiet gentle rapid careful early final green heavy local modern recent strong "
    "build write read learn measure compare explain describe summarize classify extract translate"
)
_WORDS = tuple(_WORD_TEXT.split())


def _synthetic_text(seed: int, index: int, input_tokens: int) -> str:
    rng = random.Random(f"oxconsole-synthetic:{seed}:{index}")
    target = max(1, input_tokens * 4)
    words: list[str] = []
    length = -1
    while length < target:
        w = rng.choice(_WORDS)
        words.append(w)
        length += len(w) + 1
    return " ".join(words)


def _prompts_label(w: Workload) -> str:
    return str(w.prompts.file) if w.prompts.file is not None else f"{w.path}: prompts"


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        n = 0
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    n += len(text)
        return n
    return 0


_LineParts = tuple[str, str | None, str | None, int | None, Any]
"""(id, tag, model, max_tokens, prompt string or messages list)"""


def _parse_line(line: bytes, lineno: int, label: str, models: frozenset[str]) -> _LineParts:
    """Validate one non-blank JSONL line; raise WorkloadError naming the line."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        detail = e.msg.split(":")[0] if e.msg else "invalid JSON"
        got = f"invalid JSON ({detail} at column {e.pos + 1})"
        raise WorkloadError(f"{label}: line {lineno}: expected a JSON object, got {got}") from None
    if type(obj) is not dict:
        _fail(label, f"line {lineno}", 'a JSON object with "prompt" or "messages"', obj)
    prompt = obj.get("prompt")
    messages = obj.get("messages")
    where = f"line {lineno}"
    if prompt is not None:
        if messages is not None:
            raise _err(label, where, 'only one of "prompt" or "messages"', "both")
        if type(prompt) is not str or not prompt:
            _fail(label, f"{where}: prompt", "a non-empty string", prompt)
        body: Any = prompt
    elif messages is not None:
        if type(messages) is not list or not messages:
            _fail(label, f"{where}: messages", 'a non-empty array of {"role", "content"} objects', messages)
        for j, m in enumerate(messages):
            if type(m) is not dict or type(m.get("role")) is not str:
                _fail(label, f"{where}: messages.{j}", 'an object with a "role" string and "content"', m)
            c = m.get("content")
            if c is not None and type(c) is not str and type(c) is not list:
                _fail(label, f"{where}: messages.{j}.content", "a string or an array of content parts", c)
        body = messages
    else:
        keys = ", ".join(f'"{k}"' for k in list(obj)[:6]) or "no keys"
        raise _err(label, where, 'a JSON object with "prompt" or "messages"', f"an object with {keys}")
    pid = obj.get("id")
    if pid is None:
        sid = str(lineno)
    elif type(pid) is str and pid:
        sid = pid
    elif type(pid) is int:
        sid = str(pid)
    else:
        _fail(label, f"{where}: id", "a non-empty string or an integer", pid)
    tag = obj.get("tag")
    if tag is not None and (type(tag) is not str or not tag):
        _fail(label, f"{where}: tag", "a non-empty string", tag)
    model = obj.get("model")
    if model is not None and (type(model) is not str or model not in models):
        if type(model) is not str:
            _fail(label, f"{where}: model", "the name of a model in [[models]]", model)
        hint = _did_you_mean(model, models)
        _fail(
            label,
            f"{where}: model",
            "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else ""),
            model,
        )
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        _fail(label, f"{where}: max_tokens", "an integer >= 1", max_tokens)
    return sid, tag, model, max_tokens, body


def _file_lines(w: Workload) -> Iterator[tuple[int, bytes]]:
    """(line number, line) for the non-blank lines of the prompts file, streamed."""
    path = w.prompts.file
    assert path is not None
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below; open errors need their own message
    except OSError as e:
        raise _err(
            str(w.path), "prompts.file", "a readable file", f"{_show(str(path))} ({e.strerror})"
        ) from None
    with f:
        for lineno, line in enumerate(f, 1):
            if line.isspace() or not line:
                continue
            yield lineno, line


def _one_pass(w: Workload, suffix: str) -> Iterator[Prompt]:
    pc = w.prompts
    if pc.file is not None:
        label = _prompts_label(w)
        models = frozenset(m.name for m in w.models)
        for lineno, line in _file_lines(w):
            sid, tag, model, max_tokens, body = _parse_line(line, lineno, label, models)
            if isinstance(body, str):
                messages: list[dict[str, Any]] = [{"role": "user", "content": body}]
                chars = len(body)
            else:
                messages = body
                chars = sum(_content_chars(m.get("content")) for m in messages)
            yield Prompt(sid + suffix, messages, tag, model, max_tokens, chars)
    elif pc.items is not None:
        for i, text in enumerate(pc.items):
            yield Prompt(f"item-{i}{suffix}", [{"role": "user", "content": text}], input_chars=len(text))
    elif pc.synthetic is not None:
        syn = pc.synthetic
        for i in range(syn.count):
            text = _synthetic_text(w.run.seed, i, syn.input_tokens)
            yield Prompt(
                f"syn-{i}{suffix}",
                [{"role": "user", "content": text}],
                max_tokens=syn.output_tokens,
                input_chars=len(text),
            )


def _count_one_pass(w: Workload) -> int:
    pc = w.prompts
    if pc.items is not None:
        return len(pc.items)
    if pc.synthetic is not None:
        return pc.synthetic.count
    return sum(1 for _ in _file_lines(w))


def iter_prompts(w: Workload) -> Iterator[Prompt]:
    """Stream the run's prompts: pass after pass (repeat), capped by run.requests, or cycling for duration.

    Ids are the plain prompt ids when only one pass is possible, otherwise `f"{id}#{pass}"`, pass from 1.
    The prompts file is read line by line, never whole.
    """
    run, pc = w.run, w.prompts
    total: int | None = None
    passes: int | None = None
    if run.requests > 0:
        total = run.requests
        multi = pc.repeat > 1 or run.requests > _count_one_pass(w)
    elif run.duration > 0:
        multi = True
    else:
        passes = pc.repeat
        multi = pc.repeat > 1
    emitted = 0
    n = 1
    while passes is None or n <= passes:
        got = 0
        for prompt in _one_pass(w, f"#{n}" if multi else ""):
            got += 1
            yield prompt
            emitted += 1
            if total is not None and emitted >= total:
                return
        if got == 0:
            raise _err(_prompts_label(w), "", "at least one prompt", "an empty file")
        n += 1


def check_prompts(w: Workload) -> PromptStats:
    """Validate the whole prompt source before anything is sent; count prompts, tags and pinned models."""
    pc, run = w.prompts, w.run
    tags: set[str] = set()
    pinned: set[str] = set()
    if pc.file is not None:
        label = _prompts_label(w)
        models = frozenset(m.name for m in w.models)
        # Ids are checked for uniqueness by their 64-bit hashes (8 bytes a line, not a set of
        # strings); the few lines whose hashes repeat are then compared by their ids.
        keys = array("q")
        key = keys.append
        count = 0
        for lineno, line in _file_lines(w):
            sid, tag, model, _, _ = _parse_line(line, lineno, label, models)
            count += 1
            if tag is not None:
                tags.add(tag)
            if model is not None:
                pinned.add(model)
            key(hash(sid))
        if count == 0:
            raise _err(label, "", "at least one prompt (one JSON object a line)", "an empty file")
        _check_unique(w, keys, label, models)
    else:
        count = _count_one_pass(w)
    if run.requests > 0:
        total: int | None = run.requests
    elif run.duration > 0:
        total = None
    else:
        total = count * pc.repeat
    return PromptStats(
        count=count, total_requests=total, tags=frozenset(tags), models_referenced=frozenset(pinned)
    )


def _check_unique(w: Workload, keys: array[int], label: str, models: frozenset[str]) -> None:
    """Raise at the first line whose id an earlier line has (only lines whose hash repeats are
    looked at again, by their ids)."""
    from oxconsole.idset import repeated

    twice = repeated(keys)
    if not twice:
        return
    first: dict[str, int] = {}
    for lineno, line in _file_lines(w):
        sid = _parse_line(line, lineno, label, models)[0]
        if hash(sid) not in twice:
            continue
        if sid in first:
            raise _err(
                label, f"line {lineno}: id", f"a unique id (line {first[sid]} has the same id)", _show(sid)
            )
        first[sid] = lineno


# --------------------------------------------------------------------------------------------
# describe(): what `oxconsole validate` prints
# --------------------------------------------------------------------------------------------


def _fmt_num(x: float) -> str:
    return f"{x:g}"


def describe(w: Workload, stats: PromptStats) -> str:
    """Human-readable summary of what would run, followed by warnings. Never shows key values."""
    lines: list[str] = [f"workload  {w.name}  ({w.path})", "", "endpoints"]
    width = max(len(n) for n in w.endpoints)
    for ep in w.endpoints.values():
        url = "sim (embedded simulator)" if ep.base_url == "sim" else ep.base_url
        if ep.api_key_env is None:
            key = "no key"
        else:
            state = "set" if os.environ.get(ep.api_key_env, "").strip() else "NOT SET"
            key = f"key from ${ep.api_key_env} ({state})"
        extra = ", TLS verification OFF" if ep.insecure else ""
        lines.append(f"  {ep.name:<{width}}  {url}  {key}, max {ep.max_connections} connections{extra}")

    lines += ["", "models"]
    total_w = sum(m.weight for m in w.models) or 1.0
    width = max(len(m.name) for m in w.models)
    for m in w.models:
        bits = [f"endpoint {m.endpoint}", f"weight {_fmt_num(m.weight)} ({m.weight / total_w:.0%})"]
        bits.append(
            f"{m.max_tokens_param} {m.max_tokens}" if m.max_tokens is not None else "max_tokens not sent"
        )
        if m.temperature is not None:
            bits.append(f"temperature {_fmt_num(m.temperature)}")
        prices = []
        if m.price_per_request:
            prices.append(f"{_fmt_num(m.price_per_request)}/request")
        if m.price_per_1m_input:
            prices.append(f"{_fmt_num(m.price_per_1m_input)}/1M input")
        if m.price_per_1m_output:
            prices.append(f"{_fmt_num(m.price_per_1m_output)}/1M output")
        bits.append("price " + " + ".join(prices) if prices else "no pricing")
        lines.append(f"  {m.name:<{width}}  " + ", ".join(bits))

    pc, run = w.prompts, w.run
    if pc.file is not None:
        source = f"file {pc.file}"
    elif pc.items is not None:
        source = "inline items"
    else:
        assert pc.synthetic is not None
        s = pc.synthetic
        source = f"synthetic (~{s.input_tokens} input tokens, max_tokens {s.output_tokens}, seed {run.seed})"
    lines += [
        "",
        "prompts",
        f"  {source}: {stats.count} prompt{'s' if stats.count != 1 else ''}"
        + (f" x repeat {pc.repeat}" if pc.repeat > 1 else ""),
    ]
    if stats.tags:
        lines.append("  tags: " + ", ".join(sorted(stats.tags)))
    if stats.models_referenced:
        lines.append("  pinned to models by the file: " + ", ".join(sorted(stats.models_referenced)))
    if stats.total_requests is None:
        lines.append(
            f"  requests: cycling through the prompts until the duration ({_fmt_duration(run.duration)})"
        )
    else:
        cap = f" (or until {_fmt_duration(run.duration)})" if run.duration > 0 else ""
        lines.append(f"  requests: {stats.total_requests}{cap}")

    lines += ["", "routing", f"  strategy {w.routing.strategy}"]
    for i, r in enumerate(w.routing.rules):
        fb = f", fallback {' -> '.join(r.fallback)}" if r.fallback else ""
        lines.append(f"  rule {i}: tag {r.tag!r} -> {', '.join(r.models)}{fb}")

    rate = f"{_fmt_num(run.rate)}/s (burst {run.burst})" if run.rate > 0 else "unlimited"
    lines += [
        "",
        "run",
        f"  concurrency {run.concurrency}, rate {rate}, arrival {run.arrival}, "
        f"tpm {run.tpm if run.tpm else 'off'}",
        f"  duration {_fmt_duration(run.duration) if run.duration else 'none'}, "
        f"timeout {_fmt_duration(run.timeout)} per attempt, grace {_fmt_duration(run.grace)}, "
        f"stream {'on' if run.stream else 'off'}, seed {run.seed}, workers {run.workers}",
    ]
    rt = w.retry
    on = sorted((x for x in rt.on if isinstance(x, int)), key=int)
    on_txt = " ".join(str(x) for x in on) + "".join(f" {x}" for x in _RETRY_WORDS if x in rt.on)
    if rt.max_attempts == 1:
        lines.append("  retry: off (max_attempts = 1)")
    else:
        lines.append(
            f"  retry: up to {rt.max_attempts} attempts, backoff {_fmt_duration(rt.backoff)} "
            f"(max {_fmt_duration(rt.backoff_max)}), on {on_txt.strip() or 'nothing'}"
        )
    lines.append(
        f"  results: {w.output.results.format(name=w.name)}"
        + (" (response text kept)" if w.output.save_text else " (no response text)")
    )

    warnings = _warnings(w, stats)
    if warnings:
        lines += ["", "warnings"] + [f"  - {x}" for x in warnings]
    return "\n".join(lines) + "\n"


def _warnings(w: Workload, stats: PromptStats) -> list[str]:
    out: list[str] = []
    run = w.run
    seen_tags: set[str] = set()
    for i, r in enumerate(w.routing.rules):
        if r.tag in seen_tags:
            out.append(
                f"routing.rules.{i}: tag {r.tag!r} is matched by an earlier rule; this rule never applies"
            )
        elif r.tag not in stats.tags:
            out.append(f"routing.rules.{i}: no prompt has tag {r.tag!r}; the rule never applies")
        seen_tags.add(r.tag)
    if run.rate == 0 and run.arrival == "closed":
        out.append(
            f'rate = 0 with arrival = "closed": dispatch is unlimited, bounded only by '
            f"concurrency ({run.concurrency})"
        )
    used = {m.endpoint for m in w.models}
    for name in w.endpoints:
        if name not in used:
            out.append(f"endpoints.{name}: no model uses this endpoint")
    for ep in w.endpoints.values():
        if ep.insecure:
            out.append(f"endpoints.{ep.name}: insecure = true, TLS certificates are not verified")
    names = [m.name for m in w.models]
    for m in w.models:
        if m.weight == 0:
            out.append(
                f"model {m.name!r} has weight 0: it gets traffic only through routing rules and fallbacks"
            )
    if w.sim:
        if not any(ep.base_url == "sim" for ep in w.endpoints.values()):
            out.append(
                '[sim.models] profiles are given but no endpoint has base_url = "sim"; they are unused'
            )
        for name in w.sim:
            if name not in names:
                hint = _did_you_mean(name, names)
                out.append(
                    f"sim.models.{json.dumps(name)}: no model of that name"
                    + (f' (did you mean "{hint}"?)' if hint else "")
                )
    if run.requests and run.requests < stats.count:
        out.append(
            f"run.requests = {run.requests} sends only the first {run.requests} of {stats.count} prompts"
        )
    if run.duration > 0 and 0 < run.duration < run.timeout:
        out.append("run.duration is shorter than run.timeout")
    return out
