"""A headless run keeps its summary beside its journal, as a console run's engine process does:
`summary.json` beside `results.jsonl`, `<journal stem>.summary.json` beside any other journal name;
`--summary-json PATH` writes it there too; the end's last line says where each one is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import oxconsole_here, read_jsonl
from tests.support.workloads import write_workload

SETS = {"run.concurrency": 2, "run.requests": 6, "prompts.items": ["a", "b", "c"]}


@pytest.mark.parametrize(
    ("journal", "summary"),
    [("out/results.jsonl", "out/summary.json"), ("out/night.jsonl", "out/night.summary.json")],
    ids=["default-name", "named"],
)
def test_a_headless_run_writes_its_summary_beside_its_journal(
    tmp_path: Path, journal: str, summary: str
) -> None:
    wl = write_workload("sim_instant", tmp_path, {**SETS, "output.results": str(tmp_path / journal)})
    p = oxconsole_here(str(wl), "--headless", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    kept = tmp_path / summary
    assert kept.exists(), (sorted(x.name for x in kept.parent.iterdir()), p.stderr[-1000:])
    s = json.loads(kept.read_text())
    assert s["requests"]["ok"] == 6 and s["requests"]["total"] == len(read_jsonl(tmp_path / journal)), s[
        "requests"
    ]
    where = [ln for ln in p.stderr.splitlines() if ln.startswith("oxconsole: results: ")]
    assert len(where) == 1 and f"summary: {kept}" in where[0], p.stderr[-1000:]


def test_summary_json_is_written_there_too(tmp_path: Path) -> None:
    wl = write_workload("sim_instant", tmp_path, SETS)
    p = oxconsole_here(str(wl), "--headless", "--summary-json", "also.json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    beside, also = tmp_path / "summary.json", tmp_path / "also.json"
    assert json.loads(beside.read_text()) == json.loads(also.read_text())
    [where] = [ln for ln in p.stderr.splitlines() if ln.startswith("oxconsole: results: ")]
    assert f"summary: {beside}, also.json" in where, where
