"""Headless for SSH and CI: the progress line (TTFT and ITL, `–` for an empty window, what bounds
the run, 80 columns on a terminal, warm-up's own figures) and the end lines (where `/metrics` was
served, where the HTML report is); and the end of a run with stages (a complete run offers no
`--resume`, prompts running out are said, stages counted from 1, the settings wrapped)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import orjson

from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.metrics.stages import StageSpan, stage_table
from oxconsole.reports.progress import progress_line
from tests.support import oxconsole_here
from tests.support.metrics import gauges, make_records
from tests.support.report import sim_workload
from tests.support.ui import fixed_snapshot
from tests.support.workloads import Sets


def test_the_line_shows_ttft_itl_and_dashes_for_an_empty_window() -> None:
    s = fixed_snapshot()
    line = progress_line(s)
    ttft, itl = s.window["ttft_ms"]["p50"], s.window["itl_ms"]["p50"]
    assert f"TTFT {ttft:.0f}ms" in line and f"ITL {itl:.1f}ms" in line, line
    empty = dataclasses.replace(s, window={k: dict.fromkeys(v, 0.0) for k, v in s.window.items()})
    line = progress_line(empty)
    assert "TTFT –" in line and "ITL –" in line and "p50 – p99 –" in line, line
    assert "0.0ms" not in line, line


def test_the_line_says_what_bounds_the_run() -> None:
    s = fixed_snapshot()  # 45 of 48 in flight, 12 waiting for a slot
    assert "bound: concurrency" in progress_line(s)
    free: dict[str, Any] = dict(in_flight=3, waiting_slot=0)
    cases: dict[str, dict[str, Any]] = {
        "tpm": dict(tpm=12_000.0, tpm_used=11_900.0, **free),
        "rate": dict(rate=5.0, achieved_rate=5.0, waiting_bucket=2, **free),
    }
    for words, g in cases.items():
        line = progress_line(dataclasses.replace(s, gauges=dataclasses.replace(s.gauges, **g)))
        assert f"bound: {words}" in line, (words, line)
    paused = dataclasses.replace(s, gauges=dataclasses.replace(s.gauges, state="paused"))
    assert progress_line(paused).endswith("PAUSED") and "bound:" not in progress_line(paused)


def test_on_an_80_column_terminal_the_line_fits_and_keeps_what_matters() -> None:
    s = fixed_snapshot()
    assert len(progress_line(s)) > 80  # a log gets the whole line
    for width in (80, 60):
        line = progress_line(s, width)
        assert len(line) <= width, (width, len(line), line)
        assert "2040/4000" in line and "req/s" in line and "TTFT" in line, line
    assert "bound: conc" in progress_line(s, 80)


def test_warm_up_progress_shows_the_stage_s_own_figures() -> None:
    now = [0.0]
    c = Collector(["m"], started_at=0.0, clock=lambda: now[0])
    c.stage_log.begin(StageSpan(0, 0.0, True, False, 10.0), 0.0, 2, 20.0)
    recs = [r for r in make_records(40) if r.status == "ok"][:20]
    for r in recs:
        r.stage, r.warmup = 0, True
        c.record(r)
    now[0] = 4.0
    snap = Snapshot.from_dict(c.snapshot(gauges(elapsed_s=4.0)).to_dict())  # as over the socket
    line = progress_line(snap)
    assert "warm-up 20 done" in line, line
    assert "p50 – p99 –" not in line and "p50 0.0ms" not in line, line
    assert "stage 1/2 warm-up" in line, line


def test_the_end_says_where_metrics_were_served_and_the_html_report(tmp_path: Path) -> None:
    wl = sim_workload(tmp_path, count=30, sets={"output.html": True})
    r = oxconsole_here(str(wl), "--headless", "--prometheus", "127.0.0.1:0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    served = re.search(r"/metrics was served at http://127\.0\.0\.1:(\d+)/metrics", r.stderr)
    assert served and int(served.group(1)) > 0, r.stderr
    report = tmp_path / "report.html"
    assert f"HTML report: {report}" in r.stderr and report.exists(), r.stderr


STAGED: Sets = {
    "stages": [{"duration": "0.5s", "concurrency": 2, "warmup": True}, {"duration": "0.7s", "concurrency": 4}]
}


def test_stages_that_ran_to_their_end_are_a_complete_run(tmp_path: Path) -> None:
    wl = sim_workload(tmp_path, count=5000, concurrency=4, sets=STAGED)
    r = oxconsole_here(str(wl), "--headless", "--summary-json", str(tmp_path / "s.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    assert summary["requests"]["not_sent"] == 0 and summary["stages_end"] == {"complete": True}, summary
    assert "--resume" not in r.stderr and "not sent" not in r.stdout + r.stderr, r.stderr


def test_prompts_running_out_mid_stage_are_said(tmp_path: Path) -> None:
    wl = sim_workload(tmp_path, count=12, concurrency=4, ttft="50ms", sets=STAGED)
    r = oxconsole_here(str(wl), "--headless", "--summary-json", str(tmp_path / "s.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    end = orjson.loads((tmp_path / "s.json").read_bytes())["stages_end"]
    assert end["complete"] is False and end["reason"] == "prompts ran out", end
    assert end["t"] < 1.2 and end["planned_s"] == 1.2, end
    assert f"the prompts ran out in stage {end['stage']}" in r.stdout, r.stdout
    rep = oxconsole_here("report", str(tmp_path / "results.jsonl"), cwd=tmp_path)
    assert "the prompts ran out" in rep.stdout, rep.stdout


def test_validate_counts_stages_from_one(tmp_path: Path) -> None:
    wl = sim_workload(tmp_path, count=50, sets=STAGED)
    r = oxconsole_here("validate", str(wl), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = [ln.strip() for ln in r.stdout.splitlines() if re.match(r"\s+\d: ", ln)]
    assert [row[:2] for row in rows] == ["1:", "2:"], r.stdout


def test_the_stage_table_wraps_its_settings_at_80_columns() -> None:
    stage = {
        "index": 0, "t_start": 0.0, "t_end": 30.0, "warmup": True, "ramp": True,
        "concurrency": 12_000, "rate": 12345.5, "requests": {"ok": 5}, "throughput": {}, "latency_ms": {},
        "ttft_ms": {},
    }  # fmt: skip
    lines = stage_table([stage])
    assert all(len(ln) <= 80 for ln in lines), lines
    text = " ".join(" ".join(lines).split())
    assert "warm-up, ramp to 12000 in flight, 12345.5/s" in text, lines
