"""`oxconsole report` shows what the run showed: the run on the simulator, then `report` of its
journal, section by section and figure by figure against the run's own summary JSON."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from oxconsole.reports.summarytable import BY_TIME, UNCUT, render_summary
from tests.support import oxconsole_here, wait_until
from tests.support.metrics import assert_histograms_close
from tests.support.report import STAGES, sim_workload
from tests.support.sweep import write
from tests.support.workloads import Sets

RUN_ONLY = ("changes", "phases", "stages", "stages_end", "attempt_errors", "error_details", "warmup")
"""What no record holds: before the manifest kept them, a report had none of them."""


def _run_and_report(folder: Path, sets: Sets, *args: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    wl = sim_workload(folder, count=2000, concurrency=4, ttft="10ms", sets=sets)
    r = oxconsole_here(str(wl), "--headless", "--summary-json", str(folder / "s.json"), *args, cwd=folder)
    assert r.returncode in (0, 1), r.stderr
    run = orjson.loads((folder / "s.json").read_bytes())
    rep = oxconsole_here("report", str(folder / "results.jsonl"), "--json", cwd=folder)
    assert rep.returncode == 0, rep.stderr
    text = oxconsole_here("report", str(folder / "results.jsonl"), cwd=folder)
    assert text.returncode == 0, text.stderr
    return run, orjson.loads(rep.stdout), text.stdout


def test_report_of_a_run_with_stages_and_errors_has_its_sections(tmp_path: Path) -> None:
    args = ("--set", "sim.models.m.error_rate=0.2", "--set", "retry.max_attempts=2")
    run, rep, text = _run_and_report(tmp_path / "staged", STAGES, *args)
    assert run["changes"] and run["error_details"] and run["attempt_errors"], run
    assert len(run["phases"]) >= 2 and run["stages_end"] == {"complete": True}, run["phases"]
    for key in RUN_ONLY:
        assert rep.get(key) == run.get(key), (key, rep.get(key), run.get(key))
    for key in ("requests", "errors", "throughput", "goodput", "cost"):
        assert rep[key] == run[key], (key, rep[key], run[key])
    for key in ("latency_ms", "ttft_ms"):  # from the journal's 3-decimal values: a bucket apart at most
        assert rep[key].keys() == run[key].keys(), (key, rep[key], run[key])
        assert_histograms_close(rep[key], run[key])
    # The text is the report's own summary rendered: figures outside the keys compared above
    # (ITL, queue time) come from the journal's 3-decimal values and may differ from the run's in
    # their last printed digit, as tests/test_metrics.assert_histograms_close allows.
    assert text == render_summary(rep, UNCUT), (text, render_summary(rep, UNCUT))  # a pipe: no width
    for words in ("phase", "stage", "detail", "retried"):
        assert words in text, (words, text)
    # a stage counts the requests sent in it, a phase those that ended in it: said under them
    assert BY_TIME in text[text.index("\nstage ") :], text


def test_report_of_a_stopped_run_says_what_was_not_sent(tmp_path: Path) -> None:
    """Stopped by SIGINT part way: the report counts the requests not sent as the run did."""
    folder = tmp_path / "stopped"
    wl = sim_workload(folder, count=3000, concurrency=2, ttft="30ms")
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--summary-json", str(folder / "s.json")],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    journal = folder / "results.jsonl"
    wait_until(lambda: journal.exists() and journal.stat().st_size > 2000, 60, "records")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    run = orjson.loads((folder / "s.json").read_bytes())
    assert run["requests"]["not_sent"] > 0, run["requests"]
    rep = oxconsole_here("report", str(journal), "--json", cwd=folder)
    assert orjson.loads(rep.stdout)["requests"] == run["requests"], (rep.stdout, run["requests"])
    text = oxconsole_here("report", str(journal), cwd=folder).stdout
    assert f"{run['requests']['not_sent']:,} not sent" in text, text


def test_a_later_session_never_takes_an_earlier_sessions_sections(tmp_path: Path) -> None:
    """The sections kept are the last session's: a journal whose last session kept none (it
    crashed) reports none, not those of the session before."""
    folder = tmp_path / "two"
    run, rep, _ = _run_and_report(folder, STAGES)
    assert rep["changes"] == run["changes"] and run["changes"]
    meta = folder / "results.jsonl.meta.json"
    data = orjson.loads(meta.read_bytes())
    data["sessions"].append({"started_at": data["sessions"][-1]["started_at"] + 100.0, "running_s": None})
    meta.write_bytes(orjson.dumps(data))
    again = oxconsole_here("report", str(folder / "results.jsonl"), "--json", cwd=folder)
    assert orjson.loads(again.stdout)["changes"] == [], again.stdout


def test_report_of_a_sweep_has_the_point_table_and_the_knee(tmp_path: Path) -> None:
    """A sweep run out of order (4, 1, 2): the report's table lists the points by value, marks the
    knee the sweep's own JSON named, and `--json` holds the same sweep object."""
    wl = write(tmp_path, capacity=2, ttft="30ms")
    args = ["--over", "concurrency=4,1,2", "--point-duration", "0.5s", "--summary-json", "s.json"]
    r = oxconsole_here("sweep", str(wl), *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    swept = orjson.loads((tmp_path / "s.json").read_bytes())
    journal = tmp_path / "out" / "results.jsonl"
    text = oxconsole_here("report", str(journal), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    table = text.stdout[text.stdout.index("sweep over concurrency") :].splitlines()
    rows = [ln.split() for ln in table[2:5]]
    assert [row[1] if row[1] != "*" else row[2] for row in rows] == ["1", "2", "4"], table
    knee = swept["knee"]
    assert knee is not None and f"knee: concurrency={knee['value']}" in text.stdout, (knee, table)
    marked = [row for row in rows if row[1] == "*"]
    assert len(marked) == 1 and marked[0][2] == str(knee["value"]), table
    js = orjson.loads(oxconsole_here("report", str(journal), "--json", cwd=tmp_path).stdout)
    assert js["sweep"]["knee"] == knee, (js["sweep"]["knee"], knee)
    assert [p["value"] for p in js["sweep"]["points"]] == [p["value"] for p in swept["points"]], js["sweep"]


def test_compare_heads_columns_by_the_journals_and_adds_goodput(tmp_path: Path) -> None:
    """`report runs/a.jsonl runs/b.jsonl`: columns `a.jsonl` and `b.jsonl` (not `runs runs`);
    `slo/results.jsonl` twice in two folders: the folders that tell them apart; goodput rows
    when the runs had `[slo]`."""
    from oxconsole.reports.compare import short_names

    assert short_names(["runs/a.jsonl", "runs/b.jsonl"]) == ["a.jsonl", "b.jsonl"]
    assert short_names(["x/slo/results.jsonl", "y/slo/results.jsonl"]) == [
        "x/slo/results.jsonl",
        "y/slo/results.jsonl",
    ]
    for name in ("a", "b"):
        folder = tmp_path / "runs" / name
        wl = sim_workload(folder, count=40, sets={"slo.ttft": "1s"})
        r = oxconsole_here(
            str(wl), "--headless", "--output", str(tmp_path / "runs" / f"{name}.jsonl"), cwd=folder
        )
        assert r.returncode == 0, r.stderr
    r = oxconsole_here("report", "runs/a.jsonl", "runs/b.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head = next(ln for ln in r.stdout.splitlines() if ln.startswith("figure"))
    assert head.split()[:3] == ["figure", "a.jsonl", "b.jsonl"], head
    rows = {ln.split("  ")[0].strip() for ln in r.stdout.splitlines()}
    assert {"goodput/s", "good %"} <= rows, r.stdout
