"""`oxconsole report` given something else than a journal, a journal with injected records, and a
run where nothing succeeded: bad input is exit 2 with a message, records a run did not write are
ignored and counted, and figures nothing measured show `–` (null in JSON), never 0.0.

The command runs as a user runs it (a separate process); the journals come from real runs over
HTTP against the embedded simulator.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import oxconsole_here
from tests.support.workloads import write_workload

# one worker for the whole file under xdist: its module fixture then runs once
pytestmark = pytest.mark.xdist_group("report-input")

TIMINGS = ("latency_ms", "ttft_ms", "itl_ms", "queue_ms")


def oxc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`)."""
    return oxconsole_here(*args, cwd=cwd)


def run(tmp_path: Path, count: int, error_rate: float) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A headless run against the simulator; its result and its journal."""
    results = tmp_path / "out" / "results.jsonl"
    sets = {
        "name": "input",
        "run.concurrency": 4,
        "output.results": str(results),
        "prompts.synthetic.count": count,
        "retry.max_attempts": 1,
        "sim.models.m": {"ttft": "5ms", "tokens_per_s": 500, "jitter": 0, "error_rate": error_rate},
    }
    w = write_workload("sim_paced", tmp_path, sets, file="w.toml")
    r = oxc(str(w), "--headless", "--summary-json", str(tmp_path / "s.json"), cwd=tmp_path)
    return r, results


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One healthy run of 5 requests for this file's tests, which only read its folder (a test that
    changes the journal copies it): the run's result and its folder (w.toml, s.json, out/)."""
    folder = tmp_path_factory.mktemp("healthy")
    r, _ = run(folder, count=5, error_rate=0.0)
    assert r.returncode == 0, r.stderr
    return r, folder


def refused(tmp_path: Path, path: Path) -> str:
    """Report `path`, expecting bad input; its message."""
    for args in ((), ("--json",)):
        r = oxc("report", str(path), *args, cwd=tmp_path)
        assert r.returncode == 2, (path, r.stdout, r.stderr)
        assert r.stdout == "" and "Traceback" not in r.stderr
    msg = r.stderr.strip()
    assert len(msg.splitlines()) == 1, msg
    assert str(path) in msg and "not a results journal" in msg
    assert '"id", "status", "t_scheduled", "t_sent"' in msg  # what was expected
    return msg


def test_files_that_are_not_journals_exit_2(
    tmp_path: Path, healthy: tuple[subprocess.CompletedProcess[str], Path]
) -> None:
    _, run_folder = healthy
    results = run_folder / "out" / "results.jsonl"

    # the workload file, its first line blank: the first line with something on it is named
    workload = tmp_path / "w.toml"
    workload.write_text("\n" + (run_folder / "w.toml").read_text())
    msg = refused(tmp_path, workload)
    assert "line 2 is not JSON" in msg and "TOML" in msg  # line 1 is blank

    # the run's summary, not its journal
    msg = refused(tmp_path, run_folder / "s.json")
    assert "run summary" in msg

    # a binary file
    binary = tmp_path / "data.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    assert "binary data" in refused(tmp_path, binary)

    # a prompts file: JSON objects, with ids, without a status
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "a", "prompt": "hi"}\n{"id": "b", "prompt": "ho"}\n')
    msg = refused(tmp_path, prompts)
    assert 'line 1 is a JSON object without "status" (a prompts file?)' in msg

    # JSON lines of something else altogether
    other = tmp_path / "events.jsonl"
    other.write_text('{"event": "start"}\n[1, 2]\n')
    assert 'line 1 is a JSON object without "id" and "status"' in refused(tmp_path, other)

    # still journals: an empty one (nothing finished), one with a torn last line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert oxc("report", str(empty), cwd=tmp_path).returncode == 0
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(results.read_bytes() + b'{"id": "syn-9", "sta')
    r = oxc("report", str(torn), "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["requests"]["total"] == 5
    assert "incomplete last line" in r.stderr


def test_records_without_run_times_are_ignored_and_said(
    tmp_path: Path, healthy: tuple[subprocess.CompletedProcess[str], Path]
) -> None:
    results = tmp_path / "results.jsonl"
    shutil.copy(healthy[1] / "out" / "results.jsonl", results)
    clean = json.loads(oxc("report", str(results), "--json", cwd=tmp_path).stdout)
    with open(results, "a") as f:  # a record typed in by hand: no t_scheduled, no t_sent
        f.write('{"id": "injected", "status": "ok", "model": "m", "latency_ms": 1}\n')
        f.write('{"id": "zero", "status": "error", "model": "m", "t_scheduled": 0, "t_sent": 0}\n')
    for args in ((), ("--json",)):
        rep = oxc("report", str(results), *args, cwd=tmp_path)
        assert rep.returncode == 0, rep.stderr
        assert "ignored 2 record(s) without run times (t_scheduled and t_sent)" in rep.stderr
        assert "1970" not in rep.stdout
    s = json.loads(rep.stdout)
    assert s["started_at"] == clean["started_at"] and not s["started_at"].startswith("1970")
    assert s["requests"] == clean["requests"] and s["duration_s"] == clean["duration_s"]


def test_a_run_where_every_request_failed_shows_no_made_up_figures(tmp_path: Path) -> None:
    # 4 requests, 4 slots: all sent before the failing model could be cooled down
    r, results = run(tmp_path, count=4, error_rate=1.0)
    assert r.returncode == 1, r.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    rep = oxc("report", str(results), "--json", cwd=tmp_path)
    table = oxc("report", str(results), cwd=tmp_path)
    for s in (summary, json.loads(rep.stdout)):
        assert s["requests"]["ok"] == 0 and s["requests"]["error"] == 4
        for key in TIMINGS:  # every key kept, each null: nothing was measured
            assert s[key] == dict.fromkeys(("mean", "p50", "p90", "p95", "p99", "max")), key
        assert s["models"]["m"]["latency_ms"]["p50"] is None
    for text in (r.stdout, table.stdout):
        rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
        for label in ("TTFT", "ITL", "latency", "queue"):
            assert rows[label] == ["–"] * 6, (label, text)
        assert rows["m"][4:7] == ["–", "–", "–"]  # the model's p50 / p99 latency and p50 TTFT


def test_a_healthy_run_still_shows_its_figures(
    healthy: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    r, run_folder = healthy
    s = json.loads((run_folder / "s.json").read_text())
    assert all(isinstance(s[key]["p50"], float) for key in TIMINGS), [
        key for key in TIMINGS if not isinstance(s[key]["p50"], float)
    ][:5]
    assert "–" not in r.stdout
