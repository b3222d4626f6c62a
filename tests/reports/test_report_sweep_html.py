"""`oxconsole report RESULTS.jsonl --html PATH` on a sweep's journal: a real short sweep against the
embedded simulator, then the page's sweep section (one dot per point, the knee named as the sweep's
JSON names it, the points' table), self-contained; a journal that is not a sweep's has none."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oxconsole.cli.main import main
from tests.support.report import parse
from tests.support.sweep import write


def _section(text: str) -> str:
    m = re.search(r'<section id="sweep">.*?</section>', text, re.S)
    assert m is not None
    return m.group(0)


@pytest.mark.slow
@pytest.mark.parametrize("slo", [False, True])
def test_a_sweeps_report_has_the_curve_and_the_knee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], slo: bool
) -> None:
    write(
        tmp_path, capacity=2, ttft="30ms", sets={"slo": {}} if slo else None
    )  # goodput: the share of ok requests
    monkeypatch.chdir(tmp_path)
    args = ["--over", "concurrency=1,2,4", "--point-duration", "0.6s", "--summary-json", "s.json"]
    assert main(["sweep", str(tmp_path / "w.toml"), *args]) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["knee"] is not None
    journal = tmp_path / "out" / "results.jsonl"
    assert main(["report", str(journal), "--html", "r.html"]) == 0
    capsys.readouterr()
    text = (tmp_path / "r.html").read_text()
    page = parse(text)
    assert page.fetches == [] and "script" not in page.tags
    assert "http://" not in text and "https://" not in text
    assert "sweep" in page.ids and "throughput" in page.ids  # the sweep section beside the usual ones
    sec = _section(text)
    assert "Sweep over concurrency" in sec
    charts = re.findall(r"<svg.*?</svg>", sec, re.S)
    assert len(charts) == 2
    # throughput against latency: a dot per point for p50 and for p99, each labelled with its value
    assert charts[0].count('class="dot"') == 2 * 3
    for v in ("1", "2", "4"):
        assert charts[0].count(f">{v}</text>") >= 2
    # goodput (throughput without [slo]) against the value: one dot per point, the knee marked;
    # with [slo], throughput's dots beside goodput's
    assert charts[1].count('class="dot"') == (6 if slo else 3)
    assert ("Goodput against concurrency" in sec) is slo
    knee = f"concurrency={data['knee']['value']}"
    assert f"knee: {knee}" in charts[1] and 'class="knee"' in charts[1]
    assert f"knee: <b>{knee}</b>" in sec
    rows = re.findall(r"<tr><td>.*?</tr>", sec, re.S)
    assert len(rows) == 3
    assert rows[data["knee"]["index"]].startswith(f"<tr><td>{data['knee']['index']} *</td>")
    assert "cost per task" in sec


def test_a_run_that_is_not_a_sweep_has_no_sweep_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([str(tmp_path / "w.toml"), "--headless", "--set", "prompts.synthetic.count=6"]) == 0
    assert main(["report", str(tmp_path / "out" / "results.jsonl"), "--html", "r.html"]) == 0
    capsys.readouterr()
    text = (tmp_path / "r.html").read_text()
    assert 'id="sweep"' not in text and 'id="throughput"' in text
