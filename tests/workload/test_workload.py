"""Tests for oxconsole.workload: errors in the user's words, --set, prompt streaming and checks."""

from __future__ import annotations

import copy
import itertools
import os
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomli_w

from oxconsole.workload import (
    EndpointConfig,
    ModelConfig,
    OutputConfig,
    PromptsConfig,
    RetryConfig,
    RoutingConfig,
    RoutingRule,
    RunConfig,
    SimModelProfile,
    Workload,
    WorkloadError,
    check_prompts,
    describe,
    iter_prompts,
    load_sim_section,
    load_workload,
    parse_duration,
    resolve_api_key,
)

BASE = """\
[endpoints.default]
base_url = "sim"

[[models]]
name = "alpha"

[[models]]
name = "beta"
"""
FILE_PROMPTS = '[prompts]\nfile = "p.jsonl"\n'
JSONL = '{"id": "a", "prompt": "hi", "tag": "t1"}\n{"id": "b", "prompt": "there", "tag": "t2"}\n'


def wl(*extra: str, prompts: str = FILE_PROMPTS) -> str:
    return BASE + prompts + "\n".join(textwrap.dedent(e) for e in extra)


@dataclass
class Case:
    id: str
    toml: str | bytes | None
    fragments: tuple[str, ...]
    jsonl: str | None = JSONL
    overrides: tuple[str, ...] = ()
    stage: str = "load"  # load | check | key
    setup: str = ""  # special preparation: "dir", "chmod", "nofile"


