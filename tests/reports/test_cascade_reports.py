"""The cascade in the shareable reports: `report --html` has a "Quality and the cascade" section from
the journal alone, and `report A B` compares the valid share and $ per valid answer (actual prices
and each plan), over journals of real runs on the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.base.units import fmt_money
from oxconsole.cli.main import main
from tests.support.workloads import write_workload

N = 40
PLANS = {"plans.flat.default": {"per_request": 0.01}}


def prompts() -> str:
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(N)
    )


def cascade_run(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The cascade example's run in `folder` (the working directory): its workload and summary
    (journal a.jsonl, summary a.json)."""
    path = write_workload("cascade", folder, PLANS, prompts=prompts())
    assert main([str(path), "--headless", "--output", "a.jsonl", "--summary-json", "a.json"]) == 0
    summary: dict[str, Any] = json.loads((folder / "a.json").read_text())
    return path, summary


def test_html_section_and_compare_rows_from_the_journals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path, a = cascade_run(tmp_path)
    alone = ["--set", 'routing.cascade=["big"]', "--output", "b.jsonl", "--summary-json", "b.json"]
    assert main([str(path), "--headless", *alone]) == 0
    capsys.readouterr()

    assert main(["report", "a.jsonl", "--html", "a.html"]) == 0
    page = (tmp_path / "a.html").read_text()
    section = page[page.index('<section id="quality">') :]
    section = section[: section.index("</section>")]
    small = a["quality"]["models"]["small"]
    assert f"<td>small</td><td>{small['asked']}</td><td>{small['valid']}</td>" in section, section
    assert f"{a['quality']['valid']} valid answers of {N} judged" in section
    assert main(["report", "b.jsonl", "--html", "b.html"]) == 0  # a run alone still has the section
    assert "Quality and the cascade" in (tmp_path / "b.html").read_text()

    capsys.readouterr()
    assert main(["report", "a.jsonl", "b.jsonl", "--json"]) == 0
    rows = {r["figure"]: r for r in json.loads(capsys.readouterr().out)["figures"]}
    b = json.loads((tmp_path / "b.json").read_text())
    assert rows["quality.fraction"]["values"] == [
        100 * a["quality"]["fraction"],
        100 * b["quality"]["fraction"],
    ]
    assert rows["cost_per_valid"]["values"] == pytest.approx([a["cost"]["per_valid"], b["cost"]["per_valid"]])
    flat = rows["cost_per_valid.flat"]["values"]
    assert flat == pytest.approx(
        [a["cost"]["plans"]["flat"]["per_valid"], b["cost"]["plans"]["flat"]["per_valid"]]
    )
    # the plan bills every request: N to small first, the escalated ones again to big
    assert a["cost"]["plans"]["flat"]["total"] == pytest.approx(0.01 * (N + a["cascade"]["escalated"]))
    assert main(["report", "a.jsonl", "b.jsonl"]) == 0
    text = capsys.readouterr().out
    assert "valid %" in text and "cost/valid" in text and "flat /valid" in text


def test_markdown_has_the_quality_and_cascade_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, a = cascade_run(tmp_path)
    capsys.readouterr()
    assert main(["report", "a.jsonl", "--markdown"]) == 0
    md = capsys.readouterr().out
    assert "#### Quality and the cascade" in md, md
    section = md[md.index("#### Quality and the cascade") :]
    q, final = a["quality"], a["cascade"]["final"]
    assert f"{q['valid']} valid answers of {N} judged" in section, section
    for name, m in q["models"].items():
        row = f"| {name} | {m['asked']} | {m['valid']} | {100 * m['fraction']:.1f}% | {final.get(name, 0)} |"
        assert row in section, (row, section)
    flat = a["cost"]["plans"]["flat"]
    row = f"| flat | {fmt_money(flat['total'])} | {fmt_money(flat['per_valid'])} |"
    assert "| prices | total | per valid answer |" in section and row in section, (row, section)


@pytest.mark.subprocess
def test_every_model_counts_each_request_it_answered_and_the_answer_latency_is_labelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "small" is never right: it answers every request and the cascade moves each on to "big".
    Its row counts the 40 it answered (none of its answers stood), in the JSON, the table and a
    report rebuilt from the journal; each model bills what it answered; the table shows the
    answer's latency (first request to the answer that stood) beside the last step's."""
    monkeypatch.chdir(tmp_path)
    path = write_workload("cascade", tmp_path, {**PLANS, "sim.models.small.quality": 0.0}, prompts=prompts())
    assert main([str(path), "--headless", "--output", "a.jsonl", "--summary-json", "a.json"]) == 0
    table = capsys.readouterr().out
    a: dict[str, Any] = json.loads((tmp_path / "a.json").read_text())
    small, big = a["models"].get("small"), a["models"]["big"]
    assert small is not None, list(a["models"])
    assert small["requests"]["total"] == small["requests"]["ok"] == N, small["requests"]
    assert small["requests"]["passed_on"] == N and a["cascade"]["final"] == {"big": N}, small["requests"]
    assert big["requests"]["total"] == N and "passed_on" not in big["requests"], big["requests"]
    assert small["throughput"]["requests_per_s"] > 0, small["throughput"]
    assert small["latency_ms"]["p50"] is not None, small["latency_ms"]  # its own answers' times
    assert (small["cost"]["total"], big["cost"]["total"]) == pytest.approx((N * 0.001, N * 0.02)), (
        small["cost"],
        big["cost"],
    )  # each pays its own requests; the run's total is the sum
    assert a["cost"]["total"] == pytest.approx(small["cost"]["total"] + big["cost"]["total"]), a["cost"]
    assert a["cost"]["plans"]["flat"]["total"] == pytest.approx(2 * N * 0.01), a["cost"]["plans"]

    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines() if line.strip()}
    assert rows.get("small", [])[:3] == [str(N), str(N), "0"], table  # reqs, ok, err
    answer, latency = rows.get("answer"), rows.get("latency")
    assert answer is not None and latency is not None, table
    assert float(answer[1].replace(",", "")) > float(latency[1].replace(",", "")), (answer, latency)
    assert "TTFT/ITL/latency: the last step's request; answer: first request to the answer" in table
    assert "answer p50" not in table, table  # a row of the table, not a line away

    assert main(["report", "a.jsonl", "--json"]) == 0
    rebuilt = json.loads(capsys.readouterr().out)
    for name in ("small", "big"):
        assert rebuilt["models"][name]["requests"] == a["models"][name]["requests"], name
        assert rebuilt["models"][name]["cost"]["total"] == pytest.approx(a["models"][name]["cost"]["total"])


@pytest.mark.subprocess
def test_quality_without_a_cascade_prints_no_cascade_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = write_workload("cascade", tmp_path, {"routing.cascade": None}, prompts=prompts())
    assert main([str(path), "--headless", "--output", "a.jsonl"]) in (0, 1)
    table = capsys.readouterr().out
    assert "quality   " in table and "valid of" in table, table
    assert "\ncascade   " not in table and "escalated" not in table, table
    assert "answer p50" in table, table  # no answer row without a cascade: said on the quality line
