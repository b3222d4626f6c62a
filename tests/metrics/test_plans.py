"""What-if price plans: `[plans.NAME]` validated, priced exactly from the journal's own figures
(runs over real HTTP against the simulator), errors free, projections, and `report --plans`
agreeing with the live summary to the last digit."""

from __future__ import annotations

import asyncio
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomli_w

from oxconsole.cli.main import main
from oxconsole.metrics.plans import Usage, plan_costs, price, project
from oxconsole.reports.summary import summary_from_journal
from oxconsole.workload import PricePlan, Prices, load_plans, load_workload
from tests.support import engine_for, journal, run, until
from tests.support.workloads import Sets, workload_doc, write_workload


def write(tmp_path: Path, count: int = 120, ttft: str = "2ms", plans: Sets | None = None) -> Path:
    """tests/workloads/plans.toml as tmp_path/w.toml: `count` prompts, answers `ttft` after
    admission, its journal in out/, `plans` (the [plans] table) in place of its own when given."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    sets = {
        "output.results": (tmp_path / "out" / "results.jsonl").as_posix(),
        "prompts.synthetic.count": count,
        "sim.models.small.ttft": ttft,
        'sim.models."big.v2".ttft': ttft,
    }
    return write_workload("plans", tmp_path, {**sets, **(plans or {})}, file="w.toml")


def priced_from_journal(recs: list[dict[str, Any]], plan: PricePlan) -> float:
    """The plan's total from the journal alone: each model's ok requests and tokens times the
    plan's prices (requests that ended in error cost nothing)."""
    usage: dict[str, list[int]] = {}
    for r in recs:
        if r["status"] != "ok":
            continue
        u = usage.setdefault(r["model"], [0, 0, 0])
        u[0] += 1
        u[1] += r["input_tokens"]
        u[2] += r["output_tokens"]
    return sum(price(plan.prices(m), Usage(*u)) for m, u in usage.items())


def per_record(recs: list[dict[str, Any]], plan: PricePlan) -> float:
    """The same, summed record by record."""
    total = 0.0
    for r in recs:
        if r["status"] == "ok":
            p = plan.prices(r["model"])
            total += (
                p.per_request
                + r["input_tokens"] * p.per_1m_input / 1e6
                + r["output_tokens"] * p.per_1m_output / 1e6
            )
    return total


# -- the arithmetic, pure ------------------------------------------------------------------------


def test_overrides_replace_the_default_key_by_key(tmp_path: Path) -> None:
    plans = load_plans(write(tmp_path))
    tok = plans["token-based"]
    assert tok.prices("small") == Prices(0.0, 0.27, 1.10)
    assert tok.prices("big.v2") == Prices(0.0, 0.90, 1.10)  # per_1m_output from the default
    assert plans["request-based"].prices("anything") == Prices(0.0004, 0.0, 0.0)


def test_projection_mixes_models_by_weight_and_is_the_total_at_the_end() -> None:
    assert project(3.0, 10, 0, lambda m: 1.0, {"a": 1.0}) == 3.0
    # 10 more requests, a at 1.0 (weight 3) and b at 2.0 (weight 1): 1.25 each
    assert project(3.0, 10, 10, {"a": 1.0, "b": 2.0}.get, {"a": 3.0, "b": 1.0}) == pytest.approx(15.5)
    assert project(3.0, 10, 10, lambda m: None, {}) == pytest.approx(6.0)  # the run's own pace
    assert project(0.0, 0, 10, lambda m: None, {}) is None
    plan = PricePlan("flat", Prices(per_request=0.5))
    usage = {"a": Usage(requests=8, input_tokens=0, output_tokens=0, finished=10, ok=8)}
    (c,) = plan_costs([plan], usage, 10, 10, {"a": 1.0})
    assert (c.total, c.per_task, c.projected) == (4.0, 0.4, 8.0)  # two in ten failed: 0.4 a request


# -- validation ------------------------------------------------------------------------------------


BAD = """
[plans.flat]
default = { per_request = -1, per_1m_input = inf, per_1m_ouput = 2 }
models."smal" = { per_request = 1 }
extra = 1
[plans.tokens]
default = { per_1m_input = nan }
models."big.v2" = { per_request = "cheap" }
[plans."a/b"]
default = { per_request = 1 }
[plans.empty]
"""