CASES = [
    # --- TOML syntax and file problems
    Case("syntax-table", "[run\nconcurrency = 1\n", ("w.toml", "line 1", "TOML")),
    Case("syntax-value", wl("[run]\nconcurrency = \n"), ("w.toml", "line 12", "TOML")),
    Case("binary-garbage", b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00garbage", ("w.toml", "UTF-8")),
    Case("nul-bytes", b"name = 1\x00\x00\x00", ("w.toml", "binary")),
    Case("missing-workload", None, ("w.toml", "no such file"), setup="nofile"),
    # --- [run]
    Case(
        "concurrency-word", wl('[run]\nconcurrency = "fifty"'), ("run.concurrency", "integer >= 1", '"fifty"')
    ),
    Case("concurrency-zero", wl("[run]\nconcurrency = 0"), ("run.concurrency", ">= 1", "got 0")),
    Case("concurrency-bool", wl("[run]\nconcurrency = true"), ("run.concurrency", "integer", "true")),
    Case("concurrency-float", wl("[run]\nconcurrency = 2.5"), ("run.concurrency", "integer", "2.5")),
    Case("rate-negative", wl("[run]\nrate = -1"), ("run.rate", "number >= 0", "-1")),
    Case("burst-zero", wl("[run]\nburst = 0"), ("run.burst", ">= 1")),
    Case("tpm-negative", wl("[run]\ntpm = -5"), ("run.tpm", ">= 0")),
    Case("requests-negative", wl("[run]\nrequests = -1"), ("run.requests", ">= 0")),
    Case("timeout-zero", wl('[run]\ntimeout = "0s"'), ("run.timeout", "duration > 0")),
    Case("duration-words", wl('[run]\nduration = "10 minutes"'), ("run.duration", "duration", "10 minutes")),
    Case("duration-unit", wl('[run]\nduration = "5x"'), ("run.duration", "duration", '"5x"')),
    Case("duration-no-unit", wl('[run]\nduration = "90"'), ("run.duration", "duration")),
    Case("grace-negative", wl("[run]\ngrace = -1"), ("run.grace", "duration >= 0")),
    Case("arrival-typo", wl('[run]\narrival = "poison"'), ("run.arrival", 'did you mean "poisson"')),
    Case("constant-no-rate", wl('[run]\narrival = "constant"'), ("run.rate", "> 0", "constant")),
    Case("poisson-zero-rate", wl('[run]\narrival = "poisson"\nrate = 0'), ("run.rate", "> 0")),
    Case("workers-zero", wl("[run]\nworkers = 0"), ("run.workers", '"auto"')),
    Case("unknown-run-key", wl("[run]\nconcurency = 5"), ("run.concurency", 'did you mean "concurrency"')),
    Case("top-level-run-key", "concurrency = 5\n" + wl(), ("w.toml: concurrency", "belongs under [run]")),
    Case("run-key-in-prompts", wl("repeat = 2\nseed = 5"), ("prompts.seed", "belongs under [run]")),
    Case("unknown-top-key", wl("[routng]\nstrategy = 'weighted'"), ("routng", 'did you mean "routing"')),
    Case("name-not-string", "name = 5\n" + wl(), ("w.toml: name", "string", "5")),
    # --- [output]
    Case("results-placeholder", wl('[output]\nresults = "runs/{nme}.jsonl"'), ("output.results", "{name}")),
    Case("save-text-string", wl('[output]\nsave_text = "yes"'), ("output.save_text", "true or false")),
    # --- [endpoints]
    Case("no-endpoints", '[[models]]\nname = "a"\n' + FILE_PROMPTS, ("w.toml: endpoints", "at least one")),
    Case(
        "endpoint-url",
        wl('[endpoints.other]\nbase_url = "localhost:8000"'),
        ("endpoints.other.base_url", "URL"),
    ),
    Case(
        "endpoint-key-in-file",
        wl('[endpoints.k]\nbase_url = "sim"\napi_key_env = "sk-live-abc123secret"'),
        ("endpoints.k.api_key_env", "environment variable", "not shown"),
    ),
    Case(
        "endpoint-unknown-key",
        wl('[endpoints.default2]\nbase_url="sim"\nbase_ulr = 1'),
        ("base_ulr", "base_url"),
    ),
    Case(
        "max-connections",
        wl('[endpoints.e]\nbase_url = "sim"\nmax_connections = 0'),
        ("max_connections", ">= 1"),
    ),
    # --- [[models]]
    Case("model-unknown-key", wl('[[models]]\nnmae = "x"'), ("models.2.nmae", 'did you mean "name"')),
    Case("model-no-name", wl("[[models]]\nweight = 1"), ("models.2.name", "model name", "required")),
    Case("model-weight", wl('[[models]]\nname = "g"\nweight = -1'), ("models.2.weight", ">= 0", "-1")),
    Case(
        "model-temperature",
        wl('[[models]]\nname = "g"\ntemperature = 3'),
        ("models.2.temperature", "between 0 and 2"),
    ),
    Case("model-max-tokens", wl('[[models]]\nname = "g"\nmax_tokens = 0'), ("models.2.max_tokens", ">= 1")),
    Case(
        "model-price",
        wl('[[models]]\nname = "g"\nprice_per_1m_input = -0.1'),
        ("models.2.price_per_1m_input", ">= 0"),
    ),
    Case(
        "model-endpoint",
        wl('[[models]]\nname = "g"\nendpoint = "defualt"'),
        ("models.2.endpoint", '"default"'),
    ),
    Case("model-duplicate", wl('[[models]]\nname = "alpha"'), ("models.2.name", "unique", "models.0.name")),
    Case(
        "models-as-table",
        '[endpoints.default]\nbase_url="sim"\n[models]\nname="a"\n' + FILE_PROMPTS,
        ("w.toml: models", "array of tables"),
    ),
    Case(
        "no-models",
        '[endpoints.default]\nbase_url="sim"\n' + FILE_PROMPTS,
        ("w.toml: models", "at least one"),
    ),
    Case(
        "all-weights-zero",
        wl()
        .replace('name = "beta"', 'name = "beta"\nweight = 0')
        .replace('name = "alpha"', 'name = "alpha"\nweight = 0'),
        ("models", "weight > 0"),
    ),
    # --- [prompts]
    Case(
        "two-sources",
        wl(prompts='[prompts]\nfile = "p.jsonl"\nitems = ["x"]\n'),
        ("prompts", "exactly one", "file and items"),
    ),
    Case("no-source", wl(prompts="[prompts]\nrepeat = 2\n"), ("prompts", "exactly one", "none")),
    Case("no-prompts-table", wl(prompts=""), ("prompts", "file, items or synthetic")),
    Case(
        "prompts-missing-file",
        wl(prompts='[prompts]\nfile = "nope.jsonl"\n'),
        ("prompts.file", "existing file", "nope.jsonl"),
    ),
    Case(
        "prompts-dir", wl(prompts='[prompts]\nfile = "sub"\n'), ("prompts.file", "a file", "sub"), setup="dir"
    ),
    Case("prompts-unreadable", wl(), ("prompts.file", "readable", "p.jsonl"), setup="chmod"),
    Case("items-empty", wl(prompts="[prompts]\nitems = []\n"), ("prompts.items", "non-empty array")),
    Case("items-number", wl(prompts='[prompts]\nitems = ["a", 3]\n'), ("prompts.items.1", "string", "3")),
    Case(
        "synthetic-count",
        wl(prompts="[prompts]\nsynthetic = { count = 0 }\n"),
        ("prompts.synthetic.count", ">= 1"),
    ),
    Case(
        "synthetic-no-count",
        wl(prompts="[prompts]\nsynthetic = { input_tokens = 5 }\n"),
        ("synthetic.count", "required"),
    ),
    Case("repeat-zero", wl(prompts='[prompts]\nfile = "p.jsonl"\nrepeat = 0\n'), ("prompts.repeat", ">= 1")),
    # --- [routing]
    Case("strategy", wl('[routing]\nstrategy = "random"'), ("routing.strategy", "weighted")),
    Case(
        "rule-unknown-model",
        wl('[[routing.rules]]\ntag = "t1"\nmodels = ["alpah"]'),
        ("routing.rules.0.models.0", 'did you mean "alpha"', '"alpah"'),
    ),
    Case(
        "rule-unknown-fallback",
        wl(
            '[[routing.rules]]\ntag="t1"\nmodels=["alpha"]\n[[routing.rules]]\ntag="t2"\n'
            'models=["beta"]\nfallback=["gamma"]'
        ),
        ("routing.rules.1.fallback.0", "model", '"gamma"'),
    ),
    Case(
        "rule-tag-type",
        wl('[[routing.rules]]\ntag = 1\nmodels = ["alpha"]'),
        ("routing.rules.0.tag", "tag", "1"),
    ),
    Case(
        "rule-no-models",
        wl('[[routing.rules]]\ntag = "t1"'),
        ("routing.rules.0.models", "array of model names"),
    ),
    # --- [retry]
    Case("retry-on-status", wl("[retry]\non = [429, 600]"), ("retry.on.1", "400-599", "600")),
    Case("retry-on-word", wl('[retry]\non = ["timout"]'), ("retry.on.0", 'did you mean "timeout"')),
    Case("retry-attempts", wl("[retry]\nmax_attempts = 0"), ("retry.max_attempts", ">= 1")),
    Case(
        "retry-backoff-max",
        wl('[retry]\nbackoff = "2s"\nbackoff_max = "1s"'),
        ("retry.backoff_max", "retry.backoff"),
    ),
    # --- [sim]
    Case(
        "sim-jitter",
        wl("[sim.models.alpha]\njitter = 2"),
        ("sim.models.alpha.jitter", "between 0 and 1", "2"),
    ),
    Case(
        "sim-unknown",
        wl('[sim.models."deep.seek"]\nttf = "1s"'),
        ('sim.models."deep.seek".ttf', 'did you mean "ttft"'),
    ),
    Case(
        "sim-error-rate",
        wl("[sim.models.beta]\nerror_rate = -0.1"),
        ("sim.models.beta.error_rate", "between 0 and 1"),
    ),
    Case("sim-ttft", wl('[sim.models.beta]\nttft = "fast"'), ("sim.models.beta.ttft", "duration", '"fast"')),
    Case("sim-capacity", wl("[sim.models.beta]\ncapacity = 0"), ("sim.models.beta.capacity", ">= 1")),
    # --- --set
    Case(
        "set-no-equals",
        wl(),
        ("w.toml", "--set", "run.concurrency", "KEY=VALUE"),
        overrides=("run.concurrency",),
    ),
    Case("set-empty-key", wl(), ("--set", '"=5"', "key"), overrides=("=5",)),
    Case(
        "set-index", wl(), ("--set", "models.5.weight=2", "index below 2"), overrides=("models.5.weight=2",)
    ),
    Case(
        "set-through-scalar",
        wl(),
        ("--set", "run.concurrency"),
        overrides=("run.concurrency=5", "run.concurrency.x=1"),
    ),
    Case("set-bad-value", wl(), ("--set", "TOML value"), overrides=("run.retry=[1, 2",)),
    Case(
        "set-value-invalid",
        wl(),
        ("run.concurrency", "integer", '"fifty"'),
        overrides=("run.concurrency=fifty",),
    ),
    # --- the prompts file (check_prompts)
    Case(
        "jsonl-invalid",
        wl(),
        ("p.jsonl", "line 3", "JSON"),
        jsonl='{"prompt": "a"}\n\n{"prompt": \n',
        stage="check",
    ),
    Case(
        "jsonl-array", wl(), ("p.jsonl", "line 2", "object"), jsonl='{"prompt": "a"}\n[1, 2]\n', stage="check"
    ),
    Case(
        "jsonl-no-prompt",
        wl(),
        ("p.jsonl", "line 1", '"prompt" or "messages"'),
        jsonl='{"text": "a"}\n',
        stage="check",
    ),
    Case(
        "jsonl-model",
        wl(),
        ("p.jsonl", "line 2", "model", 'did you mean "beta"'),
        jsonl='{"prompt": "a"}\n{"prompt": "b", "model": "betta"}\n',
        stage="check",
    ),
    Case(
        "jsonl-dup-id",
        wl(),
        ("p.jsonl", "line 4", "line 2", "unique"),
        jsonl=(
            '{"id": 1, "prompt": "a"}\n{"id": "x", "prompt": "b"}\n'
            '{"prompt": "c"}\n{"id": "x", "prompt": "d"}\n'
        ),
        stage="check",
    ),
    Case(
        "jsonl-dup-implicit",
        wl(),
        ("p.jsonl", "line 3", "line 1", "unique"),
        jsonl='{"prompt": "a"}\n{"prompt": "b"}\n{"id": "1", "prompt": "c"}\n',
        stage="check",
    ),
    Case("jsonl-empty", wl(), ("p.jsonl", "empty"), jsonl="\n\n  \n", stage="check"),
    Case(
        "jsonl-max-tokens",
        wl(),
        ("p.jsonl", "line 1", "max_tokens", ">= 1"),
        jsonl='{"prompt": "a", "max_tokens": 0}\n',
        stage="check",
    ),
    Case(
        "jsonl-messages",
        wl(),
        ("p.jsonl", "line 1", "messages", "array"),
        jsonl='{"messages": "hi"}\n',
        stage="check",
    ),
    Case(
        "jsonl-both",
        wl(),
        ("p.jsonl", "line 1", "only one"),
        jsonl='{"prompt": "a", "messages": []}\n',
        stage="check",
    ),
    Case(
        "jsonl-id-float",
        wl(),
        ("p.jsonl", "line 1", "id", "1.5"),
        jsonl='{"prompt": "a", "id": 1.5}\n',
        stage="check",
    ),
    Case(
        "jsonl-model-list",  # a list is not a model name (it was a TypeError: unhashable list)
        wl(),
        ("p.jsonl", "line 1", "model", "[]"),
        jsonl='{"prompt": "a", "model": []}\n',
        stage="check",
    ),
    Case(
        "jsonl-not-utf8",
        wl(),
        ("p.jsonl", "line 2", "JSON"),
        jsonl='{"prompt": "a"}\n{"prompt": "\udcff"}\n',
        stage="check",
    ),
    # --- API key variable
    Case(
        "key-unset",
        wl().replace('base_url = "sim"', 'base_url = "sim"\napi_key_env = "OXC_TEST_UNSET_KEY"'),
        ("endpoints.default.api_key_env", "OXC_TEST_UNSET_KEY", "is not set"),
        stage="key",
    ),
]


def _write_case(tmp_path: Path, case: Case) -> Path:
    path = tmp_path / "w.toml"
    if case.setup != "nofile":
        if isinstance(case.toml, bytes):
            path.write_bytes(case.toml)
        elif case.toml is not None:
            path.write_text(case.toml)
    if case.jsonl is not None:
        (tmp_path / "p.jsonl").write_bytes(case.jsonl.encode("utf-8", "surrogateescape"))
    if case.setup == "dir":
        (tmp_path / "sub").mkdir()
    if case.setup == "chmod":
        (tmp_path / "p.jsonl").chmod(0)
        try:
            open(tmp_path / "p.jsonl", "rb").close()
        except PermissionError:
            pass
        else:
            pytest.skip("running with privileges that can read a chmod 000 file")
    return path


def _assert_clean(msg: str) -> None:
    """Every line of the message is one clean error (several lines: several errors)."""
    assert msg and not msg.startswith("\n") and not msg.endswith("\n") and "\n\n" not in msg
    for line in msg.split("\n"):
        for bad in ("Traceback", 'File "', "KeyError", "TypeError", "ValueError", "AttributeError"):
            assert bad not in line, f"traceback-ish text {bad!r} in {line!r}"
        assert "expected" in line


def test_case_table_covers_the_schema() -> None:
    """Every section of a complete workload (FULL) and every stage has bad-input cases, so a new
    section comes with its own; ids are unique."""
    import tomllib

    sections = {k for k, v in tomllib.loads(FULL).items() if isinstance(v, dict | list)}
    assert {"run", "endpoints", "models", "prompts", "retry", "output", "sim"} <= sections
    named = {f.split(".")[0].split("[")[0] for c in CASES for f in c.fragments}
    named |= {f.removeprefix("w.toml: ").split(".")[0] for c in CASES for f in c.fragments}
    assert sections <= named, sections - named
    assert {c.stage for c in CASES} == {"load", "check", "key"}
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OXC_TEST_UNSET_KEY", raising=False)
    path = _write_case(tmp_path, case)
    with pytest.raises(WorkloadError) as info:
        w = load_workload(path, case.overrides)
        if case.stage == "load":
            pytest.fail("load_workload accepted the input")
        if case.stage == "check":
            check_prompts(w)
        elif case.stage == "key":
            resolve_api_key(w, "default")
        pytest.fail(f"{case.stage} accepted the input")
    msg = str(info.value)
    _assert_clean(msg)
    assert len(info.value.errors) == 1, f"one mistake, one error: {msg}"
    for fragment in case.fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    # every message names the file the user gave
    assert "w.toml" in msg or "p.jsonl" in msg


def test_secret_in_api_key_env_is_never_echoed(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(
        wl().replace('base_url = "sim"', 'base_url = "sim"\napi_key_env = "sk-live-abc123secret"')
    )
    (tmp_path / "p.jsonl").write_text(JSONL)
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert "abc123secret" not in str(info.value)


# --------------------------------------------------------------------------------------------
# A full valid workload, every key
# --------------------------------------------------------------------------------------------

FULL = """\
name = "full"

[run]
concurrency = 7
rate = 3
burst = 4
tpm = 90000
arrival = "poisson"
requests = 25
duration = "1m30s"
timeout = "750ms"
stream = false
seed = 99
workers = "auto"
grace = 2

[output]
results = "out/{name}.jsonl"
save_text = false

[endpoints.default]
base_url = "sim"

[endpoints.remote]
base_url = "https://api.example.com/v1"
api_key_env = "OXC_TEST_KEY"
max_connections = 12
insecure = true

[[models]]
name = "alpha"
weight = 3
max_tokens = 100
temperature = 0.5
price_per_request = 0.01

[[models]]
name = "beta"
endpoint = "remote"
weight = 0.5
price_per_1m_input = 1
price_per_1m_output = 2.5

[prompts]
file = "sub/p.jsonl"
repeat = 3

[routing]
strategy = "least_loaded"

[[routing.rules]]
tag = "t1"
models = ["beta"]
fallback = ["alpha"]

[retry]
max_attempts = 5
backoff = "100ms"
backoff_max = "2h"
on = [429, "stream"]

[sim.models.alpha]
ttft = "50ms"
tokens_per_s = 0
output_tokens = 10
capacity = 3
jitter = 0
error_rate = 0.5
rate_limit = 2
retry_after = "3s"
throttle_rate = 0.1
reset_rate = 0.2
abort_rate = 0.3
malformed_rate = 0.4
stall_rate = 0.05
stall = "1m"
"""


def _full(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p.jsonl").write_text(JSONL)
    path = tmp_path / "full.toml"
    path.write_text(FULL)
    return path


def test_full_workload_round_trip(tmp_path: Path) -> None:
    path = _full(tmp_path)
    w = load_workload(path)
    assert w == Workload(
        path=path,
        name="full",
        run=RunConfig(
            concurrency=7,
            rate=3.0,
            burst=4,
            tpm=90000,
            arrival="poisson",
            requests=25,
            duration=90.0,
            timeout=0.75,
            stream=False,
            seed=99,
            workers="auto",
            grace=2.0,
        ),
        output=OutputConfig(results="out/{name}.jsonl", save_text=False),
        endpoints={
            "default": EndpointConfig(name="default", base_url="sim"),
            "remote": EndpointConfig(
                name="remote",
                base_url="https://api.example.com/v1",
                api_key_env="OXC_TEST_KEY",
                max_connections=12,
                insecure=True,
            ),
        },
        models=(
            ModelConfig(name="alpha", weight=3.0, max_tokens=100, temperature=0.5, price_per_request=0.01),
            ModelConfig(
                name="beta", endpoint="remote", weight=0.5, price_per_1m_input=1.0, price_per_1m_output=2.5
            ),
        ),
        prompts=PromptsConfig(file=tmp_path / "sub" / "p.jsonl", repeat=3),
        routing=RoutingConfig(strategy="least_loaded", rules=(RoutingRule("t1", ("beta",), ("alpha",)),)),
        retry=RetryConfig(max_attempts=5, backoff=0.1, backoff_max=7200.0, on=frozenset({429, "stream"})),
        sim={
            "alpha": SimModelProfile(
                ttft=0.05,
                tokens_per_s=0.0,
                output_tokens=10,
                capacity=3,
                jitter=0.0,
                error_rate=0.5,
                rate_limit=2.0,
                retry_after=3.0,
                throttle_rate=0.1,
                reset_rate=0.2,
                abort_rate=0.3,
                malformed_rate=0.4,
                stall_rate=0.05,
                stall=60.0,
            )
        },
        raw=w.raw,
    )
    assert w.raw["run"]["concurrency"] == 7
    assert w.results_path() == Path("out/full.jsonl")
    assert isinstance(w.run.rate, float) and isinstance(w.models[0].weight, float)


def test_defaults_and_name_from_stem(tmp_path: Path) -> None:
    path = tmp_path / "my-batch.toml"
    path.write_text(wl())
    (tmp_path / "p.jsonl").write_text(JSONL)
    w = load_workload(str(path))
    assert w.name == "my-batch"
    assert w.run == RunConfig()
    assert w.retry == RetryConfig()
    assert w.models[0] == ModelConfig(name="alpha")
    assert w.sim == {}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (5, 5.0),
        (1.5, 1.5),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("10m", 600.0),
        ("1h", 3600.0),
        ("0s", 0.0),
        ("1m30s", 90.0),
        ("abc", None),
        ("90", None),
        (True, None),
        ("", None),
        ("5 s", 5.0),
    ],
)
def test_parse_duration(text: Any, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


# --------------------------------------------------------------------------------------------
# --set
# --------------------------------------------------------------------------------------------


def _simple(tmp_path: Path, text: str | None = None) -> Path:
    path = tmp_path / "w.toml"
    path.write_text(text if text is not None else wl())
    (tmp_path / "p.jsonl").write_text(JSONL)
    return path


def test_overrides_types_arrays_and_new_tables(tmp_path: Path) -> None:
    path = _simple(tmp_path)
    w = load_workload(
        path,
        [
            "run.concurrency=200",
            "run.rate = 2.5",
            'run.duration="90s"',
            "run.timeout=45s",  # bare word -> string
            "run.arrival=poisson",
            "run.stream=false",
            "models.1.weight=2",
            "models.0.max_tokens=33",
            'retry.on=[500, "timeout"]',
            'sim.models."deep.seek".ttft="10ms"',
            'endpoints.local.base_url="http://127.0.0.1:8000/v1"',
            'models.1.endpoint="local"',
        ],
    )
    assert w.run.concurrency == 200
    assert w.run.rate == 2.5
    assert w.run.duration == 90.0
    assert w.run.timeout == 45.0
    assert w.run.arrival == "poisson"
    assert w.run.stream is False
    assert w.models[1].weight == 2.0 and w.models[0].weight == 1.0
    assert w.models[0].max_tokens == 33
    assert w.retry.on == frozenset({500, "timeout"})
    assert w.sim["deep.seek"].ttft == 0.01
    assert w.endpoints["local"].base_url == "http://127.0.0.1:8000/v1"
    assert w.models[1].endpoint == "local"
    assert w.raw["run"]["concurrency"] == 200
    assert w.raw["sim"]["models"]["deep.seek"] == {"ttft": "10ms"}


def test_override_whole_array_element_and_later_wins(tmp_path: Path) -> None:
    path = _simple(tmp_path)
    w = load_workload(path, ['models.1={name = "gamma", weight = 4}', "run.seed=1", "run.seed=2"])
    assert [m.name for m in w.models] == ["alpha", "gamma"]
    assert w.models[1].weight == 4.0
    assert w.run.seed == 2


def test_override_does_not_touch_file(tmp_path: Path) -> None:
    path = _simple(tmp_path)
    before = path.read_text()
    load_workload(path, ["run.concurrency=3"])
    assert path.read_text() == before
    assert load_workload(path).run.concurrency == 50


# --------------------------------------------------------------------------------------------
# iter_prompts
# --------------------------------------------------------------------------------------------


def _prompts_workload(tmp_path: Path, jsonl: str, *extra: str, prompts: str = FILE_PROMPTS) -> Workload:
    path = tmp_path / "w.toml"
    path.write_text(wl(*extra, prompts=prompts))
    (tmp_path / "p.jsonl").write_text(jsonl)
    return load_workload(path)


JSONL5 = "".join(f'{{"id": "q{i}", "prompt": "prompt {i}", "meta": {{"k": {i}}}}}\n' for i in range(5))


def test_single_pass_plain_ids(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL5)
    ids = [p.id for p in iter_prompts(w)]
    assert ids == ["q0", "q1", "q2", "q3", "q4"]


def test_repeat_ids_unique_and_numbered(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL5, prompts='[prompts]\nfile = "p.jsonl"\nrepeat = 3\n')
    ids = [p.id for p in iter_prompts(w)]
    assert len(ids) == 15 and len(set(ids)) == 15
    assert ids[0] == "q0#1" and ids[5] == "q0#2" and ids[-1] == "q4#3"
    assert ids == [p.id for p in iter_prompts(w)]  # deterministic


def test_requests_cycles_beyond_count_times_repeat(tmp_path: Path) -> None:
    w = _prompts_workload(
        tmp_path, JSONL5, "[run]\nrequests = 12", prompts='[prompts]\nfile = "p.jsonl"\nrepeat = 2\n'
    )
    ids = [p.id for p in iter_prompts(w)]
    assert len(ids) == 12 and len(set(ids)) == 12
    assert ids[10:] == ["q0#3", "q1#3"]


def test_requests_more_than_count_suffixes_even_with_repeat_one(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL5, "[run]\nrequests = 7")
    ids = [p.id for p in iter_prompts(w)]
    assert ids == ["q0#1", "q1#1", "q2#1", "q3#1", "q4#1", "q0#2", "q1#2"]


def test_requests_fewer_than_count(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL5, "[run]\nrequests = 2")
    assert [p.id for p in iter_prompts(w)] == ["q0", "q1"]


def test_duration_cycles_forever(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL5, '[run]\nduration = "10s"')
    ids = [p.id for p in itertools.islice(iter_prompts(w), 23)]
    assert len(ids) == 23 and len(set(ids)) == 23
    assert ids[0] == "q0#1" and ids[22] == "q2#5"


def test_prompt_fields_from_jsonl(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [
        {"prompt": "hello", "tag": "x", "model": "beta", "max_tokens": 9, "extra": [1, 2]},
        {
            "id": 42,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}],
        },
        {"id": "mm", "messages": [{"role": "user", "content": [{"type": "text", "text": "abc"}]}]},
    ]
    w = _prompts_workload(tmp_path, "\n".join(orjson.dumps(x).decode() for x in lines) + "\n\n")
    p1, p2, p3 = list(iter_prompts(w))
    assert p1.id == "1" and p1.tag == "x" and p1.model == "beta" and p1.max_tokens == 9
    assert p1.messages == [{"role": "user", "content": "hello"}] and p1.input_chars == 5
    assert p2.id == "42" and p2.messages == lines[1]["messages"] and p2.input_chars == len("be brief") + 4
    assert p3.id == "mm" and p3.input_chars == 3


def test_iter_prompts_is_lazy(tmp_path: Path) -> None:
    # the 2nd line is broken: a lazy reader hands out the 1st prompt before it reaches it
    w = _prompts_workload(tmp_path, '{"prompt": "ok"}\n{broken\n')
    it = iter_prompts(w)
    assert next(it).messages[0]["content"] == "ok"
    with pytest.raises(WorkloadError, match="line 2"):
        next(it)


def test_items_ids(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL, prompts='[prompts]\nitems = ["a", "bb"]\nrepeat = 2\n')
    ps = list(iter_prompts(w))
    assert [p.id for p in ps] == ["item-0#1", "item-1#1", "item-0#2", "item-1#2"]
    assert ps[1].messages == [{"role": "user", "content": "bb"}] and ps[1].input_chars == 2


def _synthetic(tmp_path: Path, seed: int) -> list[Any]:
    sub = tmp_path / f"s{seed}"
    sub.mkdir(exist_ok=True)
    w = _prompts_workload(
        sub,
        JSONL,
        f"[run]\nseed = {seed}",
        prompts="[prompts]\nsynthetic = { count = 4, input_tokens = 50, output_tokens = 7 }\n",
    )
    return list(iter_prompts(w))


def test_synthetic_deterministic_per_seed(tmp_path: Path) -> None:
    a, b, c = _synthetic(tmp_path, 1), _synthetic(tmp_path, 1), _synthetic(tmp_path, 2)
    assert [p.id for p in a] == ["syn-0", "syn-1", "syn-2", "syn-3"]
    assert [p.messages for p in a] == [p.messages for p in b]
    assert [p.messages for p in a] != [p.messages for p in c]
    assert len({p.messages[0]["content"] for p in a}) == 4
    for p in a:
        assert p.max_tokens == 7
        assert 180 <= p.input_chars <= 260  # ~4 chars a token
        assert p.input_chars == len(p.messages[0]["content"])


# --------------------------------------------------------------------------------------------
# check_prompts, describe, resolve_api_key, load_sim_section
# --------------------------------------------------------------------------------------------


def test_check_prompts_counts(tmp_path: Path) -> None:
    jsonl = '{"prompt": "a", "tag": "t1"}\n\n{"prompt": "b", "tag": "t2", "model": "beta"}\n{"prompt": "c"}\n'
    w = _prompts_workload(tmp_path, jsonl, prompts='[prompts]\nfile = "p.jsonl"\nrepeat = 4\n')
    stats = check_prompts(w)
    assert stats.count == 3
    assert stats.total_requests == 12
    assert stats.tags == frozenset({"t1", "t2"})
    assert stats.models_referenced == frozenset({"beta"})


@pytest.mark.parametrize(
    ("run", "total"),
    [("", 10), ("requests = 7", 7), ('duration = "1m"', None), ('requests = 3\nduration = "1m"', 3)],
)
def test_check_prompts_total(tmp_path: Path, run: str, total: int | None) -> None:
    w = _prompts_workload(
        tmp_path, JSONL5, f"[run]\n{run}", prompts='[prompts]\nfile = "p.jsonl"\nrepeat = 2\n'
    )
    assert check_prompts(w).total_requests == total


def test_check_prompts_synthetic_and_items(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL, prompts="[prompts]\nsynthetic = { count = 11 }\n")
    assert check_prompts(w).count == 11
    w = _prompts_workload(tmp_path, JSONL, prompts='[prompts]\nitems = ["a", "b", "c"]\n')
    assert check_prompts(w).total_requests == 3


def test_check_prompts_many_lines(tmp_path: Path) -> None:
    n = 20_000
    jsonl = "".join(f'{{"id": "p{i}", "prompt": "x{i}", "tag": "t{i % 3}"}}\n' for i in range(n))
    w = _prompts_workload(tmp_path, jsonl)
    stats = check_prompts(w)
    assert stats.count == n and stats.tags == frozenset({"t0", "t1", "t2"})
    assert sum(1 for _ in iter_prompts(w)) == n


def test_resolve_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _full(tmp_path)
    w = load_workload(path)
    assert resolve_api_key(w, "default") is None
    monkeypatch.setenv("OXC_TEST_KEY", "sk-very-secret")
    assert resolve_api_key(w, "remote") == "sk-very-secret"
    assert "sk-very-secret" not in repr(w)
    assert "sk-very-secret" not in describe(w, check_prompts(w))
    monkeypatch.setenv("OXC_TEST_KEY", "")
    with pytest.raises(
        WorkloadError, match=r"endpoints\.remote\.api_key_env: environment variable OXC_TEST_KEY"
    ):
        resolve_api_key(w, "remote")
    monkeypatch.delenv("OXC_TEST_KEY")
    with pytest.raises(WorkloadError, match="OXC_TEST_KEY is not set"):
        resolve_api_key(w, "remote")
    with pytest.raises(WorkloadError, match=r"endpoints\.nope"):
        resolve_api_key(w, "nope")


def test_describe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OXC_TEST_KEY", "sk-hidden")
    path = _full(tmp_path)
    text = load_workload(
        path,
        [
            'routing.rules.0.tag="nothing-has-this"',
            "models.0.max_tokens=99",
            'models.0.max_tokens_param="max_completion_tokens"',
        ],
    )
    out = describe(text, check_prompts(text))
    for needle in (
        "max_completion_tokens 99",
        "full",
        "https://api.example.com/v1",
        "OXC_TEST_KEY",
        "alpha",
        "beta",
        "weight 3",
        "0.01/request",
        "concurrency 7",
        "poisson",
        "tpm 90000",
        "25",
        "up to 5 attempts",
        "nothing-has-this",
        "TLS",
    ):
        assert needle in out, needle
    assert "sk-hidden" not in out
    warnings = out.split("warnings", 1)[1]
    assert "nothing-has-this" in warnings


def test_describe_warns_unlimited_closed(tmp_path: Path) -> None:
    w = _prompts_workload(tmp_path, JSONL)
    assert "unlimited" in describe(w, check_prompts(w)).split("warnings", 1)[1]
    w2 = _prompts_workload(tmp_path, JSONL, "[run]\nrate = 5")
    assert "warnings" not in describe(w2, check_prompts(w2))


def test_load_sim_section(tmp_path: Path) -> None:
    sim_only = tmp_path / "sim.toml"
    sim_only.write_text('[sim.models."m1"]\nttft = "200ms"\n[sim.models.m2]\ncapacity = 4\n')
    profiles = load_sim_section(sim_only)
    assert profiles == {"m1": SimModelProfile(ttft=0.2), "m2": SimModelProfile(capacity=4)}
    assert load_sim_section(_full(tmp_path))["alpha"].stall == 60.0
    bad = tmp_path / "bad.toml"
    bad.write_text("[sim.models.m1]\njitter = -1\n")
    with pytest.raises(WorkloadError, match=r"bad\.toml: sim\.models\.m1\.jitter: expected"):
        load_sim_section(bad)
    none = tmp_path / "none.toml"
    none.write_text('name = "x"\n')
    with pytest.raises(WorkloadError, match=r"none\.toml: sim\.models"):
        load_sim_section(none)


def test_examples_load(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    demo = load_workload(root / "demo.toml")
    stats = check_prompts(demo)
    assert stats.count == 40 and stats.total_requests == 400
    assert {r.tag for r in demo.routing.rules} <= stats.tags
    assert all(ep.base_url == "sim" and ep.api_key_env is None for ep in demo.endpoints.values()), [
        ep for ep in demo.endpoints.values() if not (ep.base_url == "sim" and ep.api_key_env is None)
    ][:5]
    assert set(demo.sim) == {m.name for m in demo.models}
    syn = load_workload(root / "synthetic.toml")
    assert syn.run.arrival == "constant" and syn.run.rate > 0
    assert check_prompts(syn).total_requests is None
    lengths = load_workload(root / "lengths.toml")
    assert check_prompts(lengths).output_lengths is not None


# --------------------------------------------------------------------------------------------
# Fuzz: nothing but WorkloadError may escape
# --------------------------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [
    0,
    -1,
    1,
    2**70,
    0.5,
    -3.5,
    float("inf"),
    float("nan"),
    True,
    False,
    "",
    "x",
    "auto",
    "90s",
    "sim",
    [],
    [1, "a"],
    [[1]],
    {},
    {"a": 1},
    {"name": "alpha"},
    [{"name": "z"}],
    [{}],
]


def _odd(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(_ODD_VALUES))


def _mutate(doc: Any, rng: random.Random) -> Any:
    if isinstance(doc, dict) and doc and rng.random() < 0.8:
        key = rng.choice(list(doc))
        roll = rng.random()
        if roll < 0.15:
            del doc[key]
        elif roll < 0.25:
            doc[key + rng.choice(["x", "_", ""])] = _odd(rng)
        elif roll < 0.6:
            doc[key] = _mutate(doc[key], rng)
        else:
            doc[key] = _odd(rng)
        return doc
    if isinstance(doc, list) and doc and rng.random() < 0.8:
        i = rng.randrange(len(doc))
        doc[i] = _mutate(doc[i], rng) if rng.random() < 0.6 else _odd(rng)
        return doc
    return _odd(rng)


def test_fuzz_documents_only_raise_workload_error(tmp_path: Path) -> None:
    import tomllib

    path = _full(tmp_path)
    base = tomllib.loads(path.read_text())
    rng = random.Random(1234)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(600):
        doc = _mutate(orjson.loads(orjson.dumps(base)), rng)
        for _ in range(rng.randrange(3)):
            doc = _mutate(doc, rng)
        if not isinstance(doc, dict):
            continue
        try:
            text = tomli_w.dumps(doc)
        except (TypeError, ValueError):
            continue
        path.write_text(text)
        try:
            w = load_workload(path)
            check_prompts(w)
            list(itertools.islice(iter_prompts(w), 5))
            describe(w, check_prompts(w))
            outcomes["ok"] += 1
        except WorkloadError as e:
            _assert_clean(str(e))
            outcomes["error"] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 5


def test_fuzz_bytes_and_overrides(tmp_path: Path) -> None:
    path = _full(tmp_path)
    good = FULL.encode()
    rng = random.Random(99)
    pieces = ["=", ".", "0", "[", "]", '"', "x", "models.9", "run", "sim.models", "'", "{", "}", "\n", " "]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(400):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 6)):
            pos = rng.randrange(len(data))
            data[pos : pos + rng.randrange(4)] = bytes(rng.randrange(256) for _ in range(rng.randrange(3)))
        path.write_bytes(bytes(data))
        overrides = [
            "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 8))) for _ in range(rng.randrange(3))
        ]
        for ov in ([], overrides):
            try:
                load_workload(path, ov)
                outcomes["ok"] += 1
            except WorkloadError as e:
                _assert_clean(str(e))
                outcomes["error"] += 1
    # both outcomes, many times: a loader that refused everything, or took everything, fails here
    assert outcomes["error"] > 400 and outcomes["ok"] > 5, outcomes


