"""Traces as prompt sources over real HTTP: Mooncake, Azure and BurstGPT rows sent at their
offsets (absolute schedule, `run.trace_speed`), their lengths, shared prefixes, resume, bad rows."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.manifest import read_manifest
from oxconsole.journal.sessions import sessions_of
from oxconsole.sim.prefix import PrefixCache
from oxconsole.workload import WorkloadError, check_prompts
from oxconsole.workload import load_workload as load_file
from oxconsole.workload.prompts.sources import records
from tests.support import journal, oxconsole, run
from tests.support.workloads import Sets, load_workload, write_workload


def trace(file: str, fmt: str, speed: float = 1.0) -> Sets:
    """tests/workloads/sim_m.toml as a trace's run: the rows of `file` (format `fmt`) replayed at
    `speed`, up to 50 in flight, each answered 5 ms after admission."""
    return {
        "name": "trace",
        "run": {"concurrency": 50, "trace_speed": speed},
        "prompts": {"file": file, "format": fmt},
        "sim.models.m.ttft": "5ms",
    }


def write(tmp_path: Path, sets: Sets) -> None:
    """`sets` on sim_m.toml as tmp_path/w.toml, the journal where the product puts it."""
    write_workload("sim_m", tmp_path, {**sets, "output.results": None}, file="w.toml")


OFFSETS = [0.0, 0.1, 0.25, 0.3, 0.6]
LENGTHS = [(40, 3), (80, 5), (12, 1), (700, 2), (9, 4)]


def mooncake(path: Path, ids: list[list[int]] | None = None) -> None:
    lines = []
    for i, (t, (n_in, n_out)) in enumerate(zip(OFFSETS, LENGTHS, strict=True)):
        hid = ids[i] if ids else [i]
        lines.append(
            f'{{"timestamp": {1000 + t * 1000:.0f}, "input_length": {n_in}, "output_length": {n_out}, '
            f'"hash_ids": {hid}}}'
        )
    path.write_text("\n".join(lines) + "\n")


def azure(path: Path) -> None:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for t, (n_in, n_out) in zip(OFFSETS, LENGTHS, strict=True):
        ms = int(t * 1000)
        rows.append(f"2023-11-16 18:15:{46 + ms // 1000:02d}.{ms % 1000:03d}0000,{n_in},{n_out}")
    path.write_text("\n".join(rows) + "\n")


def burstgpt(path: Path) -> None:
    rows = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for t, (n_in, n_out) in zip(OFFSETS, LENGTHS, strict=True):
        rows.append(f"{5 + t},ChatGPT,{n_in},{n_out},{n_in + n_out},Conversation log")
    path.write_text("\n".join(rows) + "\n")


WRITERS = {
    "mooncake": (mooncake, "t.jsonl"),
    "azure-trace": (azure, "t.csv"),
    "burstgpt": (burstgpt, "b.csv"),
}


def offsets(recs: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Each record's `key` time (`t_sent`, `t_scheduled`) from the trace's start: the first row's
    due time, the earliest `t_scheduled` (a fresh run's first row is due at its start). Measured
    from the first row's send instead, a first row sent late makes every later row look early by
    as much (row 2 "sent 34 ms early", when it was sent on time and row 1 34 ms late)."""
    t0 = min(r["t_scheduled"] for r in recs)
    return {r["id"]: r[key] - t0 for r in recs}


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", list(WRITERS))
async def test_each_row_is_sent_at_its_offset_with_its_lengths(fmt: str, tmp_path: Path) -> None:
    write, name = WRITERS[fmt]
    write(tmp_path / name)
    w = load_workload("sim_m", tmp_path, trace(name, fmt, speed=2.0))
    assert check_prompts(w).total_requests == len(OFFSETS)
    out = await run(w)
    assert out.exit_code == 0, out.summary["errors"]
    recs = journal(w)
    got, scheduled = offsets(recs, "t_sent"), offsets(recs, "t_scheduled")
    for i, t in enumerate(OFFSETS):
        rid = f"row-{i + 1}"
        due = t / 2.0
        assert abs(scheduled[rid] - due) < 1e-3, f"{fmt}: {rid} due at {scheduled[rid]:.4f}s, not {due:.3f}s"
        assert abs(got[rid] - due) < 0.03, f"{fmt}: {rid} sent at {got[rid]:.3f}s, due {due:.3f}s: {got}"
    by_id = {r["id"]: r for r in recs}
    for i, (n_in, n_out) in enumerate(LENGTHS):
        r = by_id[f"row-{i + 1}"]
        assert (r["input_tokens"], r["output_tokens"]) == (n_in, n_out), (fmt, r)
    assert out.summary["schedule_lag_ms"]["p99"] < 30.0, out.summary["schedule_lag_ms"]


