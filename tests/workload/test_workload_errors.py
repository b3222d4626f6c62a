"""Every error of a workload at once; values no run could use; names that must not become paths.

Each test here failed on the code before it: `load_workload` stopped at the first error, took
`inf` durations and huge integers, let `name` climb out of the results folder, and the router
crashed on weights whose sum overflows.
"""

from __future__ import annotations

import pickle
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from oxconsole.engine.router import Router
from oxconsole.workload import (
    ModelConfig,
    Prompt,
    RoutingConfig,
    RoutingRule,
    WorkloadError,
    load_sim_section,
    load_workload,
)
from tests.support import oxconsole_here

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
[endpoints.default]
base_url = "sim"

[[models]]
name = "alpha"

[prompts]
items = ["hi"]
"""

# Five mistakes, one per section, with [retry] first in the file: the errors come in file order.
FIVE = """\
[retry]
on = [429, "timout"]

[run]
concurrency = "fifty"

[endpoints.default]
base_url = "sim"

[[models]]
nmae = "alpha"

[[models]]
name = "beta"
weight = inf

[prompts]
items = ["hi"]
repeat = 0
"""
FIVE_ERRORS = [
    ("retry.on.1", 'did you mean "timeout"', '"timout"'),
    ("run.concurrency", "an integer >= 1", '"fifty"'),
    ("models.0.nmae", 'did you mean "name"', "an unknown key"),
    ("models.1.weight", "between 0 and 1e9", "inf"),
    ("prompts.repeat", "an integer >= 1", "0"),
]


def _write(tmp_path: Path, text: str, name: str = "w.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _errors(path: Path, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(WorkloadError) as info:
        load_workload(path, overrides)
    assert str(info.value) == "\n".join(info.value.errors)
    return info.value.errors


def _one_error(tmp_path: Path, text: str, overrides: tuple[str, ...] = ()) -> str:
    errors = _errors(_write(tmp_path, text), overrides)
    assert len(errors) == 1, errors
    return errors[0]


def _oxc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`)."""
    return oxconsole_here(*args, cwd=cwd)


# --------------------------------------------------------------------------------------------
# Every error at once
# --------------------------------------------------------------------------------------------


def test_five_mistakes_are_five_errors_in_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path, FIVE)
    errors = _errors(path)
    assert len(errors) == len(FIVE_ERRORS), "\n".join(errors)
    for line, (key, expected, got) in zip(errors, FIVE_ERRORS, strict=True):
        assert line.startswith(f"{path}: {key}: expected "), line
        assert expected in line and f"got {got}" in line, line


def test_set_errors_come_first_then_the_file_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + '[run]\nconcurrency = "fifty"\n')
    errors = _errors(path, ("nope", "run.rate=-1", "models.7.weight=2"))
    assert len(errors) == 4, errors
    assert '--set "nope": expected KEY=VALUE' in errors[0]
    assert '--set "models.7.weight=2": expected an index below 1' in errors[1]
    # an override that applied is checked where it landed in the document
    assert errors[2].endswith('run.concurrency: expected an integer >= 1, got "fifty"')
    assert errors[3].endswith("run.rate: expected a number >= 0, got -1")


def test_one_mistake_reads_exactly_as_before(tmp_path: Path) -> None:
    line = _one_error(tmp_path, GOOD + "[run]\nconcurrency = 0\n")
    assert line == f"{tmp_path / 'w.toml'}: run.concurrency: expected an integer >= 1, got 0"


