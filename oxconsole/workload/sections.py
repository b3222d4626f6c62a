"""Each table of the workload file validated into its config dataclass (unknown keys rejected).

Why this module exists: one parser per TOML section, with the keys each section accepts, so
`load_workload` reads as the list of sections and a section's rules live in one function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from oxconsole.workload.errors import did_you_mean, error, fail, join_key, show
from oxconsole.workload.schema import (
    RETRY_WORDS,
    Arrival,
    EndpointConfig,
    ModelConfig,
    OutputConfig,
    PromptsConfig,
    RetryConfig,
    RoutingConfig,
    RoutingRule,
    RunConfig,
    SimModelProfile,
    Strategy,
    SyntheticConfig,
    Workload,
)
from oxconsole.workload.values import Table, fmt_duration, is_int

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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

_ELSEWHERE: dict[str, str] = {}
for _section, _keys in (
    ("[run]", _RUN), ("[output]", _OUTPUT), ("[prompts]", _PROMPTS),
    ("[routing]", _ROUTING), ("[retry]", _RETRY),
):  # fmt: skip
    for _k in _keys:
        _ELSEWHERE.setdefault(_k, _section)


def _array_of_tables(label: str, value: Any, path: str, toml_name: str) -> list[Any]:
    if isinstance(value, dict):
        fail(label, path, f"an array of tables (write [[{toml_name}]], not [{toml_name}])", value)
    if not isinstance(value, list):
        fail(label, path, f"an array of tables ([[{toml_name}]])", value)
    return value


def _parse_run(label: str, data: Any) -> RunConfig:
    t = Table(label, data, "run", _RUN, "[run]", _ELSEWHERE)
    d = RunConfig()
    arrival = cast(Arrival, t.enum("arrival", d.arrival, ("closed", "constant", "poisson")))
    rate = t.num("rate", d.rate)
    if arrival != "closed" and rate <= 0:
        raise error(
            label,
            "run.rate",
            f'a number > 0 with arrival = "{arrival}" (open-loop arrival needs a rate)',
            show(t.data.get("rate", 0)) + (" (the default)" if "rate" not in t.data else ""),
        )
    workers: int | Literal["auto"] = d.workers
    if t.has("workers"):
        w = t.data["workers"]
        if w == "auto" and isinstance(w, str):
            workers = "auto"
        elif is_int(w) and w >= 1:
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
    t = Table(label, data, "output", _OUTPUT, "[output]", _ELSEWHERE)
    d = OutputConfig()
    results = t.str_("results", d.results, "a non-empty path")
    try:
        results.format(name="x")
    except (KeyError, IndexError, ValueError, AttributeError):
        t.fail("results", "a path where {name} is the only placeholder (write {{ and }} for braces)")
    return OutputConfig(results=results, save_text=t.bool_("save_text", d.save_text))


def _parse_endpoints(label: str, data: Any) -> dict[str, EndpointConfig]:
    if data is None:
        raise error(
            label, "endpoints", 'at least one [endpoints.NAME] table (such as base_url = "sim")', "none"
        )
    if not isinstance(data, dict):
        fail(label, "endpoints", "a table of [endpoints.NAME] tables", data)
    if not data:
        raise error(label, "endpoints", "at least one [endpoints.NAME] table", "an empty table")
    out: dict[str, EndpointConfig] = {}
    for name, value in data.items():
        path = join_key("endpoints", name)
        t = Table(label, value, path, _ENDPOINT, "an [endpoints.NAME] table")
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
                    got = show(v)
                raise error(
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
        raise error(label, "models", "at least one [[models]] table with a name", "none")
    items = _array_of_tables(label, data, "models", "models")
    if not items:
        raise error(label, "models", "at least one [[models]] table", "an empty array")
    seen: dict[str, int] = {}
    out: list[ModelConfig] = []
    for i, value in enumerate(items):
        t = Table(label, value, join_key("models", i), _MODEL, "[[models]]")
        name = t.str_("name", None, "a model name (non-empty string)")
        if name in seen:
            t.fail("name", f"a unique model name (models.{seen[name]}.name is the same)")
        seen[name] = i
        endpoint = t.str_("endpoint", "default", "the name of an [endpoints.NAME] table")
        if endpoint not in endpoints:
            hint = did_you_mean(endpoint, endpoints)
            what = "the name of an [endpoints.NAME] table" + (
                f' (did you mean "{hint}"?)' if hint else f" (defined: {', '.join(endpoints)})"
            )
            if t.has("endpoint"):
                t.fail("endpoint", what)
            raise error(label, t.p("endpoint"), what, '"default" (the default; no [endpoints.default] table)')
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
        raise error(label, "models", "at least one model with weight > 0", "every weight 0")
    return tuple(out)


def _parse_prompts(label: str, data: Any, base: Path) -> PromptsConfig:
    if data is None:
        raise error(label, "prompts", "a [prompts] table with one of file, items or synthetic", "none")
    t = Table(label, data, "prompts", _PROMPTS, "[prompts]", _ELSEWHERE)
    sources = [k for k in ("file", "items", "synthetic") if t.has(k)]
    if len(sources) != 1:
        raise error(
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
            raise error(
                label, "prompts.file", "an existing file", f"{show(rel)} (no such file: {path})"
            ) from None
        except IsADirectoryError:
            raise error(label, "prompts.file", "a file", f"{show(rel)} (a directory: {path})") from None
        except PermissionError:
            raise error(
                label, "prompts.file", "a readable file", f"{show(rel)} (permission denied: {path})"
            ) from None
        except OSError as e:
            raise error(
                label, "prompts.file", "a readable file", f"{show(rel)} ({e.strerror}: {path})"
            ) from None
        return PromptsConfig(file=path, repeat=repeat)
    if t.has("items"):
        items = t.str_list("items", "prompt strings", allow_empty=False)
        return PromptsConfig(items=tuple(items or ()), repeat=repeat)
    s = Table(label, t.data["synthetic"], "prompts.synthetic", _SYNTHETIC, "prompts.synthetic")
    if not s.has("count"):
        raise error(label, "prompts.synthetic.count", "an integer >= 1", "nothing (the key is required)")
    syn = SyntheticConfig(
        count=s.int_("count", 1, 1),
        input_tokens=s.int_("input_tokens", 200, 1),
        output_tokens=s.int_("output_tokens", 64, 1),
    )
    return PromptsConfig(synthetic=syn, repeat=repeat)


def _model_names(label: str, t: Table, key: str, models: Sequence[str], allow_empty: bool) -> tuple[str, ...]:
    names = t.str_list(key, "model names", allow_empty=allow_empty)
    if names is None:
        if not allow_empty:
            raise error(label, t.p(key), "a non-empty array of model names", "nothing (the key is required)")
        return ()
    for i, n in enumerate(names):
        if n not in models:
            hint = did_you_mean(n, models)
            what = "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else "")
            fail(label, join_key(t.p(key), i), what, n)
    return tuple(names)


def _parse_routing(label: str, data: Any, models: Sequence[str]) -> RoutingConfig:
    t = Table(label, data, "routing", _ROUTING, "[routing]", _ELSEWHERE)
    strategy = cast(Strategy, t.enum("strategy", "weighted", ("weighted", "round_robin", "least_loaded")))
    rules: list[RoutingRule] = []
    if t.has("rules"):
        for i, value in enumerate(_array_of_tables(label, t.data["rules"], "routing.rules", "routing.rules")):
            r = Table(label, value, join_key("routing.rules", i), _RULE, "[[routing.rules]]")
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
    t = Table(label, data, "retry", _RETRY, "[retry]", _ELSEWHERE)
    d = RetryConfig()
    backoff = t.duration("backoff", d.backoff)
    backoff_max = t.duration("backoff_max", d.backoff_max)
    if backoff_max < backoff:
        t.fail("backoff_max", f"a duration >= retry.backoff ({fmt_duration(backoff)})")
    on = d.on
    if t.has("on"):
        v = t.data["on"]
        if not isinstance(v, list):
            t.fail("on", 'an array of HTTP statuses (400-599) and "timeout" / "connection" / "stream"')
        items: set[int | str] = set()
        for i, item in enumerate(v):
            if (is_int(item) and 400 <= item <= 599) or (isinstance(item, str) and item in RETRY_WORDS):
                items.add(item)
            else:
                hint = did_you_mean(item, RETRY_WORDS) if isinstance(item, str) else None
                extra = f' (did you mean "{hint}"?)' if hint else ""
                fail(
                    label,
                    join_key("retry.on", i),
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
    t = Table(file_label, table, "sim", _SIM, "[sim]")
    if not t.has("models"):
        return {}
    models = t.data["models"]
    if not isinstance(models, dict):
        fail(file_label, "sim.models", 'tables [sim.models."NAME"]', models)
    d = SimModelProfile()
    out: dict[str, SimModelProfile] = {}
    for name, value in models.items():
        p = Table(file_label, value, join_key("sim.models", name), _PROFILE, 'a [sim.models."NAME"] table')
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


def build_workload(raw: dict[str, Any], path: Path, label: str) -> Workload:
    """The whole document (after --set) validated, section by section, into a `Workload`."""
    top = Table(label, raw, "", _TOP, "the top level", _ELSEWHERE)
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
