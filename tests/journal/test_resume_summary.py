"""After --resume the summary covers the whole journal: every session counted, rates over the time
the sessions ran (not the gap between them), and `oxconsole report` gives the same figures.

Two sessions without signals: the first runs against a simulator that fails some requests (no
retries), the resume (`--set sim.models.m.error_rate=0`, a setting ids do not depend on) sends
exactly those again. Real processes, real HTTP to the embedded simulator.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.reports.summary import summary_from_journal
from tests.support import oxconsole_here
from tests.support.workloads import write_workload

COUNT = 30

# one worker for the whole file under xdist: its module fixture then runs once
pytestmark = pytest.mark.xdist_group("resume-summary")

FIGURES = (
    "name",
    "started_at",
    "duration_s",
    "requests",
    "throughput",
    "latency_ms",
    "ttft_ms",
    "itl_ms",
    "queue_ms",
    "tokens",
    "tokens_source",
    "cost",
    "errors",
    "attempt_errors",
    "backoff",
    "models",
)
"""What the journal holds: a resumed run's own summary and `report` must agree on all of it."""


def oxc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`); the engine host below is a process."""
    return oxconsole_here(*args, cwd=cwd, env=env)


def workload(folder: Path) -> Path:
    """tests/workloads/sim_paced.toml as folder/w.toml: COUNT prompts, 30% of them failing, one
    attempt each; journaled in folder/out/."""
    sets = {
        "name": "two-sessions",
        "run.concurrency": 4,
        "run.seed": 7,
        "output.results": str(folder / "out" / "results.jsonl"),
        "prompts.synthetic.count": COUNT,
        "retry.max_attempts": 1,
        "sim.models.m.error_rate": 0.3,
    }
    return write_workload("sim_paced", folder, sets, file="w.toml")


def figures(s: dict[str, Any]) -> dict[str, Any]:
    out = {k: s[k] for k in FIGURES}
    out["requests"] = {k: v for k, v in s["requests"].items() if k != "not_sent"}  # the session's
    return out


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first session, run once for this file: a folder with its workload, journal and summary.
    Each test works on a copy (`first_session`)."""
    folder = tmp_path_factory.mktemp("first")
    w = workload(folder)
    r = oxc(str(w), "--headless", "--summary-json", str(folder / "s1.json"), cwd=folder)
    assert r.returncode == 1, r.stderr  # some requests failed: the resume sends them again
    return folder


def first_session(tmp_path: Path, first_run: Path) -> tuple[Path, Path, dict[str, Any]]:
    """A copy of the first session in tmp_path: its workload, journal (with manifest), summary."""
    shutil.copytree(first_run / "out", tmp_path / "out")
    w = workload(tmp_path)
    results = tmp_path / "out" / "results.jsonl"
    s1 = json.loads((first_run / "s1.json").read_text())
    assert s1["requests"]["error"] > 0 and s1["requests"]["sessions"] == 1
    return w, results, s1


def records(results: Path) -> list[RequestRecord]:
    return [RequestRecord.from_json_dict(orjson.loads(x)) for x in results.read_bytes().splitlines()]


def manifest(results: Path) -> dict[str, Any]:
    return dict(orjson.loads(results.with_name(results.name + ".meta.json").read_bytes()))


@pytest.mark.parametrize("older", [False, True], ids=["sessions-recorded", "journal-from-before-sessions"])
def test_resumed_summary_covers_every_session_and_report_agrees(
    tmp_path: Path, first_run: Path, older: bool
) -> None:
    w, results, s1 = first_session(tmp_path, first_run)
    if older:  # a journal written before sessions were recorded: its records are one session
        m = manifest(results)
        del m["sessions"]
        results.with_name(results.name + ".meta.json").write_bytes(orjson.dumps(m))
    r = oxc(
        str(w),
        "--headless",
        "--resume",
        "--set",
        "sim.models.m.error_rate=0",
        "--summary-json",
        str(tmp_path / "s2.json"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    s2 = json.loads((tmp_path / "s2.json").read_text())

    # the whole journal: every id once, ok; both sessions counted
    req = s2["requests"]
    assert (req["total"], req["ok"], req["error"], req["sessions"]) == (COUNT, COUNT, 0, 2)
    assert s2["models"]["m"]["requests"]["total"] == COUNT
    if older:  # the first record's due time, not the session's start: a moment after it
        late = datetime.fromisoformat(s2["started_at"]) - datetime.fromisoformat(s1["started_at"])
        assert 0 <= late.total_seconds() < 0.5
    else:
        assert s2["started_at"] == s1["started_at"]
    assert s2["tokens"]["output"] == 4 * COUNT
    assert "over 2 sessions" in r.stdout and f"{COUNT} total  {COUNT} ok" in r.stdout

    # rates over the sessions' running time: the first session's, plus the second's
    sessions = manifest(results)["sessions"]
    assert len(sessions) == (1 if older else 2)
    assert all(x["running_s"] is not None for x in sessions), [x for x in sessions if x["running_s"] is None][
        :5
    ]
    second = sessions[-1]["running_s"]
    first = s1["duration_s"]
    recs = records(results)
    # the first session's: the journal keeps times to the microsecond, and the resume's first
    # requests are due the instant it started, so compare with its start rounded the same way
    mine = [x for x in recs if x.t_scheduled < round(sessions[-1]["started_at"], 6)]
    first_end = max(x.t_sent + (x.latency_ms or 0) / 1000 for x in mine)
    if older:  # no running time recorded: from its first due time to its last answer
        first = first_end - min(x.t_scheduled for x in mine)
        assert first <= s1["duration_s"]
    assert s2["duration_s"] == pytest.approx(first + second, abs=2e-3)
    # the gap between the sessions (at least the resume's start-up) is not running time
    gap = sessions[-1]["started_at"] - first_end
    span = max(x.t_sent + (x.latency_ms or 0) / 1000 for x in recs) - min(x.t_scheduled for x in recs)
    assert gap > 0.1 and s2["duration_s"] < span - gap / 2
    # duration_s is rounded to the millisecond, requests_per_s is COUNT over the duration before
    # that rounding (then rounded itself): so the rate lies between COUNT over duration_s plus and
    # minus half a millisecond. On this 0.23 s run half a millisecond is 0.2% of the rate.
    rate, d = s2["throughput"]["requests_per_s"], s2["duration_s"]
    assert COUNT / (d + 5e-4) - 5e-4 <= rate <= COUNT / (d - 5e-4) + 5e-4, (rate, d, COUNT / d)

    # `oxconsole report` on the journal: the very same figures
    rep = oxc("report", str(results), "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert figures(json.loads(rep.stdout)) == figures(s2)


@pytest.mark.slow
def test_console_engine_writes_the_whole_summary(tmp_path: Path, first_run: Path) -> None:
    """The engine process a console starts (`oxconsole.cli.detached`) ends a resumed run with the whole
    journal's summary in summary.json: what it also sends the console as its final summary."""
    w, results, _ = first_session(tmp_path, first_run)
    host = subprocess.run(
        [
            sys.executable,
            "-m",
            "oxconsole.cli.detached",
            "--workload",
            str(w),
            "--output",
            str(results),
            "--resume",
            "--set",
            "sim.models.m.error_rate=0",
            "--log",
            "-",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "rt")},
    )
    assert host.returncode == 0, host.stderr
    final = json.loads((results.parent / "summary.json").read_text())
    assert final["requests"]["sessions"] == 2 and final["requests"]["ok"] == COUNT
    assert figures(summary_from_journal(results)) == figures(final)


def test_a_new_run_keeps_the_old_journal_with_its_sessions(tmp_path: Path, first_run: Path) -> None:
    w, results, _ = first_session(tmp_path, first_run)
    r = oxc(str(w), "--headless", "--resume", "--set", "sim.models.m.error_rate=0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = oxc(str(w), "--headless", "--set", "sim.models.m.error_rate=0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    kept = [p for p in results.parent.glob("results.*.jsonl") if not p.name.endswith(".server.jsonl")]
    assert len(kept) == 1, kept
    # the server series went aside with its journal, both sessions' rounds in it (--resume appends)
    series = kept[0].with_name(kept[0].name.removesuffix(".jsonl") + ".server.jsonl")
    assert summary_from_journal(kept[0])["server"]["default"]["scrapes"] >= 2, series
    assert summary_from_journal(kept[0])["requests"]["sessions"] == 2
    assert len(manifest(results)["sessions"]) == 1  # the new journal: one session so far
    assert summary_from_journal(results)["requests"]["sessions"] == 1


def test_a_session_that_never_ended_runs_until_its_last_answer(tmp_path: Path) -> None:
    """A crashed session (kill -9: no running time recorded) counts from its start to the end of
    its last request; the hours before its resume do not count."""
    results = tmp_path / "results.jsonl"

    def rec(i: int, t: float) -> bytes:
        r = RequestRecord(f"p{i}", "m", "e", "ok", 1, t, t + 0.5, 0.0, 1000.0)
        return orjson.dumps(r.to_json_dict()) + b"\n"

    # session 1 ran 10 s from t=1000 (recorded); session 2 started at t=5000 and was killed
    results.write_bytes(b"".join([rec(0, 1000.1), rec(1, 1008.0), rec(2, 5000.2), rec(3, 5005.0)]))
    sessions = [{"started_at": 1000.0, "running_s": 10.0}, {"started_at": 5000.0, "running_s": None}]
    results.with_name("results.jsonl.meta.json").write_bytes(
        orjson.dumps({"name": "crashed", "sessions": sessions})
    )
    s = summary_from_journal(results)
    assert s["name"] == "crashed"
    assert s["requests"]["sessions"] == 2
    assert s["duration_s"] == pytest.approx(10.0 + 6.5)  # 5000 .. 5005 + 0.5 + 1 s of latency
    assert s["throughput"]["requests_per_s"] == round(4 / 16.5, 3)
    assert s["started_at"].startswith("1970-01-01T00:16:40")  # t = 1000: the first session's start
