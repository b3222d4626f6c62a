"""`run.trials` / `--trials N`: the workload N times in a row into one journal; records carry
`trial` (and unique ids), the summary's `trials` holds each figure's mean, stddev, cv and 95%
t-interval over the trials, `report` rebuilds it from the journal, `--resume` continues the trial
that was cut and then the rest, and `report A B` says whether two runs' intervals overlap."""

from __future__ import annotations

import math
import signal
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support import oxconsole_here, read_jsonl, wait_until
from tests.support.metrics import exact
from tests.support.report import sim_workload

pytestmark = pytest.mark.slow

T975 = {2: 4.302652729911275, 3: 3.182446305284263}
"""Student's t at 97.5% for 2 and 3 degrees of freedom, from a printed table."""


def _summary(folder: Path, name: str = "s.json") -> dict[str, Any]:
    data = orjson.loads((folder / name).read_bytes())
    assert isinstance(data, dict)
    return data


def _by_trial(records: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r["trial"]].append(r)
    return out


def test_three_trials_one_journal_and_their_spread(tmp_path: Path) -> None:
    folder = tmp_path / "three"
    wl = sim_workload(folder, count=150, concurrency=8, ttft="15ms")
    r = oxconsole_here(
        str(wl), "--headless", "--trials", "3", "--summary-json", str(folder / "s.json"), cwd=folder
    )
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if "trial" in line][:3] == [
        f"oxconsole: trial {k} of 3" for k in (1, 2, 3)
    ], r.stderr
    records = read_jsonl(folder / "results.jsonl")
    trials = _by_trial(records)
    assert sorted(trials) == [1, 2, 3] and all(len(v) == 150 for v in trials.values()), Counter(
        x["trial"] for x in records
    )
    assert len({x["id"] for x in records}) == 450, "ids must be unique across trials"
    assert all(x["id"].endswith(f"@trial{x['trial']}") for x in records), records[0]["id"]
    bases = [{x["id"].rsplit("@", 1)[0] for x in trials[k]} for k in (1, 2, 3)]
    assert bases[0] == bases[1] == bases[2], "the same prompts each trial"

    s = _summary(folder)
    block = s["trials"]
    assert block["n"] == 3, block
    manifest = orjson.loads((folder / "results.jsonl.meta.json").read_bytes())
    assert manifest["trials"] == {"n": 3, "done": [1, 2, 3]}, manifest["trials"]
    sessions = [x["running_s"] for x in manifest["sessions"]]
    assert len(sessions) == 3, sessions
    # each trial's figures computed here from its records, then the block's statistics over them
    per_trial = {
        "throughput.requests_per_s": [len(trials[k]) / sessions[k - 1] for k in (1, 2, 3)],
        "ttft_ms.p50": [exact(sorted(x["ttft_ms"] for x in trials[k]), 50) for k in (1, 2, 3)],
        "latency_ms.p99": [exact(sorted(x["latency_ms"] for x in trials[k]), 99) for k in (1, 2, 3)],
    }
    for key, values in per_trial.items():
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        got = block[key]
        rel = 0.003  # the histogram's percentiles (0.1%) and the summary's 3 decimals
        assert math.isclose(got["mean"], mean, rel_tol=rel), (key, got, values)
        half = T975[2] * sd / math.sqrt(3)
        lo, hi = got["ci"]
        # each trial's figure may be off by `rel` of the mean (the histogram), so the spread of
        # three close values (p99 50.6, 51.2, 50.8 ms once) by up to that much: the interval by t
        # times it, the cv by `rel` itself
        width_tol = 2 * T975[2] * rel * mean / math.sqrt(3)
        assert math.isclose(hi - lo, 2 * half, rel_tol=0.05, abs_tol=width_tol), (key, got, values)
        assert math.isclose(got["cv"], sd / mean, rel_tol=0.05, abs_tol=rel), (key, got, values)
    assert "trials: 3 runs" in r.stdout and "95% interval" in r.stdout, r.stdout

    rep = oxconsole_here("report", str(folder / "results.jsonl"), "--json", cwd=folder)
    assert orjson.loads(rep.stdout)["trials"] == block, (rep.stdout[-800:], block)
    html = folder / "r.html"
    oxconsole_here("report", str(folder / "results.jsonl"), "--html", str(html), cwd=folder)
    page = html.read_text()
    assert "3 trials" in page and "95% t-interval" in page, page[:400]


