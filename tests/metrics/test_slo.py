"""`[slo]` and goodput: the table, the verdict on each request, the summary's goodput blocks, the
exit code, and `report` rebuilding the same figures from the journal.

Runs go over real HTTP to the embedded simulator with `jitter = 0`. One model answers at once, the
other after a full second, and the thresholds sit half a second from both, so which requests are
good does not depend on the machine's load; the figures are then checked exactly against the
journal, never against the clock.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.goodput import goodput_entry, slo_missed, slo_target_of
from oxconsole.reports.summary import summary_from_journal
from oxconsole.workload import SloConfig, Workload, WorkloadError
from oxconsole.workload import load_workload as load_file
from tests.support import journal, oxconsole_here, run
from tests.support.workloads import Sets, fast_slow, load_workload


def rec(
    status: str = "ok", ttft: float | None = 100.0, itl: float | None = 10.0, lat: float | None = 500.0
) -> RequestRecord:
    return RequestRecord(
        id="x", model="m", endpoint="e", status=status, attempts=1, t_scheduled=1.0, t_sent=1.0,
        queue_ms=0.0, latency_ms=lat, ttft_ms=ttft, itl_ms=itl,
    )  # fmt: skip


# -- the verdict ------------------------------------------------------------------------------


def test_good_needs_ok_and_every_threshold() -> None:
    slo = SloConfig(ttft=0.2, itl=0.02, latency=1.0)
    assert slo.good(rec())
    assert not slo.good(rec(status="error"))
    assert not slo.good(rec(ttft=201.0))
    assert not slo.good(rec(itl=20.5))
    assert not slo.good(rec(lat=1000.1))
    assert slo.good(rec(ttft=200.0, itl=20.0, lat=1000.0))  # a value at its threshold meets it


def test_good_without_stream_timings() -> None:
    """No TTFT (not streamed): the latency stands in; no gap: `itl` is met; no threshold: ok is good."""
    assert SloConfig(ttft=0.6).good(rec(ttft=None, lat=500.0))
    assert not SloConfig(ttft=0.4).good(rec(ttft=None, lat=500.0))
    assert SloConfig(itl=0.001).good(rec(itl=None))
    assert SloConfig().good(rec(ttft=None, itl=None, lat=None))
    assert not SloConfig(latency=1.0).good(rec(lat=None))


def test_goodput_block_arithmetic() -> None:
    assert goodput_entry(0, 0, 10.0, None) == {}
    g = goodput_entry(3, 4, 2.0, 0.8)["goodput"]
    assert g == {"requests_per_s": 1.5, "fraction": 0.75, "target": 0.8, "met": False}
    assert goodput_entry(4, 4, 0.0, 0.8)["goodput"]["met"] is True
    assert goodput_entry(1, 2, 1.0, None)["goodput"] == {
        "requests_per_s": 1.0, "fraction": 0.5, "target": None, "met": None,
    }  # fmt: skip
    assert goodput_entry(0, 0, 1.0, 0.9)["goodput"]["met"] is None  # nothing finished: no verdict
    assert slo_missed({"goodput": {"met": False}}) and not slo_missed({"goodput": {"met": None}})
    assert slo_target_of({"slo": {"target": 0.9}}) == 0.9
    assert slo_target_of({"slo": {"target": 2}}) is None and slo_target_of({}) is None


# -- the table --------------------------------------------------------------------------------


def slo_workload(tmp_path: Path, sets: Sets | None = None) -> Workload:
    """tests/workloads/minimal.toml with one prompt, "a", then `sets`."""
    return load_workload("minimal", tmp_path, {"prompts.items": ["a"], **(sets or {})})


def test_slo_table_read(tmp_path: Path) -> None:
    w = slo_workload(tmp_path, {"slo": {"ttft": "500ms", "itl": 0.05, "latency": "20s"}})
    assert w.slo == SloConfig(ttft=0.5, itl=0.05, latency=20.0, target=0.95)
    assert w.slo.describe() == "ttft <= 500ms, itl <= 50ms, latency <= 20s for 95% of requests"
    assert slo_workload(tmp_path).slo is None
    assert slo_workload(tmp_path, {"slo": {"target": 1}}).slo == SloConfig(target=1.0)


def test_slo_errors_all_at_once(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError) as e:
        slo_workload(tmp_path, {"slo": {"ttft": "fast", "itl": 0, "target": 0, "latncy": "1s"}})
    text = str(e.value)
    assert len(e.value.errors) == 4, text
    assert "workload.toml: slo.ttft: expected a duration > 0" in text
    assert "workload.toml: slo.itl: expected a duration > 0" in text
    assert "workload.toml: slo.target: expected a number > 0 and <= 1" in text
    assert 'slo.latncy: expected a key of [slo] (did you mean "latency"?)' in text
    with pytest.raises(WorkloadError, match=r"slo: expected a table \(\[slo\]\), got 3"):
        slo_workload(tmp_path, {"slo": 3})


# -- runs -------------------------------------------------------------------------------------


def judged_by_journal(recs: list[dict[str, Any]]) -> tuple[int, int]:
    return sum(r["slo_ok"] for r in recs), len(recs)


@pytest.mark.asyncio
async def test_goodput_exact_against_the_journal(tmp_path: Path) -> None:
    w = load_file(fast_slow(tmp_path, 0.4, 0))
    out = await run(w)
    recs = journal(w)
    assert len(recs) == 12 and all(isinstance(r["slo_ok"], bool) for r in recs)
    for r in recs:  # the verdict is the journal's own figures against the threshold
        assert r["slo_ok"] == (r["status"] == "ok" and r["ttft_ms"] <= 500.0)
    assert {r["model"] for r in recs if r["slo_ok"]} == {"fast"}
    assert {r["model"] for r in recs if not r["slo_ok"]} == {"slow"}
    s = out.summary
    good, n = judged_by_journal(recs)
    assert s["goodput"] == {
        "requests_per_s": pytest.approx(good / s["duration_s"], rel=2e-3),  # duration_s is rounded
        "fraction": round(good / n, 4),
        "target": 0.4,
        "met": True,
    }
    assert s["goodput"]["fraction"] == 0.5
    assert s["models"]["fast"]["goodput"]["fraction"] == 1.0
    assert s["models"]["slow"]["goodput"] == {
        "requests_per_s": 0.0,
        "fraction": 0.0,
        "target": 0.4,
        "met": False,
    }
    assert s["phases"][0]["goodput"]["fraction"] == 0.5
    assert out.exit_code == 0
    again = summary_from_journal(w.results_path())
    assert again["goodput"] == s["goodput"]
    assert {m: b["goodput"] for m, b in again["models"].items()} == {
        m: b["goodput"] for m, b in s["models"].items()
    }


@pytest.mark.asyncio
async def test_errors_are_never_good_and_slo_beats_errors(tmp_path: Path) -> None:
    w = load_file(fast_slow(tmp_path, 0.9, 1.0, {"retry.max_attempts": 1}))
    out = await run(w)
    recs = journal(w)
    errors = [r for r in recs if r["status"] == "error"]
    assert len(errors) == 6 and not any(r["slo_ok"] for r in errors)
    assert out.summary["goodput"]["fraction"] == 0.5 and out.summary["goodput"]["met"] is False
    assert out.exit_code == 3  # 3 before 1: errors and a missed SLO


@pytest.mark.asyncio
async def test_no_slo_no_goodput(tmp_path: Path) -> None:
    w = load_file(fast_slow(tmp_path, 0.9, 0, {"slo": None}))
    out = await run(w)
    assert "slo_ok" not in journal(w)[0]
    assert "goodput" not in out.summary and "goodput" not in out.summary["models"]["fast"]
    assert "goodput" not in summary_from_journal(w.results_path())


# -- the command line -------------------------------------------------------------------------


def oxc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`)."""
    return oxconsole_here(*args, cwd=cwd)


