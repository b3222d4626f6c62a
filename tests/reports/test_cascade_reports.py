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