@pytest.mark.parametrize(
    ("text", "only"),
    [
        # no [endpoints]: the models' endpoint is not checked against nothing
        ('[[models]]\nname = "a"\n[prompts]\nitems = ["x"]\n', "endpoints"),
        # a model without a name: rules are not checked against a partial list of models
        (
            GOOD.replace('name = "alpha"', 'nmae = "alpha"')
            + '[[routing.rules]]\ntag = "t"\nmodels = ["alpha"]\n',
            "models.0.nmae",
        ),
        # a bad arrival: no second complaint that the rate does not suit it
        (GOOD + '[run]\narrival = "poison"\n', "run.arrival"),
        # a bad backoff: backoff_max is not compared with the default that stood in for it
        (GOOD + '[retry]\nbackoff = "soon"\nbackoff_max = "100ms"\n', "retry.backoff"),
        # a rule that is not a table: no "required" complaints about what it could not hold
        (GOOD + "[routing]\nrules = [1]\n", "routing.rules.0"),
    ],
)
def test_an_error_does_not_drag_consequences_along(tmp_path: Path, text: str, only: str) -> None:
    line = _one_error(tmp_path, text)
    assert f"w.toml: {only}: expected" in line


def test_workload_error_keeps_its_lines_through_pickle() -> None:
    e = WorkloadError("a: x: expected 1, got 2", "a: y: expected 3, got 4")
    back = pickle.loads(pickle.dumps(e))
    assert back.errors == e.errors and str(back) == str(e)
    assert str(WorkloadError("one line")) == "one line"


def test_sim_section_lists_every_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "[sim.models.a]\njitter = 2\nttft = inf\n[sim.models.b]\ncapacity = 0\n")
    with pytest.raises(WorkloadError) as info:
        load_sim_section(path)
    keys = [line.split(": ")[1] for line in info.value.errors]
    assert keys == ["sim.models.a.jitter", "sim.models.a.ttft", "sim.models.b.capacity"]