def test_hash_ids_make_shared_prefixes_a_prefix_cache_finds(
    tmp_path: Path,
) -> None:
    mooncake(tmp_path / "t.jsonl", ids=[[1, 2], [1, 2], [1, 3], [1, 2, 5], [9]])
    w = load_workload("sim_m", tmp_path, trace("t.jsonl", "mooncake"))
    prompts = [p for _, p in records(w, "t.jsonl") if p is not None]
    cache = PrefixCache(16)
    cached = [cache.serve(p.messages[0]["content"])[0] for p in prompts]
    # row 2 (80 tokens of block 1) finds row 1's 40 in whole 16-token blocks: 32; row 3 has 12
    # tokens (no whole block); row 4 starts with block 1, of which 80 tokens were served; row 5 is new
    assert cached == [0, 32, 0, 80, 0], cached
    assert [len(p.messages[0]["content"]) for p in prompts] == [4 * n for n, _ in LENGTHS]


@pytest.mark.parametrize(
    ("fmt", "text", "where"),
    [
        (
            "mooncake",
            '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1}\n',
            "line 2: input_length",
        ),
        ("mooncake", '{"timestamp": "x", "input_length": 5, "output_length": 1}\n', "line 1: timestamp"),
        ("azure-trace", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,1\n", "line 2: TIMESTAMP"),
        ("azure-trace", "when,ContextTokens\n1,2\n", "line 1"),
        ("burstgpt", "Timestamp,Request tokens,Response tokens\n1,-4,2\n", "line 2: Request tokens"),
    ],
)
def test_a_bad_row_names_file_line_and_expectation(tmp_path: Path, fmt: str, text: str, where: str) -> None:
    (tmp_path / "t.txt").write_text(text)
    write(tmp_path, trace("t.txt", fmt))
    with pytest.raises(WorkloadError) as e:
        check_prompts(load_file(tmp_path / "w.toml"))
    assert f"t.txt: {where}: expected" in str(e.value), str(e.value)
    res = oxconsole("validate", str(tmp_path / "w.toml"), cwd=tmp_path)
    assert res.returncode == 2 and where in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_trace_speed_must_be_positive(tmp_path: Path) -> None:
    mooncake(tmp_path / "t.jsonl")
    write(tmp_path, trace("t.jsonl", "mooncake", speed=0))
    with pytest.raises(WorkloadError, match=r"run.trace_speed: expected a number > 0"):
        load_file(tmp_path / "w.toml")


def test_resume_sends_the_missing_rows_keeping_their_gaps(tmp_path: Path) -> None:
    rows = [(0.0, 1), (0.1, 1), (0.2, 1), (3.0, 1), (3.2, 1), (3.5, 1)]
    (tmp_path / "t.jsonl").write_text(
        "".join(
            f'{{"timestamp": {t * 1000:.0f}, "input_length": 8, "output_length": {n}}}\n' for t, n in rows
        )
    )
    write(tmp_path, trace("t.jsonl", "mooncake"))
    first = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "w.toml", "--headless"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = tmp_path / "runs" / "trace" / "results.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        not results.exists() or len(results.read_bytes().splitlines()) < 3
    ):
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)  # stopped between row 3 and row 4 (due 2.8 s later)
    _, err = first.communicate(timeout=30)
    assert first.returncode == 130, err
    done = {r["id"] for r in map(orjson.loads, results.read_bytes().splitlines())}
    assert done == {"row-1", "row-2", "row-3"}, done
    again = oxconsole("w.toml", "--headless", "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    recs = [orjson.loads(x) for x in results.read_bytes().splitlines()]
    later = {r["id"]: r["t_sent"] for r in recs if r["id"] not in done}
    assert sorted(later) == ["row-4", "row-5", "row-6"], later
    # the first missing row is due at once, the others keep their gaps (0.2 s, then 0.3 s)
    start = sessions_of(read_manifest(results))[-1].started_at
    assert later["row-4"] - start < 0.5, f"row 4 sent {later['row-4'] - start:.3f}s into the session"
    gaps = (later["row-5"] - later["row-4"], later["row-6"] - later["row-5"])
    assert abs(gaps[0] - 0.2) < 0.03 and abs(gaps[1] - 0.3) < 0.03, gaps


@pytest.mark.asyncio
async def test_constant_arrival_has_figures_from_due(tmp_path: Path) -> None:
    synthetic = {"count": 40, "input_tokens": 8, "output_tokens": 2}
    run_at_40 = {"concurrency": 2, "arrival": "constant", "rate": 40, "trace_speed": 1.0}
    sets = {"run": run_at_40, "prompts": {"synthetic": synthetic}, "sim.models.m.ttft": "100ms"}
    w = load_workload("sim_m", tmp_path, {**trace("x", "jsonl"), **sets})
    s = (await run(w)).summary
    # 2 in flight at 100 ms each serve 20/s: at 40/s due, the client falls behind its schedule
    lag, ttft, from_due = s["schedule_lag_ms"], s["ttft_ms"], s["ttft_from_due_ms"]
    assert lag["p99"] > 200.0 and s["schedule"]["behind"] and s["schedule"]["within_10ms"] < 0.5, s[
        "schedule"
    ]
    assert from_due["p50"] > ttft["p50"] + 100.0, (from_due, ttft)
    assert s["latency_from_due_ms"]["max"] >= s["latency_ms"]["max"], s["latency_from_due_ms"]
    four = {"prompts": {"synthetic": {"count": 4, "input_tokens": 8, "output_tokens": 2}}}
    closed = load_workload("sim_m", tmp_path, {**trace("x", "jsonl"), **four})
    assert "schedule_lag_ms" not in (await run(closed)).summary, "a closed loop has no due times"


def test_validate_says_the_trace_sets_the_schedule(tmp_path: Path) -> None:
    burstgpt(tmp_path / "b.csv")
    write(tmp_path, trace("b.csv", "burstgpt", speed=2.0))
    res = oxconsole("validate", "w.toml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "BurstGPT trace" in res.stdout and "arrival the trace's timestamps (x2)" in res.stdout, res.stdout
    assert "dispatch is unlimited" not in res.stdout, res.stdout


def test_two_workers_take_their_rows_due_from_the_one_start(tmp_path: Path) -> None:
    """With `run.workers = 2` every row is due at the coordinator's start plus its offset: GO
    carries that start, so the workers' schedules do not each begin at their own GO and set-up
    (exact: a row's `t_scheduled` is the start plus its offset / trace_speed)."""
    rows = [i * 0.02 for i in range(20)]
    (tmp_path / "t.jsonl").write_text(
        "".join(f'{{"timestamp": {t * 1000:.0f}, "input_length": 8, "output_length": 1}}\n' for t in rows)
    )
    write(tmp_path, {**trace("t.jsonl", "mooncake"), "run.workers": 2})
    done = oxconsole("w.toml", "--headless", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = tmp_path / "runs" / "trace" / "results.jsonl"
    recs = [orjson.loads(x) for x in results.read_bytes().splitlines()]
    assert len(recs) == len(rows), [r["id"] for r in recs]
    start = sessions_of(read_manifest(results))[-1].started_at
    starts = {r["id"]: r["t_scheduled"] - rows[int(r["id"].removeprefix("row-")) - 1] for r in recs}
    off = {k: round((v - start) * 1000, 3) for k, v in starts.items() if abs(v - start) > 1e-4}
    assert not off, f"rows due off the run's start by (ms): {off}"


FAR = (
    "mooncake",
    [
        '{"timestamp": 0, "input_length": 8, "output_length": 1}',
        '{"timestamp": 978307200000000000, "input_length": 8, "output_length": 1}',
    ],
    "timestamp",
)
FAR_CSV = (
    "burstgpt",
    [
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
        "5,ChatGPT,8,1,9,Conversation log",
        "1e15,ChatGPT,8,1,9,Conversation log",
    ],
    "Timestamp",
)


@pytest.mark.parametrize(("fmt", "rows", "key"), [FAR, FAR_CSV])
def test_a_row_due_millions_of_years_ahead_is_bad_input(
    tmp_path: Path, fmt: str, rows: list[str], key: str
) -> None:
    """A row whose timestamp puts it 31 million years after the first: `validate` and the run
    both exit 2 naming the file, the line and the key, before anything is sent (the run would
    idle for it, its ETA saying 2 s)."""
    (tmp_path / "t.trace").write_text("\n".join(rows) + "\n")
    write(tmp_path, trace("t.trace", fmt))
    line = len(rows)
    for args in (("validate", "w.toml"), ("w.toml", "--headless")):
        res = oxconsole(*args, cwd=tmp_path)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        said = f"t.trace: line {line}: {key}: expected a time at most a year after the first row's (line"
        assert said in res.stderr and "years after it" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr, res.stderr
