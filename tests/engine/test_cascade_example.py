"""examples/cascade.toml on the simulator (no key, no network): the cascade against the large model
alone, and a sweep over the cascade whose table gives valid answers per second, p99 latency and $
per valid answer under each plan, with `routing.cascade=small+large` read as a list."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from oxconsole.cli.main import main
from oxconsole.reports.summary import summary_from_journal
from oxconsole.reports.summarytable import render_summary
from oxconsole.sweep.plan import parse_over

ROOT = Path(__file__).resolve().parents[2] / "examples"
FAST = ["--set", "sim.models.small.ttft=0.01", "--set", "sim.models.large.ttft=0.03"]


def copy_example(folder: Path) -> Path:
    for name in ("cascade.toml", "cascade.jsonl"):
        shutil.copy(ROOT / name, folder / name)
    return folder / "cascade.toml"


def test_example_cascade_beats_the_large_model_alone_per_valid_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_example(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main([str(path), "--headless", *FAST, "--summary-json", "c.json", "--output", "c.jsonl"]) == 0
    alone = ["--set", 'routing.cascade=["large"]', "--summary-json", "l.json", "--output", "l.jsonl"]
    assert main([str(path), "--headless", *FAST, *alone]) == 0
    out = capsys.readouterr().out
    c, solo = (json.loads((tmp_path / f).read_text()) for f in ("c.json", "l.json"))
    assert c["quality"]["models"]["small"]["asked"] == 200
    small = c["quality"]["models"]["small"]["fraction"]
    assert 0.6 < small < 0.8, small  # quality = 0.7, drawn per prompt
    assert c["cascade"]["escalated"] == 200 - c["quality"]["models"]["small"]["valid"]
    assert set(solo["quality"]["models"]) == {"large"} and solo["cascade"]["escalated"] == 0
    # the steps in force, in the summary and in what `report` rebuilds from the journal
    assert (c["cascade"]["steps"], solo["cascade"]["steps"]) == (["small", "large"], ["large"])
    assert summary_from_journal(tmp_path / "l.jsonl")["cascade"]["steps"] == ["large"]
    for plan in ("request-based", "token-based"):
        mine, theirs = c["cost"]["plans"][plan]["per_valid"], solo["cost"]["plans"][plan]["per_valid"]
        assert mine < theirs / 2, (plan, mine, theirs)
    assert c["cost"]["per_valid"] < solo["cost"]["per_valid"]
    assert "quality   " in out and "per valid " in render_summary(c)


def test_a_cascade_value_of_the_sweep_is_a_list() -> None:
    over = parse_over('routing.cascade=small+large,large,["large", "small"]')
    assert over.texts == ("small+large", "large", '["large", "small"]')
    assert [over.setting(t) for t in over.texts] == ['["small", "large"]', '["large"]', '["large", "small"]']
    assert parse_over("packing.size=1,2").setting("2") == "2"


@pytest.mark.slow
def test_sweep_over_the_cascade_prints_valid_goodput_and_cost_per_valid_by_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_example(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["sweep", str(path), "--over", "routing.cascade=small+large,large", "--point-duration", "1.5s"]
    assert main([*args, *FAST, "--summary-json", "-"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert [p["value"] for p in data["points"]] == [["small", "large"], ["large"]]
    table = err[err.index("valid answers and $ per valid answer by plan:") :].splitlines()
    assert table[1].split() == ["#", "value", "valid/s", "valid", "escalated", "answer", "p99", "$/valid",
                                "request-based", "token-based"], table[1]  # fmt: skip
    rows = {line.split()[1] if not line.startswith("*") else line.split()[2]: line for line in table[2:4]}
    assert set(rows) == {"small+large", "large"}, rows
    for p in data["points"]:
        s = p["summary"]
        assert s["cost"]["plans"]["request-based"]["per_valid"] is not None
    first, second = (p["summary"] for p in data["points"])
    assert first["cascade"]["escalated"] > 0 and second["cascade"]["escalated"] == 0
