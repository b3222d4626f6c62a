"""`oxconsole sweep` end to end over real HTTP against the embedded simulator: points and the knee,
the JSON, `point` on every record, unique ids, `--over` a `--set` path, bad `--over`, `--resume`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oxconsole.cli.main import main
from tests.support.sweep import records, write


def sweep(folder: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.chdir(folder)
    return main(["sweep", str(folder / "w.toml"), *args])


@pytest.mark.slow
def test_points_and_the_knee_on_a_simulator_with_known_capacity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, capacity=4, ttft="100ms")  # 40 requests/s at C: the machine's CPU is not the knee
    args = ("--over", "concurrency=1,2,4,8", "--point-duration", "1s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 0
    out, err = capsys.readouterr()
    data = json.loads((tmp_path / "s.json").read_text())
    assert set(data) == {"over", "points", "knee"}
    assert data["over"] == "concurrency"
    assert [p["value"] for p in data["points"]] == [1, 2, 4, 8]
    for p in data["points"]:
        assert set(p) == {"value", "slo_met", "summary"}
        assert p["slo_met"] is None  # no [slo]
        assert {"requests", "throughput", "latency_ms", "ttft_ms"} <= set(p["summary"])
    assert data["knee"] == {"index": 2, "value": 4}
    rps = [p["summary"]["throughput"]["requests_per_s"] for p in data["points"]]
    assert (
        rps[1] > 1.6 * rps[0] and rps[2] > 1.6 * rps[1] and rps[3] < 1.4 * rps[2]
    )  # past C: queueing, not throughput
    assert "knee: point #2, concurrency=4" in out  # numbered from 0, as the JSON and the journal
    assert "point #0, 1 of 4 (concurrency=1), ETA" in err and "point #3, 4 of 4" in err
    recs = records(tmp_path)
    assert all("point" in r for r in recs), [r for r in recs if "point" not in r][:5]
    assert {r["point"] for r in recs} == {0, 1, 2, 3}
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids))
    assert all(r["id"].endswith(f"@{r['point']}") for r in recs), [
        r for r in recs if not r["id"].endswith(f"@{r['point']}")
    ][:5]
    per_point = [sum(1 for r in recs if r["point"] == i) for i in range(4)]
    assert per_point == [p["summary"]["requests"]["total"] for p in data["points"]]


@pytest.mark.slow
def test_over_a_set_path_runs_one_point_per_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    args = (
        "--over",
        "prompts.synthetic.output_tokens=2,6",
        "--point-duration",
        "0.5s",
        "--summary-json",
        "-",
    )
    assert sweep(tmp_path, *args, "--set", "run.concurrency=2", monkeypatch=monkeypatch) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)  # the JSON alone on stdout; the table on stderr
    assert "sweep over prompts.synthetic.output_tokens: 2 point(s)" in err
    assert data["over"] == "prompts.synthetic.output_tokens"
    assert [p["value"] for p in data["points"]] == [2, 6]
    recs = records(tmp_path)
    assert {r["output_tokens"] for r in recs if r["point"] == 0} == {2}
    assert {r["output_tokens"] for r in recs if r["point"] == 1} == {6}


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ("nope.key=1,2", "--over nope.key=1: "),
        ("concurrency=1,zero", "run.concurrency: expected an integer >= 1"),
        ("concurrency=1,,2", "empty value at position 2"),
        ("rate=auto", "auto only for concurrency"),
        ("concurrency", "expected KEY=V1,V2"),
    ],
)
def test_bad_over_exits_2_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    over: str,
    expected: str,
) -> None:
    write(tmp_path)
    assert sweep(tmp_path, "--over", over, monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_every_bad_value_and_a_bad_duration_are_told_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    assert sweep(tmp_path, "--over", "concurrency=0,2,-1", monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert "--over concurrency=0:" in err and "--over concurrency=-1:" in err
    assert sweep(tmp_path, "--over", "bad", "--point-duration", "soon", monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert "--over bad" in err and "--point-duration: expected a duration > 0" in err


@pytest.mark.slow
def test_resume_after_a_stop_midway_runs_only_the_points_not_ended(tmp_path: Path) -> None:
    write(tmp_path, capacity=8)
    cmd = [sys.executable, "-m", "oxconsole", "sweep", "w.toml", "--over", "concurrency=1,2,3"]
    cmd += ["--point-duration", "1.5s", "--summary-json", "s.json"]
    p = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = tmp_path / "out" / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:  # stop during the second point
        if results.exists() and b'"point":1' in results.read_bytes():
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "sweep stopped; continue with:" in err and "--resume" in err
    before = records(tmp_path)
    assert {r["point"] for r in before} == {0, 1}
    first = subprocess.run([*cmd, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "1 point(s) already ended" in first.stderr
    assert "point #0," not in first.stderr and "point #1, 2 of 3" in first.stderr
    after = records(tmp_path)
    assert after[: len(before)] == before
    new = after[len(before) :]
    assert {r["point"] for r in new} == {1, 2}  # point 0 ended before the stop: not run again
    assert all(r["id"].endswith("@1.2") for r in new if r["point"] == 1), [
        r for r in new if r["point"] == 1 if not r["id"].endswith("@1.2")
    ][:5]
    ids = [r["id"] for r in after]
    assert len(ids) == len(set(ids))
    data = json.loads((tmp_path / "s.json").read_text())
    assert [p["value"] for p in data["points"]] == [1, 2, 3]
    assert data["knee"] == {"index": 2, "value": 3}


@pytest.mark.slow
def test_a_point_whose_last_requests_outlast_the_grace_ends_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each answer takes 0.7 s, a point 1 s and its grace 0.1 s: the second wave, in flight at
    each point's end, is cancelled as at the end of any run, and the point has ended (once)."""
    write(tmp_path, ttft="700ms", sets={"run.grace": "100ms"})
    args = ("--over", "concurrency=1,2", "--point-duration", "1s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 0
    _, err = capsys.readouterr()
    assert err.count("point #0, 1 of 2") == 1 and err.count("point #1, 2 of 2") == 1, err
    assert "point #0: 1 request(s) still in flight" in err and "point #1: 2 request(s)" in err, err
    data = json.loads((tmp_path / "s.json").read_text())
    counts = [(p["summary"]["requests"]["ok"], p["summary"]["requests"]["cancelled"]) for p in data["points"]]
    assert counts == [(1, 1), (2, 2)], counts
    recs = records(tmp_path)
    ended = sorted((r["point"], r["status"], r.get("error")) for r in recs)
    assert ended == [
        (0, "error", "cancelled"),
        (0, "ok", None),
        (1, "error", "cancelled"),
        (1, "error", "cancelled"),
        (1, "ok", None),
        (1, "ok", None),
    ], recs
    # a cancelled request says when it was sent (0.7 s in, after the first wave), not when the
    # grace cut it (1.1 s in)
    first = {p: min(r["t_sent"] for r in recs if r["point"] == p) for p in (0, 1)}
    late = [r["t_sent"] - first[r["point"]] for r in recs if r["status"] == "error"]
    assert all(0.5 < x < 1.05 for x in late), late


def test_resume_of_another_sweep_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    meta = tmp_path / "out" / "results.jsonl.meta.json"
    meta.parent.mkdir()
    (tmp_path / "out" / "results.jsonl").write_text("")
    meta.write_text(
        json.dumps({"sweep": {"spec": "concurrency=1,2", "point_duration": 30.0, "overrides": []}})
    )
    assert sweep(tmp_path, "--over", "concurrency=1,4", "--resume", monkeypatch=monkeypatch) == 2
    assert "expected the same sweep, but its spec was 'concurrency=1,2'" in capsys.readouterr().err


@pytest.mark.slow
def test_auto_searches_for_the_knee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 150 ms a request: 40 requests/s at C = 6, so a loaded machine's CPU is not the knee instead
    # (at 60 ms, beside a CPU hog and three other tests, C = 6 gave 73% of its throughput)
    write(tmp_path, capacity=6, ttft="150ms")
    args = ("--over", "concurrency=auto", "--point-duration", "1s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    values = [p["value"] for p in data["points"]]
    assert values[:4] == [1, 2, 4, 8]
    assert len(values) == len(set(values))
    assert abs(data["knee"]["value"] - 6) <= 1, values  # short points on a loaded machine: +-1
    assert "searching for the knee" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("over", "opened"),
    [("rate=10,20", 1), ("sim.models.m.capacity=2,3", 2)],
)
def test_points_share_the_first_points_warm_clients_unless_their_servers_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: str, opened: int
) -> None:
    import asyncio

    from oxconsole.sweep.plan import SweepState, check_points, parse_over
    from oxconsole.sweep.run import Sweep

    path = str(write(tmp_path))
    monkeypatch.chdir(tmp_path)
    o = parse_over(over)
    plans = check_points(path, o, [], 0.4)
    state = SweepState(o.spec(), 0.4, [])
    said: list[str] = []
    s = Sweep(
        path,
        o,
        plans,
        state,
        results=tmp_path / "r.jsonl",
        base_overrides=[],
        progress_interval=5,
        say=said.append,
    )
    end = asyncio.run(s.run())
    assert s.clients_opened == opened
    assert [p["value"] for p in end.points.values()] == [o for o in map(int, over.split("=")[1].split(","))]
    assert all(p["summary"]["requests"]["error"] == 0 for p in end.points.values()), [
        p for p in end.points.values() if p["summary"]["requests"]["error"] != 0
    ][:5]
    if o.key == "rate":
        assert [p["load"]["rate"] for p in end.points.values()] == [10.0, 20.0]