def test_validate_prints_every_error_and_exits_2(tmp_path: Path) -> None:
    _write(tmp_path, FIVE)
    out = _oxc("validate", "w.toml", "--set", "run.burst=0", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == len(FIVE_ERRORS) + 1, out.stderr
    assert all(line.startswith("oxconsole: w.toml: ") and ": expected " in line for line in lines), [
        line for line in lines if not (line.startswith("oxconsole: w.toml: ") and ": expected " in line)
    ][:5]
    keys = [line.split(": ")[2] for line in lines]
    assert keys == [
        "retry.on.1",
        "run.concurrency",
        "run.burst",
        "models.0.nmae",
        "models.1.weight",
        "prompts.repeat",
    ]


# --------------------------------------------------------------------------------------------
# Values no run could use
# --------------------------------------------------------------------------------------------

HUGE = "9" * 400
VALUE_CASES = [
    ("[run]\nrate = inf", "run.rate", "between 0 and 1e6"),
    ("[run]\nrate = nan", "run.rate", "between 0 and 1e6"),
    ("[run]\nrate = 2e6", "run.rate", "between 0 and 1e6"),
    ("[run]\nconcurrency = 1_000_001", "run.concurrency", "between 1 and 1_000_000 (requests in flight)"),
    ("[run]\nconcurrency = 99999999999999999999999", "run.concurrency", "between 1 and 1_000_000"),
    ("[run]\nburst = 10_000_000", "run.burst", "between 1 and 1_000_000"),
    ("[run]\ntpm = 10_000_000_000_000", "run.tpm", "between 0 and 1_000_000_000_000"),
    ("[run]\nrequests = 10_000_000_000_000", "run.requests", "between 0 and 1_000_000_000_000"),
    ("[run]\nseed = 99999999999999999999", "run.seed", "64-bit integer"),
    ("[run]\nworkers = 100000", "run.workers", 'between 1 and 256 or "auto"'),
    (f'[run]\nduration = "{HUGE}s"', "run.duration", "at most 365 days"),
    ('[run]\ntimeout = "9000h"', "run.timeout", "at most 365 days"),
    ("[run]\ngrace = 1e300", "run.grace", "at most 365 days"),
    ("[retry]\nmax_attempts = 1000", "retry.max_attempts", "between 1 and 100"),
    (f'[retry]\nbackoff_max = "{HUGE}ms"', "retry.backoff_max", "at most 365 days"),
    (
        '[endpoints.e]\nbase_url = "sim"\nmax_connections = 2_000_000',
        "endpoints.e.max_connections",
        "1_000_000",
    ),
    ('[[models]]\nname = "b"\nweight = 1e308', "models.1.weight", "between 0 and 1e9 (weights are relative"),
    ('[[models]]\nname = "b"\nweight = nan', "models.1.weight", "between 0 and 1e9"),
    ('[[models]]\nname = "b"\nprice_per_request = inf', "models.1.price_per_request", "between 0 and 1e6"),
    (
        '[[models]]\nname = "b"\nprice_per_1m_output = 1e7',
        "models.1.price_per_1m_output",
        "between 0 and 1e6",
    ),
    ('[[models]]\nname = "b"\ntemperature = nan', "models.1.temperature", "between 0 and 2"),
    ('[[models]]\nname = "b"\nmax_tokens = 100_000_000', "models.1.max_tokens", "between 1 and 10_000_000"),
    ("[sim.models.alpha]\ntokens_per_s = inf", "sim.models.alpha.tokens_per_s", "between 0 and 1e6"),
    ("[sim.models.alpha]\nrate_limit = nan", "sim.models.alpha.rate_limit", "between 0 and 1e6"),
    ("[sim.models.alpha]\nstall = 1e100", "sim.models.alpha.stall", "at most 365 days"),
    ("[sim.models.alpha]\ncapacity = 99999999999", "sim.models.alpha.capacity", "between 1 and 1_000_000"),
]


@pytest.mark.parametrize(
    ("extra", "key", "expected"), VALUE_CASES, ids=[c[1] + ":" + c[0][-12:] for c in VALUE_CASES]
)
def test_values_no_run_could_use(tmp_path: Path, extra: str, key: str, expected: str) -> None:
    line = _one_error(tmp_path, GOOD + extra + "\n")
    assert f"w.toml: {key}: expected " in line and expected in line, line


@pytest.mark.parametrize(
    ("prompts", "key"),
    [
        ("repeat = 10_000_000_000_000", "prompts.repeat"),
        ("synthetic = { count = 10_000_000_000_000 }", "prompts.synthetic.count"),
        ("synthetic = { count = 1, input_tokens = 100_000_000 }", "prompts.synthetic.input_tokens"),
    ],
)
def test_prompt_counts_no_run_could_use(tmp_path: Path, prompts: str, key: str) -> None:
    text = GOOD.replace('items = ["hi"]', prompts if "synthetic" in prompts else f'items = ["hi"]\n{prompts}')
    line = _one_error(tmp_path, text)
    assert f"w.toml: {key}: expected an integer between 1 and " in line, line


@pytest.mark.parametrize("override", ["run.rate=inf", "models.0.weight=1e308", "run.concurrency=1e300"])
def test_set_values_are_checked_the_same(tmp_path: Path, override: str) -> None:
    line = _one_error(tmp_path, GOOD, (override,))
    assert f"w.toml: {override.split('=')[0]}: expected " in line, line


def test_limits_themselves_are_accepted(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        GOOD.replace('name = "alpha"', 'name = "alpha"\nweight = 1e9\nprice_per_request = 1e6')
        + '[run]\nconcurrency = 1_000_000\nrate = 1e6\nseed = -9223372036854775808\nduration = "8760h"\n',
    )
    w = load_workload(path)
    assert w.run.concurrency == 1_000_000 and w.models[0].weight == 1e9 and w.run.duration == 365 * 86400


# --------------------------------------------------------------------------------------------
# The router with weights whose sum overflows
# --------------------------------------------------------------------------------------------


def _p(tag: str | None = None) -> Prompt:
    return Prompt(id="x", messages=[{"role": "user", "content": "hi"}], tag=tag)


def test_router_huge_weights_keep_their_shares() -> None:
    models = (ModelConfig("a", weight=1e308), ModelConfig("b", weight=1e308), ModelConfig("c", weight=5e307))
    r = Router(models, RoutingConfig(), seed=3)
    n = 30000
    c = Counter(r.pick(_p()) for _ in range(n))
    assert c["a"] / n == pytest.approx(0.4, abs=0.015)
    assert c["b"] / n == pytest.approx(0.4, abs=0.015)
    assert c["c"] / n == pytest.approx(0.2, abs=0.015)
    r.set_weight("c", 1.7976931348623157e308)  # the largest float, live
    c = Counter(r.pick(_p()) for _ in range(n))
    assert set(c) == {"a", "b", "c"} and c["c"] / n == pytest.approx(1.797 / 3.797, abs=0.02)


def test_router_tiny_and_huge_weights_together() -> None:
    r = Router((ModelConfig("a", weight=5e-324), ModelConfig("b", weight=1e308)), RoutingConfig(), seed=1)
    assert {r.pick(_p()) for _ in range(5000)} == {"b"}


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0, float("-inf")])
def test_router_refuses_weights_no_draw_could_use(bad: float) -> None:
    r = Router((ModelConfig("a"), ModelConfig("b")), RoutingConfig(), seed=1)
    with pytest.raises(ValueError):
        r.set_weight("a", bad)
    assert r.weights == {"a": 1.0, "b": 1.0}
    assert {r.pick(_p()) for _ in range(200)} == {"a", "b"}
    with pytest.raises(ValueError):
        Router((ModelConfig("a", weight=bad),), RoutingConfig())


