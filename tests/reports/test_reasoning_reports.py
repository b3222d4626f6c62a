"""Reasoning and cached prompts in what a run leaves: the summary rebuilt from the journal (what
`report` and `--resume` read) says what the run said, the text table and the HTML report show
TTFOT, reasoning and cache figures, `report --compare` compares them, and a plain run's reports
show none of it. Runs are real: the simulator over loopback HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oxconsole.journal.reading import implausible
from oxconsole.metrics.histogram import DEFAULT_ALPHA
from oxconsole.reports.compare import compare, load_run, render_compare
from oxconsole.reports.hints import CACHE_HINT
from oxconsole.reports.html import write_html_report
from oxconsole.reports.summary import summary_from_journal
from oxconsole.reports.summarytable import render_summary
from oxconsole.reports.svg import fmt_ms
from tests.support import oxconsole_here, run
from tests.support.workloads import load_workload, write_workload

PLAIN: dict[str, Any] = {"sim.models.r.reasoning_tokens": 0, "sim.models.r.prefix_cache": False}


async def test_journal_summary_agrees_and_every_report_shows_the_figures(tmp_path: Path) -> None:
    w = load_workload("reasoning", tmp_path)
    out = await run(w)
    live = out.summary
    again = summary_from_journal(w.results_path())
    for key in ("tokens", "cache_hit_rate"):
        assert again[key] == live[key], (key, again[key], live[key])
    assert again["models"]["r"]["tokens"] == live["models"]["r"]["tokens"]
    assert again["cost"]["plans"] == live["cost"]["plans"], (again["cost"], live["cost"])
    # two histograms of the same samples (the journal's rounded to 3 decimals): a bucket apart at most
    got, want = again["ttfot_ms"]["p50"], live["ttfot_ms"]["p50"]
    assert abs(got - want) <= 2 * DEFAULT_ALPHA * abs(want) * 1.01 + 0.002, (got, want)
    table = render_summary(live)
    tok = live["tokens"]
    share = f"{100 * tok['reasoning'] / tok['output']:.1f}%"
    assert f"reasoning {tok['reasoning']:,} ({share} of output)" in table, table
    assert f"cached {tok['cached']:,} (hit {100 * live['cache_hit_rate']:.1f}%)" in table, table
    assert "\nTTFOT " in table, table
    assert max(len(line) for line in table.splitlines()) <= 80, table
    page = write_html_report(w.results_path(), tmp_path / "r.html").read_text()
    assert 'id="reasoning"' in page and "TTFOT p50 ms" in page, page[:200]
    assert f"{tok['cached']:,}" in page and share in page
    dist = page[page.index('<section id="distributions">') :]
    dist = dist[: dist.index("</section>")]
    charts = [c.split("</title>")[0] for c in dist.split("<title>")[1:]]
    assert charts == ["TTFT", "TTFOT", "ITL", "latency"], f"the distributions drawn: {charts}"
    ttfot = dist[dist.index("<title>TTFOT</title>") : dist.index("<title>ITL</title>")]
    p50 = f"p50 {fmt_ms(again['ttfot_ms']['p50'])}"
    assert p50 in ttfot and "<rect" in ttfot.split("</text>", 1)[-1], (p50, ttfot[:400])


async def test_compare_shows_the_cache_and_plain_runs_show_nothing(tmp_path: Path) -> None:
    runs = {}
    for name, sets in (("cached", {}), ("uncached", {"sim.models.r.prefix_cache": False}), ("plain", PLAIN)):
        folder = tmp_path / name
        folder.mkdir()
        w = load_workload("reasoning", folder, sets)
        await run(w)
        runs[name] = w.results_path()
    c = compare([load_run(runs["cached"]), load_run(runs["uncached"])])
    rows = {r["figure"]: r for r in c["figures"]}
    assert rows["cache_hit_rate"]["values"][0] > 0 and rows["cache_hit_rate"]["values"][1] is None, rows
    assert rows["ttfot_ms.p50"]["values"][0] is not None and rows["reasoning_share"]["values"][1] > 0
    assert "TTFOT p50" in render_compare(c)
    plain = compare([load_run(runs["plain"]), load_run(runs["plain"])])
    assert not any(r["figure"].startswith("ttfot") for r in plain["figures"]), plain["figures"]
    s = summary_from_journal(runs["plain"])
    table = render_summary(s)
    assert "TTFOT" not in table and "of output" not in table and "(hit" not in table, table
    page = write_html_report(runs["plain"], tmp_path / "p.html").read_text()
    assert 'id="reasoning"' not in page and "TTFOT" not in page


async def test_compare_gives_ttfot_bootstrap_intervals_and_a_verdict(tmp_path: Path) -> None:
    paths = {}
    for name, tokens in (("short", 8), ("long", 40)):  # 40 reasoning tokens at 200/s: TTFOT +160 ms
        folder = tmp_path / name
        folder.mkdir()
        w = load_workload("reasoning", folder, {"sim.models.r.reasoning_tokens": tokens, "run.requests": 12})
        await run(w)
        paths[name] = w.results_path()
    c = compare([load_run(paths["short"]), load_run(paths["long"]), load_run(paths["short"])])
    rows = {r["figure"]: r for r in c["figures"]}
    for key in ("ttfot_ms.p50", "ttfot_ms.p99"):
        row = rows[key]
        assert all(iv is not None for iv in row["intervals"]), (key, row)
        for v, (lo, hi) in zip(row["values"], row["intervals"], strict=True):
            # the value is the summary's (a histogram's, within alpha of a sample of its rank);
            # the interval resamples the journal's exact values
            slack = DEFAULT_ALPHA * abs(v) + 0.001
            assert lo - slack <= v <= hi + slack, (key, v, lo, hi)
        # the longer reasoning is beyond noise; the same journal again is within it
        assert row["within_noise"] == [None, False, True], (key, row)
    assert rows["ttfot_ms.p50"]["values"][1] - rows["ttfot_ms.p50"]["values"][0] == pytest.approx(160, abs=40)


def test_the_journal_reader_refuses_impossible_counts(tmp_path: Path) -> None:
    base = {"t_scheduled": 1.0, "t_sent": 1.0, "input_tokens": 10, "output_tokens": 5}
    assert implausible({**base, "cached_tokens": 8, "reasoning_tokens": 3, "ttfot_ms": 5.0}, 2.0) is None
    for bad in ({"cached_tokens": -1}, {"reasoning_tokens": 1e30}, {"ttfot_ms": float("inf")},
                {"tool_calls": "3"}, {"cached_tokens": 11}, {"reasoning_tokens": 6}):  # fmt: skip
        assert implausible({**base, **bad}, 2.0) is not None, bad


@pytest.mark.parametrize("cache", [False, True])
def test_a_shared_prefix_without_a_cache_report_gets_one_line(tmp_path: Path, cache: bool) -> None:
    path = write_workload("reasoning", tmp_path, {"sim.models.r.prefix_cache": cache})
    r = oxconsole_here(str(path), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(CACHE_HINT) == (0 if cache else 1), r.stderr


def test_batch_lines_on_v1_responses_run_as_such_and_write_response_bodies(tmp_path: Path) -> None:
    import orjson

    line = {
        "custom_id": "resp-1",
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": "r", "input": [{"role": "user", "content": "hi " * 40}], "max_output_tokens": 3},
    }
    (tmp_path / "batch.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    sets = {
        "models.0.api": "responses",
        "prompts": {"file": "batch.jsonl", "format": "openai-batch"},
        "output.batch_output": str(tmp_path / "out.jsonl"),
        "run.requests": None,
    }
    path = write_workload("reasoning", tmp_path, sets)
    r = oxconsole_here(str(path), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (out,) = map(orjson.loads, (tmp_path / "out.jsonl").read_bytes().splitlines())
    body = out["response"]["body"]
    assert out["custom_id"] == "resp-1" and body["object"] == "response", out
    assert body["output"][0]["type"] == "message" and body["output"][0]["content"][0]["type"] == "output_text"
    usage = body["usage"]
    assert usage["output_tokens"] == 8 + 3 and usage["output_tokens_details"] == {"reasoning_tokens": 8}, (
        usage
    )
    assert set(usage) >= {"input_tokens", "output_tokens", "total_tokens", "input_tokens_details"}, usage