def test_a_stopped_trial_resumes_then_the_rest(tmp_path: Path) -> None:
    folder = tmp_path / "cut"
    wl = sim_workload(folder, count=400, concurrency=4, ttft="20ms")
    journal = folder / "results.jsonl"
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--trials", "3",
         "--summary-json", str(folder / "s.json")],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_until(lambda: journal.exists() and b'"trial":2' in journal.read_bytes(), 90, "trial 2's records")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "--resume" in err and "run.trials=3" in err, err
    cut = _by_trial(read_jsonl(journal))
    assert len(cut[1]) == 400 and 0 < len(cut[2]) < 400 and 3 not in cut, {k: len(v) for k, v in cut.items()}
    assert orjson.loads((folder / "results.jsonl.meta.json").read_bytes())["trials"]["done"] == [1]

    r = oxconsole_here(
        str(wl),
        "--headless",
        "--trials",
        "3",
        "--resume",
        "--summary-json",
        str(folder / "s2.json"),
        cwd=folder,
    )
    assert r.returncode == 0, r.stderr
    assert "trial 2 of 3 (resumed)" in r.stderr and "trial 3 of 3" in r.stderr, r.stderr
    assert "trial 1 of 3" not in r.stderr, r.stderr
    done = _by_trial(read_jsonl(journal))
    for k in (1, 2, 3):
        ok = [x["id"] for x in done[k] if x["status"] == "ok"]
        assert len(ok) == 400 and len(set(ok)) == 400, (k, len(ok), len(set(ok)))
    s = _summary(folder, "s2.json")
    assert s["trials"]["n"] == 3 and s["requests"]["ok"] == 1200, (s["trials"], s["requests"])


def test_resume_must_keep_trials(tmp_path: Path) -> None:
    folder = tmp_path / "keep"
    wl = sim_workload(folder, count=30, concurrency=4, ttft="5ms")
    assert oxconsole_here(str(wl), "--headless", "--trials", "2", cwd=folder).returncode == 0
    r = oxconsole_here(str(wl), "--headless", "--resume", cwd=folder)
    assert (
        r.returncode == 2 and "expected a run of one trial, but the journal holds trials of 2" in r.stderr
    ), r.stderr
    plain = tmp_path / "plain"
    wl2 = sim_workload(plain, count=30, concurrency=4, ttft="5ms")
    assert oxconsole_here(str(wl2), "--headless", cwd=plain).returncode == 0
    r = oxconsole_here(str(wl2), "--headless", "--trials", "2", "--resume", cwd=plain)
    assert r.returncode == 2 and "expected a journal of trials" in r.stderr, r.stderr


def test_compare_says_whether_trials_differ(tmp_path: Path) -> None:
    """A server twice as slow to its first token: its TTFT intervals are apart, said in words."""
    runs = {}
    for name, ttft in (("fast", "10ms"), ("slow", "40ms")):
        folder = tmp_path / name
        wl = sim_workload(folder, count=120, concurrency=4, ttft=ttft)
        assert oxconsole_here(str(wl), "--headless", "--trials", "3", cwd=folder).returncode == 0
        runs[name] = str(folder / "results.jsonl")
    r = oxconsole_here("report", runs["fast"], runs["slow"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "TTFT p50 ms: slow/results.jsonl is higher than fast/results.jsonl" in r.stdout, r.stdout
    assert "beyond the noise (intervals apart" in r.stdout, r.stdout
    same = oxconsole_here("report", runs["fast"], runs["fast"], "--json", cwd=tmp_path)
    said = orjson.loads(same.stdout)["trials"]
    assert said and all("the intervals overlap" in t and "no difference shown at 95%" in t for t in said), (
        said
    )


def test_trials_with_worker_processes(tmp_path: Path) -> None:
    folder = tmp_path / "workers"
    wl = sim_workload(folder, count=80, concurrency=8, ttft="5ms")
    r = oxconsole_here(str(wl), "--headless", "--trials", "2", "--set", "run.workers=2", cwd=folder)
    assert r.returncode == 0, r.stderr
    records = read_jsonl(folder / "results.jsonl")
    assert Counter(x["trial"] for x in records) == {1: 80, 2: 80}, Counter(x.get("trial") for x in records)
    assert len({x["id"] for x in records}) == 160


async def test_a_stop_before_the_first_trial_sends_nothing(tmp_path: Path) -> None:
    """A signal while the trials are starting stops them as it stops a run that is starting."""
    from oxconsole.cli.headless import runner_for
    from oxconsole.cli.prepare import prepare_run

    wl = sim_workload(tmp_path / "early", count=50, concurrency=4, ttft="5ms")
    prep = prepare_run(str(wl), ["run.trials=3"], None, False)
    trials = runner_for(prep, 100.0)
    assert trials.state == "starting", trials.state
    trials.request_stop(interrupted=True)
    out = await trials.run()
    assert out.interrupted and out.exit_code == 130, (out.interrupted, out.not_sent)
    journal = tmp_path / "early" / "results.jsonl"
    assert not journal.exists() or not read_jsonl(journal), read_jsonl(journal)[:3]