def test_every_plan_error_at_once_with_its_key_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = write(tmp_path, plans={"plans": tomllib.loads(BAD)["plans"]})
    assert main(["validate", str(w)]) == 2
    err = capsys.readouterr().err
    expected = [
        "plans.flat.default.per_request: expected a number >= 0, got -1",
        "plans.flat.default.per_1m_input: expected a number between 0 and 1e6",
        'plans.flat.default.per_1m_ouput: expected a key of a price table (did you mean "per_1m_output"?)',
        'plans.flat.models.smal: expected the name of a model in [[models]] (did you mean "small"?)',
        "plans.flat.extra: expected a key of a [plans.NAME] table (one of: default, models)",
        "plans.tokens.default.per_1m_input: expected a number between 0 and 1e6",
        'plans.tokens.models."big.v2".per_request: expected a number >= 0, got "cheap"',
        'plans."a/b": expected a plan name',
        "plans.empty: expected default = { per_request, per_1m_input, per_1m_output } and/or models",
    ]
    for line in expected:
        assert line in err, line
    assert "Traceback" not in err
    # --plans FILE is read the same way (only the model names are not checked: no [[models]] there)
    plans_file = tmp_path / "plans.toml"
    plans_file.write_text(BAD)
    journal_path = tmp_path / "none.jsonl"
    journal_path.write_text("")
    assert main(["report", str(journal_path), "--plans", str(plans_file)]) == 2
    err = capsys.readouterr().err
    assert "plans.flat.default.per_request: expected a number >= 0, got -1" in err
    assert "plans.tokens.default.per_1m_input" in err
    assert "smal" not in err
    plans_file.write_text("[run]\nconcurrency = 1\n")
    assert main(["report", str(journal_path), "--plans", str(plans_file)]) == 2
    assert "plans: expected one or more [plans.NAME] tables, got no [plans] table" in capsys.readouterr().err