def test_least_loaded_rule_of_weight_zero_models() -> None:
    models = (ModelConfig("a"), ModelConfig("z1", weight=0), ModelConfig("z2", weight=0))
    rules = (RoutingRule(tag="t", models=("z1", "z2")),)
    r = Router(models, RoutingConfig(strategy="least_loaded", rules=rules), seed=1)
    r.in_flight.update(z1=3, z2=1)
    assert r.pick(_p("t")) == "z2"


# --------------------------------------------------------------------------------------------
# Names and results paths
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("../../escape", '"../../escape"'),
        ("/etc/passwd", '"/etc/passwd"'),
        ("..", '".."'),
        (".hidden", '".hidden"'),
        ("a/b", '"a/b"'),
        ("x" * 300, "(300 characters)"),
        ("red\x1b[31mrun", '"red\\u001b[31mrun"'),
        ("bell\x07", '"bell\\u0007"'),
        ("csi\x9b2J", '"csi\\u009b2J"'),
        ("rtl\u202eoverride", '"rtl\\u202eoverride"'),
    ],
)
def test_unsafe_names_are_refused(tmp_path: Path, name: str, shown: str) -> None:
    import tomli_w

    line = _one_error(tmp_path, tomli_w.dumps({"name": name}) + GOOD)
    assert line.startswith(f"{tmp_path / 'w.toml'}: name: expected a name of at most 64 letters, digits"), (
        line
    )
    assert "results folder" in line and shown in line, line
    assert not any(ch < " " or "\x7f" <= ch <= "\x9f" or ch == "\u202e" for ch in line), repr(line)


@pytest.mark.parametrize("name", ["demo", "qwen-3 32b v2.1", "_x", "Lasttest_über_東京", "9" * 64])
def test_reasonable_names_are_kept(tmp_path: Path, name: str) -> None:
    w = load_workload(_write(tmp_path, f'name = "{name}"\n' + GOOD))
    assert w.name == name and w.results_path() == Path("runs", name, "results.jsonl")