def test_fuzz_jsonl_lines(tmp_path: Path) -> None:
    rng = random.Random(7)
    values: list[Any] = [None, 1, 1.5, True, "", "x", "beta", [], [{}], [{"role": 1}], {}, [{"role": "user"}]]
    keys = ["id", "prompt", "messages", "tag", "model", "max_tokens", "other"]
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        lines = []
        for i in range(rng.randrange(1, 5)):
            if rng.random() < 0.6:  # a good line, so that whole files pass too
                obj = {"id": f"ok-{i}", "prompt": "hello"}
            else:
                obj = {k: rng.choice(values) for k in rng.sample(keys, rng.randrange(len(keys)))}
            line = orjson.dumps(obj).decode()
            if rng.random() < 0.1:
                line = line[: rng.randrange(len(line) + 1)]
            lines.append(line)
        w = _prompts_workload(tmp_path, "\n".join(lines) + "\n")
        try:
            check_prompts(w)
            list(iter_prompts(w))
            outcomes["ok"] += 1
        except WorkloadError as e:
            _assert_clean(str(e))
            outcomes["error"] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 30, outcomes


def test_errors_are_readable_as_written_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _simple(tmp_path, wl('[run]\nconcurrency = "fifty"'))
    with pytest.raises(WorkloadError) as info:
        load_workload("w.toml")
    assert str(info.value) == 'w.toml: run.concurrency: expected an integer >= 1, got "fifty"'
    assert os.path.exists("w.toml")