def test_validate_lists_the_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(write(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert "  request-based: 0.0004 per request" in out
    assert "  token-based: 0.27 per 1M input, 1.1 per 1M output" in out
    assert "    big.v2: 0.9 per 1M input, 1.1 per 1M output" in out


# -- runs over real HTTP ---------------------------------------------------------------------------


def _check_costs(
    summary: Mapping[str, Any], recs: list[dict[str, Any]], plans: Mapping[str, PricePlan]
) -> None:
    total = summary["requests"]["total"]
    assert total == len(recs)
    cost = summary["cost"]
    assert cost["per_task"] == round(cost["total"] / total, 12)
    for name, plan in plans.items():
        fig = cost["plans"][name]
        exact = priced_from_journal(recs, plan)
        assert fig["total"] == round(exact, 9)
        assert fig["total"] == pytest.approx(per_record(recs, plan), rel=1e-12)
        assert fig["per_task"] == round(exact / total, 12)
        assert fig["projected"] == fig["total"]  # it has all run
        for model, block in summary["models"].items():
            mine = [r for r in recs if r["model"] == model]
            assert block["cost"]["plans"][name]["total"] == round(priced_from_journal(mine, plan), 9)


async def test_plans_priced_exactly_from_the_journal_errors_free(tmp_path: Path) -> None:
    w = load_workload(write(tmp_path))
    outcome = await run(w)
    recs = journal(w)
    errors = [r for r in recs if r["status"] == "error"]
    assert errors and all(r["cost"] == 0 and r["input_tokens"] > 0 for r in errors)
    summary = outcome.summary
    _check_costs(summary, recs, w.plans)
    # errors cost nothing: pricing every record, errors included, would cost more
    tok = w.plans["token-based"]
    with_errors = sum(r["input_tokens"] * tok.prices(r["model"]).per_1m_input / 1e6 for r in errors)
    assert with_errors > 0
    flat = summary["cost"]["plans"]["request-based"]
    ok = summary["requests"]["ok"]
    assert flat["total"] == round(ok * 0.0004, 9)
    # the per-model override: big.v2 pays 0.90 per 1M input, small the default 0.27
    big = [r for r in recs if r["model"] == "big.v2" and r["status"] == "ok"]
    small = [r for r in recs if r["model"] == "small" and r["status"] == "ok"]
    assert big and small
    expected = sum(r["input_tokens"] * 0.90 + r["output_tokens"] * 1.10 for r in big) / 1e6
    expected += sum(r["input_tokens"] * 0.27 + r["output_tokens"] * 1.10 for r in small) / 1e6
    assert summary["cost"]["plans"]["token-based"]["total"] == pytest.approx(expected, rel=1e-12)
    # the actual cost: the models' own prices, errors free too
    assert summary["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs), rel=1e-12)


async def test_report_plans_equals_the_live_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = load_workload(write(tmp_path))
    outcome = await run(w)
    live = outcome.summary
    path = w.results_path()
    # without --plans: the plans the run had (kept in the journal's manifest)
    stored = summary_from_journal(path)
    assert stored["cost"] == live["cost"]
    assert {m: b["cost"] for m, b in stored["models"].items()} == {
        m: b["cost"] for m, b in live["models"].items()
    }
    # --plans FILE: the same plans from a file of their own, through the command line
    plans_file = tmp_path / "plans.toml"
    plans_file.write_text(tomli_w.dumps({"plans": workload_doc("plans")["plans"]}))
    assert main(["report", str(path), "--plans", str(plans_file), "--json"]) == 0
    reported = orjson.loads(capsys.readouterr().out)
    assert reported["cost"] == live["cost"]
    # other plans price the same journal, exactly
    plans_file.write_text(
        '[plans.cheap]\ndefault = { per_1m_output = 0.05 }\nmodels."nope" = { per_request = 1 }\n'
    )
    assert main(["report", str(path), "--plans", str(plans_file)]) == 0
    out, err = capsys.readouterr()
    assert "plans.cheap.models.nope: no model of that name in the journal" in err
    recs = journal(w)
    cheap = load_plans(plans_file)["cheap"]
    assert f"{priced_from_journal(recs, cheap):.6f}" in out
    assert "plan" in out and "actual" in out


async def test_projected_beyond_the_total_mid_run_and_when_stopped(tmp_path: Path) -> None:
    w = load_workload(write(tmp_path, count=400, ttft="20ms"), ["run.concurrency=4"])
    e = engine_for(w, publish_interval=0.05)
    task = asyncio.ensure_future(run(w, e))
    await until(lambda: e.latest is not None and e.latest.counts.ok >= 20, what="20 requests done")
    snap = e.latest
    assert snap is not None
    names = [p.name for p in snap.plans]
    assert names == ["request-based", "token-based"]
    for p in snap.plans:
        assert p.projected is not None and p.projected > p.total > 0
        assert p.per_task == pytest.approx(p.total / snap.counts.total)
    flat = snap.plans[0]
    # 0.0004 per ok request, at the run's error rate so far, for 400 requests
    assert flat.projected == pytest.approx(400 * flat.total / snap.counts.total, rel=0.02)
    e.request_stop(interrupted=True)
    outcome = await task
    s = outcome.summary
    not_sent = s["requests"]["not_sent"]
    assert not_sent > 0
    for fig in s["cost"]["plans"].values():
        assert fig["projected"] == round(fig["total"] + not_sent * fig["total"] / s["requests"]["total"], 9)
        assert fig["projected"] > fig["total"]


# -- resume, compare, HTML, the command line -----------------------------------------------------


def test_resume_prices_the_whole_journal_under_the_last_plans(tmp_path: Path) -> None:
    path = write(tmp_path, count=200, ttft="10ms")
    w = load_workload(path, ["run.concurrency=4"])

    async def first_session() -> None:
        e = engine_for(w, publish_interval=0.05)
        task = asyncio.ensure_future(run(w, e))
        await until(lambda: e.latest is not None and e.latest.counts.total >= 30, what="30 requests done")
        e.request_stop(interrupted=True)
        await task

    asyncio.run(first_session())
    # the resume changes the plans: the whole journal is priced under the new ones
    path.write_text(path.read_text().replace("per_request = 0.0004", "per_request = 0.001"))
    summary_json = tmp_path / "s.json"
    code = main([str(path), "--headless", "--resume", "--summary-json", str(summary_json)])
    assert code in (0, 1)
    s = orjson.loads(summary_json.read_bytes())
    recs = journal(w)
    assert s["requests"]["total"] == 200 and s["requests"]["sessions"] == 2
    new = load_workload(path).plans
    _check_costs(s, _last_per_id(recs), new)
    assert s["cost"]["plans"]["request-based"]["total"] == round(s["requests"]["ok"] * 0.001, 9)
    assert summary_from_journal(w.results_path())["cost"] == s["cost"]  # the manifest has the new plans


def _last_per_id(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The record a summary counts for each id: its last (a resumed id appears again)."""
    return list({r["id"]: r for r in recs}.values())


async def test_compare_and_html_show_the_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = load_workload(write(tmp_path / "a", count=60))
    b = load_workload(write(tmp_path / "b", count=90))
    sa = (await run(a)).summary
    sb = (await run(b)).summary
    assert main(["report", str(a.results_path()), str(b.results_path()), "--json"]) == 0
    c = orjson.loads(capsys.readouterr().out)
    rows = {r["figure"]: r["values"] for r in c["figures"]}
    for name in ("request-based", "token-based"):
        assert rows[f"cost.plans.{name}.total"] == [
            sa["cost"]["plans"][name]["total"],
            sb["cost"]["plans"][name]["total"],
        ]
        assert rows[f"cost.plans.{name}.per_task"] == [
            sa["cost"]["plans"][name]["per_task"],
            sb["cost"]["plans"][name]["per_task"],
        ]
    assert rows["cost.total"] == [sa["cost"]["total"], sb["cost"]["total"]]
    assert main(["report", str(a.results_path()), str(b.results_path())]) == 0
    table = capsys.readouterr().out
    assert "request-based" in table and "token-ba… /task" in table
    assert main(["report", str(a.results_path()), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "| plan | total | per task | projected |" in md and "| request-based | " in md
    html = tmp_path / "r.html"
    assert main(["report", str(a.results_path()), "--html", str(html)]) == 0
    page = html.read_text()
    assert '<section id="plans"><h2>Cost by plan</h2>' in page
    assert "request-based" in page and "token-based" in page and "<svg" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page


def test_headless_table_has_the_plans_block(tmp_path: Path) -> None:
    from tests.support import oxconsole as oxc

    r = oxc(
        str(write(tmp_path, count=40)), "--headless", "--set", "sim.models.small.error_rate=0", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("plan "))
    assert lines[head + 1].startswith("actual")
    assert lines[head + 2].startswith("request-based")
    assert lines[head + 3].startswith("token-based")
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if not (len(ln) <= 80)][:5]
    assert sum(ln.rstrip().endswith("*") for ln in lines[head : head + 4]) == 1  # the cheapest


def test_the_example_compares_a_request_based_and_a_token_based_plan() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "plans.toml"
    w = load_workload(example, ["plans.request-based.default.per_request=0.0005"])
    assert list(w.plans) == ["request-based", "token-based"]
    assert w.plans["request-based"].prices("qwen-3-32b") == Prices(per_request=0.0005)  # --set reaches plans
    assert w.plans["token-based"].prices("deepseek-v4-flash") == Prices(0.0, 0.10, 0.40)
    assert load_plans(example) == load_workload(example).plans  # a workload is a plans file too


@pytest.mark.parametrize("pack_error_rate", [0.0, 0.3])
async def test_packed_tasks_are_billed_per_http_request(tmp_path: Path, pack_error_rate: float) -> None:
    w = load_workload(
        write_workload(
            "sim_instant",
            tmp_path,
            {
                "name": "packed",
                "run": {"concurrency": 4, "seed": 5},
                "output.results": (tmp_path / "out" / "results.jsonl").as_posix(),
                "models": [{"name": "m", "max_tokens": 64, "price_per_request": 0.002}],
                "prompts": {"synthetic": {"count": 96, "input_tokens": 20, "output_tokens": 8}},
                "packing.size": 8,
                "sim.models.m": {
                    "ttft": "2ms",
                    "tokens_per_s": 0,
                    "output_tokens": 8,
                    "jitter": 0,
                    "pack_error_rate": pack_error_rate,
                },
                "plans": {
                    "request-based": {"default": {"per_request": 0.002}},
                    "token-based": {"default": {"per_1m_input": 0.27, "per_1m_output": 1.10}},
                },
            },
            file="w.toml",
        )
    )
    s = (await run(w)).summary
    recs = journal(w)
    assert s["requests"]["ok"] == s["requests"]["total"] == 96
    sent = s["packing"]["requests_sent"]
    if pack_error_rate == 0:
        assert sent == 12 and s["packing"]["repacked"] == 0
    else:
        assert s["packing"]["repacked"] > 0
    flat = s["cost"]["plans"]["request-based"]
    # a request-based plan bills the HTTP requests behind the tasks: packs, and tasks re-sent alone
    assert flat["total"] == pytest.approx(sent * 0.002, rel=1e-12)
    assert flat["total"] == pytest.approx(s["cost"]["total"], rel=1e-9)  # the run's own request price
    assert flat["per_task"] == pytest.approx(sent * 0.002 / 96, rel=1e-9)
    tok = s["cost"]["plans"]["token-based"]["total"]
    assert tok == pytest.approx(
        sum(r["input_tokens"] * 0.27 + r["output_tokens"] * 1.10 for r in recs) / 1e6, rel=1e-9
    )
    assert summary_from_journal(w.results_path())["cost"] == s["cost"]