@pytest.mark.slow
def test_with_slo_the_knee_is_the_highest_goodput_with_the_slo_met(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 300 ms served at once, 600 ms when waiting: 150 ms either side of the SLO, for a loaded machine
    write(tmp_path, capacity=4, ttft="300ms", sets={"slo": {"latency": "450ms", "target": 0.9}})
    args = ("--over", "concurrency=2,4,8", "--point-duration", "2s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    assert [p["slo_met"] for p in data["points"]] == [True, True, False]  # 8 on 4 slots: half wait
    assert data["knee"] == {"index": 1, "value": 4}
    good = data["points"][1]["summary"]["goodput"]
    assert set(good) >= {"requests_per_s", "fraction", "target", "met"}
    out = capsys.readouterr().out
    assert "the highest goodput with the SLO met" in out
    assert all(isinstance(r.get("slo_ok"), bool) for r in records(tmp_path)), [
        r for r in records(tmp_path) if not isinstance(r.get("slo_ok"), bool)
    ][:5]


@pytest.mark.slow
def test_with_slo_a_modest_gain_that_meets_it_is_the_knee(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A simulator that slows as its batch grows (load curve knee 2, power 1: each request
    ttft x (1 + b/2)), as a CPU engine does: 750 ms at 1 in flight, 1 s at 2, 1.5 s at 4, 2.5 s at 8,
    goodput rising +33-50% a doubling up to 4. The SLO (2 s, 500 ms either side of 4 and 8) is met
    at 1, 2 and 4: the knee is 4, the highest goodput with the SLO met."""
    path = write(tmp_path, capacity=64, ttft="500ms")
    text = path.read_text().replace("[sim.models.m]", "[sim.models.m]\nknee = 2\nknee_power = 1")
    path.write_text(text + '\n[slo]\nlatency = "2s"\ntarget = 0.9\n')
    args = ("--over", "concurrency=1,2,4,8", "--point-duration", "5s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 0
    data = json.loads((tmp_path / "s.json").read_text())
    shown = [(p["value"], p["slo_met"], p["summary"]["goodput"]["requests_per_s"]) for p in data["points"]]
    assert [m for _, m, _ in shown] == [True, True, True, False], shown
    assert data["knee"] == {"index": 2, "value": 4}, shown


@pytest.mark.slow
def test_no_point_meeting_the_slo_is_no_knee_and_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, capacity=4, ttft="60ms", sets={"slo": {"latency": "10ms", "target": 0.9}})
    args = ("--over", "concurrency=1,2", "--point-duration", "0.5s", "--summary-json", "s.json")
    assert sweep(tmp_path, *args, monkeypatch=monkeypatch) == 3
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["knee"] is None
    assert [p["slo_met"] for p in data["points"]] == [False, False]
    assert "knee: none (no point met the SLO)" in capsys.readouterr().out