def oxc_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line as a process of its own: its exit code is what a CI job sees."""
    return subprocess.run(
        [sys.executable, "-m", "oxconsole", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_exit_codes_and_report(tmp_path: Path) -> None:
    """Headless: 3 when goodput is below the target, 0 at or above it, 1 for errors with the SLO
    met; `report` rebuilds the same goodput (target from the journal's manifest) and exits 0."""
    wl = fast_slow(tmp_path, 0.9, 0, {"output.results": "out/r.jsonl"})
    missed = oxc_process(str(wl), "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert missed.returncode == 3, missed.stderr
    live = orjson.loads((tmp_path / "s.json").read_bytes())
    assert live["goodput"]["met"] is False
    assert "goodput   " in missed.stdout and "below target" in missed.stdout
    assert "[slo] not met: 50.0% of finished requests were good, the target is 90%" in missed.stderr
    rep = oxc("report", "out/r.jsonl", "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    rebuilt = orjson.loads(rep.stdout)
    assert rebuilt["goodput"] == live["goodput"]
    assert rebuilt["models"]["slow"]["goodput"] == live["models"]["slow"]["goodput"]

    met = oxc(str(wl), "--headless", "--set", "slo.target=0.5", cwd=tmp_path)
    assert met.returncode == 0, met.stderr
    assert "[slo] not met" not in met.stderr
    errors = oxc(
        str(wl), "--headless", "--set", "slo.target=0.5", "--set", "sim.models.fast.error_rate=1.0",
        "--set", "retry.max_attempts=1", "--set", "slo.ttft=\"2s\"", cwd=tmp_path,
    )  # fmt: skip
    assert errors.returncode == 1, errors.stderr  # half failed, the other half good: 0.5 met


def test_bad_slo_is_bad_input(tmp_path: Path) -> None:
    wl = fast_slow(tmp_path, 1.5, 0)
    out = oxc("validate", str(wl), cwd=tmp_path)
    assert out.returncode == 2
    assert "w.toml: slo.target: expected a number > 0 and <= 1" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_resume_judges_the_whole_journal(tmp_path: Path) -> None:
    """A run that missed its SLO, resumed with a looser one: the whole journal's goodput (each id's
    last record) decides the exit code, the manifest keeps the latest [slo], report agrees."""
    wl = fast_slow(tmp_path, 0.9, 1.0, {"retry.max_attempts": 1, "output.results": "out/r.jsonl"})
    first = oxc(str(wl), "--headless", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    again = oxc(
        str(wl), "--headless", "--resume", "--summary-json", "s.json",
        "--set", "sim.models.slow.error_rate=0", "--set", 'slo.ttft="2s"', cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    live = orjson.loads((tmp_path / "s.json").read_bytes())
    assert live["goodput"]["fraction"] == 1.0 and live["goodput"]["met"] is True
    assert live["requests"]["sessions"] == 2
    manifest = orjson.loads((tmp_path / "out/r.jsonl.meta.json").read_bytes())
    assert manifest["slo"] == {"ttft": 2.0, "itl": None, "latency": None, "target": 0.9}
    rebuilt = orjson.loads(oxc("report", "out/r.jsonl", "--json", cwd=tmp_path).stdout)
    assert rebuilt["goodput"] == live["goodput"]


def test_exit_code_precedence() -> None:
    """2 is decided before a run; then 4, 130, 3, 1, 0."""
    from oxconsole.engine.outcome import RunOutcome

    missed = {"goodput": {"met": False}}

    def code(summary: dict[str, Any], **kw: Any) -> int:
        return RunOutcome(summary=summary, ok=5, error=kw.pop("error", 0), interrupted=False, **kw).exit_code

    assert code(missed) == 3
    assert code(missed, error=2) == 3
    assert code({"goodput": {"met": True}}, error=2) == 1
    assert code({"goodput": {"met": None}}) == 0
    assert code(missed, journal_failure="disk full") == 4
    stopped = RunOutcome(summary=missed, ok=5, error=0, interrupted=True, not_sent=3)
    assert stopped.exit_code == 130


def test_phases_each_have_goodput() -> None:
    """A change starts a phase; each phase's goodput counts its own requests over its own span."""
    from oxconsole.metrics.collector import Collector

    now = [0.0]
    col = Collector(["m"], started_at=1.0, clock=lambda: now[0], slo_target=0.75)
    for i in range(8):
        now[0] = i * 0.5
        if i == 4:
            col.change(2.0, "concurrency", 8, 16)
        r = rec(ttft=100.0 if i < 4 else (600.0 if i % 2 else 100.0))
        r.slo_ok = SloConfig(ttft=0.5).good(r)
        col.record(r)
    s = col.summary("p", 4.0)
    first, second = (p["goodput"] for p in s["phases"])
    assert first == {"requests_per_s": 2.0, "fraction": 1.0, "target": 0.75, "met": True}
    assert second == {"requests_per_s": 1.0, "fraction": 0.5, "target": 0.75, "met": False}
    assert s["goodput"] == {"requests_per_s": 1.5, "fraction": 0.75, "target": 0.75, "met": True}
    assert s["models"]["m"]["goodput"]["fraction"] == 0.75


@pytest.mark.asyncio
@pytest.mark.slow
async def test_workers_mark_every_record(tmp_path: Path) -> None:
    from oxconsole.engine.runner import make_engine

    w = load_file(fast_slow(tmp_path, 0.4, 0, {"run.workers": 2}))
    e = make_engine(w, results_path=w.results_path(), total_expected=12)
    out = await e.run()
    recs = journal(w)
    assert len(recs) == 12
    assert [r["slo_ok"] for r in recs] == [r["model"] == "fast" for r in recs]
    assert out.summary["goodput"]["fraction"] == 0.5 and out.exit_code == 0


def test_validate_describes_the_slo(tmp_path: Path) -> None:
    from oxconsole.workload import check_prompts, describe

    w = slo_workload(tmp_path, {"run.stream": False, "slo": {"ttft": "500ms", "latency": 20, "target": 0.99}})
    text = describe(w, check_prompts(w))
    assert "a request is good when ok and ttft <= 500ms, latency <= 20s" in text
    assert "target: 99% of finished requests good, else the run exits 3" in text
    assert "slo.ttft with run.stream = false" in text
    assert "slo" not in describe(slo_workload(tmp_path), check_prompts(slo_workload(tmp_path)))