@pytest.mark.parametrize(
    ("stem", "name"),
    [
        ("load test (v2)", "load test _v2_"),
        ("über-last.v3", "über-last.v3"),
        ("...hidden", "hidden"),
        ("ctl\x1bname", "ctl_name"),
        ("x" * 200, "x" * 64),
        ("(((", "___"),
        ("...", "workload"),
    ],
)
def test_name_from_any_file_name_is_safe(tmp_path: Path, stem: str, name: str) -> None:
    w = load_workload(_write(tmp_path, GOOD, f"{stem}.toml"))
    assert w.name == name
    assert w.results_path().parent == Path("runs", name)


def test_control_characters_in_the_file_name_are_escaped_in_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "[run]\nconcurrency = 0\n", "bad\x1b[2Jname.toml")
    line = _one_error_at(path)
    assert "\x1b" not in line and "bad\\u001b[2Jname.toml: run.concurrency" in line


def _one_error_at(path: Path) -> str:
    errors = _errors(path)
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize(
    "results",
    [
        "runs/{name.__class__}/r.jsonl",
        "runs/{name[0]}.jsonl",
        "runs/{name:>300}.jsonl",
        "runs/{}.jsonl",
        "runs/{0}",
        "{name!r}",
        "runs/{",
    ],
)
def test_results_formats_nothing_but_name(tmp_path: Path, results: str) -> None:
    import tomli_w

    line = _one_error(tmp_path, GOOD + tomli_w.dumps({"output": {"results": results}}))
    assert "w.toml: output.results: expected a path where {name} is the only placeholder" in line


def test_results_braces_and_name_still_work(tmp_path: Path) -> None:
    w = load_workload(
        _write(tmp_path, 'name = "n"\n' + GOOD + '[output]\nresults = "r/{name}/{{x}}-{name}.jsonl"\n')
    )
    assert w.results_path() == Path("r/n/{x}-n.jsonl")


def test_results_path_too_long_once_the_name_is_in(tmp_path: Path) -> None:
    text = f'name = "{"n" * 64}"\n' + GOOD + '[output]\nresults = "runs/{name}{name}{name}{name}.jsonl"\n'
    line = _one_error(tmp_path, text)
    assert "output.results: expected a path whose every part is at most 255 bytes" in line
    assert "(a part of 262 bytes)" in line


def test_a_run_with_an_escaping_name_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "work" / "runs").mkdir(parents=True)
    _write(tmp_path / "work", 'name = "../../escape"\n' + GOOD)
    out = _oxc("w.toml", "--headless", cwd=tmp_path / "work")
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "name: expected a name" in out.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["runs", "w.toml", "work"]


def test_a_300_character_name_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    _write(tmp_path, f'name = "{"y" * 300}"\n' + GOOD)
    out = _oxc("validate", "w.toml", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert (
        out.stderr.startswith("oxconsole: w.toml: name: expected a name of at most 64")
        and "(300 characters)" in out.stderr
    )


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("settle_tolerance = 0", "run.settle_tolerance: expected a number > 0 and < 1"),
        ("settle_tolerance = 1", "run.settle_tolerance: expected a number > 0 and < 1"),
        ('settle_tolerance = "5%"', "run.settle_tolerance: expected a number > 0 and < 1"),
        ("trials = 0", "run.trials: expected an integer >= 1, got 0"),
        ("trials = 5000", "run.trials: expected an integer between 1 and 1_000"),
        ("trial = 2", 'run.trial: expected a key of [run] (did you mean "trials"?)'),
    ],
)
def test_statistics_keys_refused_in_toml_words(tmp_path: Path, line: str, said: str) -> None:
    path = tmp_path / "w.toml"
    path.write_text(f"[run]\n{line}\n\n{GOOD}")
    with pytest.raises(WorkloadError) as e:
        load_workload(path)
    assert said in str(e.value) and str(path) in str(e.value), str(e.value)


def test_statistics_keys_read(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text("[run]\nsettle_tolerance = 0.1\ntrials = 4\n\n" + GOOD)
    w = load_workload(path)
    assert (w.run.settle_tolerance, w.run.trials, w.run.trial) == (0.1, 4, 0), w.run
