"""Each table of the workload file validated into its config dataclass (unknown keys rejected).

Why this module exists: one parser per TOML section, with the keys each section accepts and the
limits each value must keep, so `load_workload` reads as the list of sections and a section's rules
live in one function. Every parser records its errors in a `Problems` list and reads on (with
defaults where a value was bad), so a file's mistakes are all reported at once; a check that
depends on another section (a model's endpoint, a rule's models) is skipped when that section
could not be read.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Literal, cast, get_args

from oxconsole.workload import bounds as b
from oxconsole.workload.autoconc import check_auto, parse_concurrency
from oxconsole.workload.cluster import parse_cluster
from oxconsole.workload.loadshape import parse_stages
from oxconsole.workload.mediakeys import media_keys, synthetic_media
from oxconsole.workload.packing import parse_packing
from oxconsole.workload.plans import parse_plans
from oxconsole.workload.problems import Problems, did_you_mean, join_key, show
from oxconsole.workload.prompts.lengths import parse_length
from oxconsole.workload.prompts.tokens import tokenizer_path
from oxconsole.workload.quality import check_cascade, parse_quality
from oxconsole.workload.requestkeys import ENV_NAME, extra_body, request_headers
from oxconsole.workload.schema import (
    APIS,
    RETRY_WORDS,
    Arrival,
    EndpointConfig,
    ModelConfig,
    OutputConfig,
    PromptsConfig,
    PromptsFormat,
    RetryConfig,
    RoutingConfig,
    RoutingRule,
    RunConfig,
    Strategy,
    SyntheticConfig,
    Workload,
    fill_results,
    toml_keys,
)
from oxconsole.workload.serverkeys import parse_telemetry, server_metrics, server_metrics_interval
from oxconsole.workload.simsection import parse_sim_section
from oxconsole.workload.slo import parse_slo
from oxconsole.workload.values import Table, fmt_duration, is_int, is_num, split_host_port

_TOP = toml_keys(Workload, "path", "raw", "sim_limits")  # sim_limits: keys of [sim]
PROMPT_FORMATS: tuple[PromptsFormat, ...] = get_args(PromptsFormat)
_RUN = toml_keys(RunConfig, "concurrency_auto", "trial")  # set by concurrency = "auto", the trial runner
_OUTPUT = toml_keys(OutputConfig)
_ENDPOINT = toml_keys(EndpointConfig, "name")  # the table's name
_MODEL = toml_keys(ModelConfig)
_PROMPTS = toml_keys(PromptsConfig)
_SYNTHETIC = toml_keys(SyntheticConfig)
_ROUTING = toml_keys(RoutingConfig)
_RULE = toml_keys(RoutingRule)
_RETRY = toml_keys(RetryConfig)

_ELSEWHERE: dict[str, str] = {}
for _section, _keys in (
    ("[run]", _RUN), ("[output]", _OUTPUT), ("[prompts]", _PROMPTS),
    ("[routing]", _ROUTING), ("[retry]", _RETRY),
):  # fmt: skip
    for _k in _keys:
        _ELSEWHERE.setdefault(_k, _section)


def _array_of_tables(errs: Problems, value: Any, path: str, toml_name: str) -> list[Any] | None:
    if isinstance(value, dict):
        errs.bad(path, f"an array of tables (write [[{toml_name}]], not [{toml_name}])", value)
        return None
    if not isinstance(value, list):
        errs.bad(path, f"an array of tables ([[{toml_name}]])", value)
        return None
    return value


def _parse_run(errs: Problems, data: Any) -> RunConfig:
    t = Table(errs, data, "run", _RUN, "[run]", _ELSEWHERE)
    d = RunConfig()
    if t.broken:
        return d
    arrival = cast(Arrival, t.enum("arrival", d.arrival, ("closed", "constant", "poisson")))
    rate = t.num("rate", d.rate, b.MAX_RATE, " (requests per second; 0 = unlimited)")
    if arrival != "closed" and rate <= 0 and t.ok("arrival", "rate"):
        errs.add(
            "run.rate",
            f'a number > 0 with arrival = "{arrival}" (open-loop arrival needs a rate)',
            show(t.data.get("rate", 0)) + (" (the default)" if "rate" not in t.data else ""),
        )
    workers: int | Literal["auto"] = d.workers
    if t.has("workers"):
        w = t.data["workers"]
        if w == "auto" and isinstance(w, str):
            workers = "auto"
        elif is_int(w) and 1 <= w <= b.MAX_WORKERS:
            workers = w
        elif is_int(w) and w > b.MAX_WORKERS:
            t.fail("workers", f'an integer between 1 and {b.MAX_WORKERS} or "auto" (engine processes)')
        else:
            t.fail("workers", 'an integer >= 1 or "auto"')
    concurrency, auto, concurrency_max = parse_concurrency(t, d.concurrency)
    return RunConfig(
        concurrency=concurrency,
        rate=rate,
        burst=t.int_("burst", d.burst, 1, b.MAX_CONCURRENCY, " (requests in the bucket)"),
        tpm=t.int_("tpm", d.tpm, 0, b.MAX_COUNT, " (tokens per minute)"),
        arrival=arrival,
        requests=t.int_("requests", d.requests, 0, b.MAX_COUNT, " (requests in the run)"),
        duration=t.duration("duration", d.duration),
        timeout=t.duration("timeout", d.timeout, positive=True),
        stream=t.bool_("stream", d.stream),
        seed=t.int_("seed", d.seed),
        workers=workers,
        grace=t.duration("grace", d.grace),
        concurrency_auto=auto,
        concurrency_max=concurrency_max,
        cluster=parse_cluster(t),
        trace_speed=_trace_speed(t, d.trace_speed),
        settle_tolerance=_settle_tolerance(t, d.settle_tolerance),
        trials=t.int_("trials", d.trials, 1, b.MAX_TRIALS, " (runs of the workload in a row)"),
    )


def _settle_tolerance(t: Table, default: float) -> float:
    """`run.settle_tolerance`: a share strictly between 0 and 1."""
    if not t.has("settle_tolerance"):
        return default
    v = t.data["settle_tolerance"]
    if not is_num(v) or not 0 < v < 1:
        t.fail(
            "settle_tolerance",
            "a number > 0 and < 1 (each figure's 95% interval within this share of it, such as 0.05)",
        )
        return default
    return float(v)


def _trace_speed(t: Table, default: float) -> float:
    """`run.trace_speed`: a number > 0 (how many times faster than the trace's own times)."""
    v = t.num("trace_speed", default, b.MAX_RATE, " (times the trace's own speed)")
    if v <= 0 and t.has("trace_speed"):
        t.fail("trace_speed", "a number > 0 (times the trace's own speed)")
        return default
    return v


def _parse_output(errs: Problems, data: Any) -> OutputConfig:
    t = Table(errs, data, "output", _OUTPUT, "[output]", _ELSEWHERE)
    d = OutputConfig()
    results = t.str_("results", d.results, "a non-empty path")
    try:
        fill_results(results, "x")
    except ValueError:
        t.fail("results", "a path where {name} is the only placeholder (write {{ and }} for braces)")
    prometheus = None
    if t.has("prometheus"):
        prometheus = t.str_("prometheus", "", 'an address "HOST:PORT" such as "127.0.0.1:9464"')
        if prometheus and split_host_port(prometheus) is None:
            t.fail("prometheus", 'an address "HOST:PORT" such as "127.0.0.1:9464"')
    batch_output = t.str_("batch_output", "", "a non-empty path") or None
    if batch_output is not None:
        try:
            fill_results(batch_output, "x")
        except ValueError:
            t.fail("batch_output", "a path where {name} is the only placeholder")
    return OutputConfig(
        results=results,
        save_text=t.bool_("save_text", d.save_text),
        html=t.bool_("html", d.html),
        prometheus=prometheus or None,
        batch_output=batch_output,
    )


def _parse_endpoints(errs: Problems, data: Any) -> dict[str, EndpointConfig]:
    if data is None:
        errs.add("endpoints", 'at least one [endpoints.NAME] table (such as base_url = "sim")', "none")
        return {}
    if not isinstance(data, dict):
        errs.bad("endpoints", "a table of [endpoints.NAME] tables", data)
        return {}
    if not data:
        errs.add("endpoints", "at least one [endpoints.NAME] table", "an empty table")
    out: dict[str, EndpointConfig] = {}
    for name, value in data.items():
        t = Table(errs, value, join_key("endpoints", name), _ENDPOINT, "an [endpoints.NAME] table")
        if t.broken:
            continue
        base_url = t.str_("base_url", None, 'an http(s):// URL or "sim"')
        if base_url and base_url != "sim" and not re.match(r"https?://[^\s/]+", base_url):
            t.fail("base_url", 'an http(s):// URL (such as "http://127.0.0.1:8000/v1") or "sim"')
        out[name] = EndpointConfig(
            name=name,
            base_url=base_url,
            api_key_env=_api_key_env(t),
            max_connections=t.int_(
                "max_connections", 1000, 1, b.MAX_CONCURRENCY, " (connections in the pool)"
            ),
            insecure=t.bool_("insecure", False),
            headers=request_headers(t, "headers", "a header value (string)"),
            headers_env=request_headers(t, "headers_env", "the NAME of an environment variable"),
            pace_by_headers=t.bool_("pace_by_headers", False),
            server_metrics=server_metrics(t),
            server_metrics_interval=server_metrics_interval(t),
        )
    return out


def _api_key_env(t: Table) -> str | None:
    if not t.has("api_key_env"):
        return None
    v = t.data["api_key_env"]
    if isinstance(v, str) and ENV_NAME.fullmatch(v):
        return v
    # Never echo the value: people paste the key itself here.
    got = "a value that is not a variable name (not shown, it may be a secret)"
    if not isinstance(v, str):
        got = show(v)
    t.errs.add(t.p("api_key_env"), "the NAME of an environment variable (such as OXLO_API_KEY)", got)
    return None


def _parse_models(errs: Problems, data: Any, endpoints: Collection[str] | None) -> tuple[ModelConfig, ...]:
    """The models whose tables could be read; `endpoints` None = not known (no check of `endpoint`)."""
    if data is None:
        errs.add("models", "at least one [[models]] table with a name", "none")
        return ()
    items = _array_of_tables(errs, data, "models", "models")
    if items is None:
        return ()
    if not items:
        errs.add("models", "at least one [[models]] table", "an empty array")
    seen: dict[str, int] = {}
    out: list[ModelConfig] = []
    for i, value in enumerate(items):
        t = Table(errs, value, join_key("models", i), _MODEL, "[[models]]")
        name = t.str_("name", None, "a model name (non-empty string)")
        if name in seen:
            t.fail("name", f"a unique model name (models.{seen[name]}.name is the same)")
        elif name:
            seen[name] = i
        # one endpoint, whatever its name, is every model's without an `endpoint =` on each
        only = next(iter(endpoints)) if endpoints is not None and len(endpoints) == 1 else "default"
        endpoint = t.str_("endpoint", only, "the name of an [endpoints.NAME] table")
        if endpoints is not None and endpoint not in endpoints:
            _unknown_endpoint(t, endpoint, endpoints)
        model = ModelConfig(
            name=name,
            endpoint=endpoint,
            weight=t.num("weight", 1.0, b.MAX_WEIGHT, " (weights are relative shares: scale them down)"),
            max_tokens=t.opt_int("max_tokens", 1, b.MAX_TOKENS, " (tokens)"),
            max_tokens_param=t.enum(
                "max_tokens_param", "max_tokens", ("max_tokens", "max_completion_tokens")
            ),
            temperature=t.opt_num("temperature", 2.0),
            price_per_request=t.num("price_per_request", 0.0, b.MAX_PRICE, _PRICE),
            price_per_1m_input=t.num("price_per_1m_input", 0.0, b.MAX_PRICE, _PRICE),
            price_per_1m_output=t.num("price_per_1m_output", 0.0, b.MAX_PRICE, _PRICE),
            price_per_1m_cached_input=t.num("price_per_1m_cached_input", 0.0, b.MAX_PRICE, _PRICE)
            if t.has("price_per_1m_cached_input")
            else None,
            extra_body=extra_body(t),
            ignore_eos=t.bool_("ignore_eos", False),
            api=t.enum("api", "chat", APIS),  # type: ignore[arg-type]
            **media_keys(t),
        )
        if name and not t.broken:
            out.append(model)
    if out and len(out) == len(items) and all(m.weight == 0 for m in out):
        errs.add("models", "at least one model with weight > 0", "every weight 0")
    return tuple(out)


_PRICE = " (a price per request or per million tokens)"


def _unknown_endpoint(t: Table, endpoint: str, endpoints: Collection[str]) -> None:
    hint = did_you_mean(endpoint, endpoints)
    what = "the name of an [endpoints.NAME] table" + (
        f' (did you mean "{hint}"?)' if hint else f" (defined: {', '.join(endpoints)})"
    )
    if t.has("endpoint"):
        t.fail("endpoint", what)
    else:
        t.errs.add(t.p("endpoint"), what, '"default" (the default; no [endpoints.default] table)')


def _parse_prompts(errs: Problems, data: Any, base: Path) -> PromptsConfig:
    if data is None:
        errs.add("prompts", "a [prompts] table with one of file, items or synthetic", "none")
        return PromptsConfig()
    t = Table(errs, data, "prompts", _PROMPTS, "[prompts]", _ELSEWHERE)
    if t.broken:
        return PromptsConfig()
    sources = [k for k in ("file", "items", "synthetic") if t.has(k)]
    repeat = t.int_("repeat", 1, 1, b.MAX_COUNT, " (passes over the prompts)")
    tok = tokenizer_path(t, base)
    if len(sources) != 1:
        errs.add(
            "prompts",
            "exactly one of prompts.file, prompts.items, prompts.synthetic",
            "none" if not sources else " and ".join(sources),
        )
        return PromptsConfig()
    fmt = cast(PromptsFormat, t.enum("format", "jsonl", PROMPT_FORMATS))
    if t.has("format") and not t.has("file"):
        t.fail("format", "nothing without prompts.file (the format is that of the file)")
    if t.has("file"):
        return PromptsConfig(file=_prompts_file(t, base), format=fmt, repeat=repeat, tokenizer=tok)
    if t.has("items"):
        items = t.str_list("items", "prompt strings", allow_empty=False)
        return PromptsConfig(items=tuple(items or ()), repeat=repeat, tokenizer=tok)
    s = Table(errs, t.data["synthetic"], "prompts.synthetic", _SYNTHETIC, "prompts.synthetic")
    if not s.has("count") and not s.broken:
        s.required("count", "an integer >= 1")
    syn = SyntheticConfig(
        count=s.int_("count", 1, 1, b.MAX_COUNT, " (prompts in one pass)"),
        input_tokens=parse_length(s, "input_tokens", 200),
        output_tokens=parse_length(s, "output_tokens", 64),
        prefix_tokens=s.int_("prefix_tokens", 0, 0, b.MAX_TOKENS, " (tokens)"),
        **synthetic_media(s),
    )
    return PromptsConfig(synthetic=syn, repeat=repeat, tokenizer=tok)


def _prompts_file(t: Table, base: Path) -> Path | None:
    """The prompts file, resolved against the workload's folder, checked readable."""
    rel = t.str_("file", None, "a path to a JSONL file")
    if not rel:
        return None
    path = base / Path(rel).expanduser()
    try:
        with open(path, "rb"):
            return path
    except FileNotFoundError:
        t.errs.add("prompts.file", "an existing file", f"{show(rel)} (no such file: {path})")
    except IsADirectoryError:
        t.errs.add("prompts.file", "a file", f"{show(rel)} (a directory: {path})")
    except PermissionError:
        t.errs.add("prompts.file", "a readable file", f"{show(rel)} (permission denied: {path})")
    except OSError as e:
        t.errs.add("prompts.file", "a readable file", f"{show(rel)} ({e.strerror}: {path})")
    return None


def _model_names(t: Table, key: str, models: Sequence[str] | None, allow_empty: bool) -> tuple[str, ...]:
    """A rule's model list; each name checked against [[models]] unless those are unknown (None)."""
    if not t.has(key):
        if not allow_empty:
            t.required(key, "a non-empty array of model names")
        return ()
    names = t.str_list(key, "model names", allow_empty=allow_empty)
    if names is None:
        return ()
    for i, n in enumerate(t.data[key]):
        if models is not None and n in names and n not in models:
            hint = did_you_mean(n, models)
            what = "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else "")
            t.errs.bad(join_key(t.p(key), i), what, n)
    return tuple(names)


def _model_names_in(data: Any) -> list[str] | None:
    """The names [[models]] gives (whatever else is wrong with those tables); None when they are not
    all known (no array, or a table without a string name), so rules are not checked against them."""
    if not isinstance(data, list) or not data:
        return None
    names = [m.get("name") if isinstance(m, dict) else None for m in data]
    return [n for n in names if isinstance(n, str)] if all(isinstance(n, str) for n in names) else None


def _parse_routing(errs: Problems, data: Any, models: Sequence[str] | None) -> RoutingConfig:
    t = Table(errs, data, "routing", _ROUTING, "[routing]", _ELSEWHERE)
    strategy = cast(Strategy, t.enum("strategy", "weighted", ("weighted", "round_robin", "least_loaded")))
    rules: list[RoutingRule] = []
    items = (
        _array_of_tables(errs, t.data["rules"], "routing.rules", "routing.rules") if t.has("rules") else []
    )
    for i, value in enumerate(items or ()):
        r = Table(errs, value, join_key("routing.rules", i), _RULE, "[[routing.rules]]")
        if r.broken:
            continue
        rules.append(
            RoutingRule(
                tag=r.str_("tag", None, "a tag (non-empty string)"),
                models=_model_names(r, "models", models, allow_empty=False),
                fallback=_model_names(r, "fallback", models, allow_empty=True),
            )
        )
    cascade = _model_names(t, "cascade", models, allow_empty=True)
    return RoutingConfig(strategy=strategy, rules=tuple(rules), cascade=cascade)


def _parse_retry(errs: Problems, data: Any) -> RetryConfig:
    t = Table(errs, data, "retry", _RETRY, "[retry]", _ELSEWHERE)
    d = RetryConfig()
    backoff = t.duration("backoff", d.backoff)
    backoff_max = t.duration("backoff_max", d.backoff_max)
    if backoff_max < backoff and t.ok("backoff", "backoff_max"):
        t.fail("backoff_max", f"a duration >= retry.backoff ({fmt_duration(backoff)})")
    return RetryConfig(
        max_attempts=t.int_("max_attempts", d.max_attempts, 1, b.MAX_ATTEMPTS, " (attempts per request)"),
        backoff=backoff,
        backoff_max=backoff_max,
        on=_retry_on(t) if t.has("on") else d.on,
    )


def _retry_on(t: Table) -> frozenset[int | str]:
    v = t.data["on"]
    if not isinstance(v, list):
        t.fail("on", 'an array of HTTP statuses (400-599) and "timeout" / "connection" / "stream"')
        return RetryConfig().on
    items: set[int | str] = set()
    for i, item in enumerate(v):
        if (is_int(item) and 400 <= item <= 599) or (isinstance(item, str) and item in RETRY_WORDS):
            items.add(item)
        else:
            hint = did_you_mean(item, RETRY_WORDS) if isinstance(item, str) else None
            extra = f' (did you mean "{hint}"?)' if hint else ""
            t.errs.bad(
                join_key("retry.on", i),
                f'an HTTP status 400-599 or "timeout" / "connection" / "stream"{extra}',
                item,
            )
    return frozenset(items)


def _parse_name(errs: Problems, top: Table, path: Path) -> str:
    """The `name` key, checked to be one safe folder name; without it, a safe name from the file's."""
    fallback = b.name_from_stem(path.stem)
    if not top.has("name"):
        return fallback
    name = top.str_("name", fallback, "a non-empty string")
    if top.ok("name") and not b.is_safe_name(name):
        got = show(name) + (f" ({len(name)} characters)" if len(name) > b.NAME_MAX else "")
        errs.add(
            "name",
            f"{b.NAME_RULE} (it names the results folder)",
            got,
        )
        return fallback
    return name


def _check_results_path(errs: Problems, output: OutputConfig, name: str) -> None:
    """The journal path once {name} is filled in: no part or whole the file system would refuse."""
    if errs.has("output.results") or errs.has("name"):
        return
    filled = fill_results(output.results, name)
    sizes = [len(part.encode("utf-8", "surrogatepass")) for part in Path(filled).parts]
    if max(sizes, default=0) > b.PATH_PART_MAX:
        expected = f"a path whose every part is at most {b.PATH_PART_MAX} bytes once {{name}} is filled in"
        errs.add("output.results", expected, f"{show(filled)} (a part of {max(sizes)} bytes)")
    elif sum(sizes) > b.PATH_MAX:
        expected = f"a path of at most {b.PATH_MAX} bytes once {{name}} is filled in"
        errs.add("output.results", expected, f"{show(filled)} ({sum(sizes)} bytes)")


def build_workload(raw: dict[str, Any], path: Path, errs: Problems) -> Workload:
    """The whole document (after --set) validated, section by section, into a `Workload`.

    Raises WorkloadError listing every error recorded in `errs` (those of --set included).
    """
    top = Table(errs, raw, "", _TOP, "the top level", _ELSEWHERE)
    name = _parse_name(errs, top, path)
    run = _parse_run(errs, raw.get("run", {}))
    output = _parse_output(errs, raw.get("output", {}))
    _check_results_path(errs, output, name)
    raw_endpoints = raw.get("endpoints")
    endpoints = _parse_endpoints(errs, raw_endpoints)
    known_endpoints = list(raw_endpoints) if isinstance(raw_endpoints, dict) and raw_endpoints else None
    models = _parse_models(errs, raw.get("models"), known_endpoints)
    prompts = _parse_prompts(errs, raw.get("prompts"), path.parent)
    routing = _parse_routing(errs, raw.get("routing", {}), _model_names_in(raw.get("models")))
    retry = _parse_retry(errs, raw.get("retry", {}))
    sim, sim_limits = parse_sim_section(errs, raw.get("sim", {}))
    slo = parse_slo(errs, raw.get("slo"))
    stages = parse_stages(errs, raw.get("stages"), run.concurrency, run.rate, run.arrival != "closed")
    plans = parse_plans(errs, raw.get("plans"), _model_names_in(raw.get("models")))
    packing = parse_packing(errs, raw.get("packing", {}))
    check_auto(errs, raw, run.concurrency_auto, run.workers)
    quality = parse_quality(errs, raw.get("quality"), path.parent, _model_names_in(raw.get("models")))
    check_cascade(errs, routing.cascade, quality, "quality" in raw)
    telemetry = parse_telemetry(errs, raw.get("telemetry"))
    if output.batch_output is not None and prompts.format != "openai-batch" and not errs.has("prompts"):
        errs.add(
            "output.batch_output",
            'a prompts file of format = "openai-batch" (the output answers its custom_ids)',
            f'prompts of format "{prompts.format}"' if prompts.file else "prompts that are not a file",
        )
    errs.raise_if_any(raw)
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
        sim_limits=sim_limits,
        raw=raw,
        slo=slo,
        stages=stages,
        plans=plans,
        packing=packing,
        quality=quality,
        telemetry=telemetry,
    )
