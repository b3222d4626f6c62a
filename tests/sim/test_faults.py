"""Every simulator fault, end to end: the engine over loopback against the embedded simulator.

Each fault runs at rate 1.0 with retries limited, and the journal must carry the right error class
with a non-empty detail on every record; then all faults together at 0.2 each, where retries must
bring most requests home, every id must be journaled exactly once and backoff must stay out of
latency. Failures per model are kept below the engine's cool-down threshold (5 in a row) except in
the mixed test, where everything is dispatched before a cool-down could matter.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oxconsole.workload import Workload, check_prompts
from tests.support import engine_for, journal, oxconsole_here, run
from tests.support.workloads import Sets, load_workload, write_workload


def fault_workload(
    tmp_path: Path,
    fault: Sets,
    *,
    stream: bool = True,
    max_attempts: int = 2,
    count: int = 2,
    sets: Sets | None = None,
) -> Workload:
    """One model `m`, `count` prompts all in flight at once, `fault` keys in its simulator profile
    (tests/workloads/sim_faults.toml), then `sets`."""
    return load_workload(
        "sim_faults",
        tmp_path,
        {
            "run.concurrency": count,
            "run.stream": stream,
            "prompts.synthetic.count": count,
            "retry.max_attempts": max_attempts,
            **{f"sim.models.m.{key}": value for key, value in fault.items()},
            **(sets or {}),
        },
    )


async def assert_all_fail_with(w: Workload, cls: str, attempts: int) -> list[dict[str, Any]]:
    out = await run(w)
    recs = journal(w)
    assert len(recs) == len({r["id"] for r in recs}) == check_prompts(w).total_requests
    for r in recs:
        assert r["status"] == "error", r
        assert r["error"] == cls, r
        assert r["error_detail"].strip(), r
        assert r["attempts"] == attempts, r
        if attempts > 1:
            assert r["attempt_errors"] == {cls: attempts - 1}, r
    assert out.exit_code == 1
    assert out.summary["errors"] == {cls: len(recs)}
    if attempts > 1:
        assert out.summary["attempt_errors"] == {cls: len(recs) * (attempts - 1)}
    return recs


async def test_reset_is_connection(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"reset_rate": 1.0}, sets={"run.timeout": "10s"})
    recs = await assert_all_fail_with(w, "connection", 2)
    # a reset is seen at once, not after the 10 s timeout: the retry left long before that
    assert all(r["t_sent"] - r["t_scheduled"] < 5.0 for r in recs), [
        r for r in recs if not (r["t_sent"] - r["t_scheduled"] < 5.0)
    ][:5]


async def test_reset_fails_fast_and_is_retried(tmp_path: Path) -> None:
    """Whatever its class, a reset must be retried and must not wait for the timeout."""
    w = fault_workload(tmp_path, {"reset_rate": 1.0}, max_attempts=2, sets={"run.timeout": "20s"})
    out = await run(w)
    recs = journal(w)
    assert len(recs) == 2
    assert all(r["status"] == "error" and r["attempts"] == 2 and r["error_detail"] for r in recs), [
        r for r in recs if not (r["status"] == "error" and r["attempts"] == 2 and r["error_detail"])
    ][:5]
    assert out.summary["duration_s"] < 5.0  # two attempts each, neither waited 20 s


async def test_stream_abort_is_stream_aborted(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"abort_rate": 1.0})
    recs = await assert_all_fail_with(w, "stream_aborted", 2)
    assert all(r["output_tokens"] < 8 for r in recs), [r for r in recs if not (r["output_tokens"] < 8)][
        :5
    ]  # it stopped mid-way


async def test_non_streaming_abort_is_stream_aborted(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"abort_rate": 1.0}, stream=False)
    await assert_all_fail_with(w, "stream_aborted", 2)


async def test_malformed_chunk_is_bad_response(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"malformed_rate": 1.0})
    recs = await assert_all_fail_with(w, "bad_response", 2)
    assert all("malformed" in r["error_detail"] for r in recs), [
        r for r in recs if "malformed" not in r["error_detail"]
    ][:5]


async def test_malformed_json_body_is_bad_response(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"malformed_rate": 1.0}, stream=False)
    recs = await assert_all_fail_with(w, "bad_response", 2)
    assert all("JSON" in r["error_detail"] for r in recs), [
        r for r in recs if "JSON" not in r["error_detail"]
    ][:5]


async def test_stall_longer_than_timeout_is_timeout(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"stall_rate": 1.0, "stall": "20s"})
    out = await run(w)
    recs = journal(w)
    assert {r["error"] for r in recs} == {"timeout"}
    assert all(r["attempts"] == 2 and r["error_detail"] and r["latency_ms"] is None for r in recs), [
        r for r in recs if not (r["attempts"] == 2 and r["error_detail"] and (r["latency_ms"] is None))
    ][:5]
    # two attempts of 0.3 s each, not the 20 s stall (the room above is for a busy machine)
    assert out.summary["duration_s"] < 5.0


async def test_server_error_is_http_500(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"error_rate": 1.0})
    recs = await assert_all_fail_with(w, "http_500", 2)
    assert all("500" in r["error_detail"] for r in recs), [r for r in recs if "500" not in r["error_detail"]][
        :5
    ]


async def test_throttle_is_http_429_after_max_attempts_honouring_retry_after(
    tmp_path: Path,
) -> None:
    w = fault_workload(tmp_path, {"throttle_rate": 1.0, "retry_after": "200ms"}, max_attempts=3, count=1)
    recs = await assert_all_fail_with(w, "http_429", 3)
    (r,) = recs
    assert r["backoff_ms"] >= (r["attempts"] - 1) * 200
    # the final attempt left at least two Retry-After waits after the request was due
    assert r["t_sent"] - r["t_scheduled"] >= 0.4


async def test_backoff_is_capped(tmp_path: Path) -> None:
    # uncapped, the waits would be drawn from [0, 40], [0, 80], [0, 160], [0, 320] ms
    w = fault_workload(
        tmp_path,
        {"error_rate": 1.0},
        max_attempts=5,
        count=1,
        sets={"retry.backoff": "40ms", "retry.backoff_max": "50ms"},
    )
    (r,) = await assert_all_fail_with(w, "http_500", 5)
    assert r["backoff_ms"] <= 4 * 50 + 1  # four waits, each capped at backoff_max


async def test_errors_not_in_retry_on_are_not_retried(tmp_path: Path) -> None:
    w = fault_workload(tmp_path, {"error_rate": 1.0}, max_attempts=3, sets={"retry.on": [429, "timeout"]})
    await assert_all_fail_with(w, "http_500", 1)


@pytest.mark.slow
async def test_mixed_faults_mostly_ok_each_id_once_backoff_not_latency(
    tmp_path: Path,
) -> None:
    count = 60
    w = fault_workload(
        tmp_path,
        {
            "ttft": "20ms",
            "tokens_per_s": 500,
            "output_tokens": 6,
            "capacity": 100,
            "error_rate": 0.2,
            "throttle_rate": 0.2,
            "retry_after": "300ms",
            "reset_rate": 0.2,
            "abort_rate": 0.2,
            "malformed_rate": 0.2,
            "stall_rate": 0.2,
            "stall": "1s",
        },
        max_attempts=5,
        count=count,
        sets={
            "run": {"concurrency": count, "timeout": "0.5s", "seed": 11},
            "models.0.max_tokens": 6,
            "prompts.synthetic.output_tokens": 6,
            "retry.backoff": "100ms",
            "retry.backoff_max": "200ms",
        },
    )
    out = await run(w)
    recs = journal(w)
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) == count  # every id exactly once
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(ok) >= 0.6 * count, out.summary["errors"]
    assert out.summary["requests"]["total"] == count
    assert out.summary["requests"]["ok"] == len(ok)
    # the retried attempts are classified, in the records and in the summary
    seen: dict[str, int] = {}
    for r in recs:
        for cls, n in (r.get("attempt_errors") or {}).items():
            seen[cls] = seen.get(cls, 0) + n
    assert seen == out.summary["attempt_errors"]
    assert {"http_429", "http_500", "stream_aborted", "bad_response", "timeout"} <= set(seen)
    for r in recs:
        if r["status"] == "error":
            assert r["error_detail"]
    # backoff is not latency: an ok answer takes ~20 + 5 * 2 ms at the server, whatever the waits
    retried_ok = [r for r in ok if r["attempts"] > 1]
    assert retried_ok
    for r in retried_ok:
        assert r["backoff_ms"] > 0
        assert r["t_sent"] - r["t_scheduled"] >= r["backoff_ms"] / 1000 - 0.01
    # the final attempt alone: counting the earlier ones in would add at least 0.5 s a timed-out
    # attempt and the backoff, so the latency would exceed that sum; the final attempt alone
    # (~30 ms) stays below it even on a loaded machine, where the 0.5 s timeout itself runs late
    timed_out_ok = [r for r in retried_ok if "timeout" in r["attempt_errors"]]
    assert timed_out_ok, [r["attempt_errors"] for r in retried_ok]
    for r in timed_out_ok:
        assert r["latency_ms"] < 500 * r["attempt_errors"]["timeout"] + r["backoff_ms"], r
    throttled_ok = [r for r in retried_ok if "http_429" in r["attempt_errors"]]
    assert throttled_ok
    for r in throttled_ok:
        assert r["backoff_ms"] >= 300 * r["attempt_errors"]["http_429"] - 1
        assert r["latency_ms"] < r["backoff_ms"], r  # counted in, latency would be the larger


# --- the journal on disk, and stopping -----------------------------------------------------------


@pytest.mark.slow
async def test_journal_is_on_disk_per_record_and_fsynced_every_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs: list[tuple[float, int]] = []  # (when, bytes in the file by then)
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        syncs.append((time.monotonic(), os.fstat(fd).st_size))
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        syncs.append((time.monotonic(), os.fstat(fd).st_size))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)  # the journal's `os` is this one
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    w = load_workload(
        "sim_instant",
        tmp_path,
        {
            "run.concurrency": 8,
            "prompts": {"synthetic": {"count": 400, "input_tokens": 5, "output_tokens": 4}},
            "sim.models.m": {"ttft": "50ms", "tokens_per_s": 200, "jitter": 0},
        },
    )
    e = engine_for(w)
    seen: list[tuple[int, int]] = []

    async def watch() -> None:
        while e.state != "done":
            if e.state in ("running", "draining") and w.results_path().exists():
                done = e.ok + e.errors
                await asyncio.sleep(0)  # one loop iteration: records may be batched within one
                lines = w.results_path().read_bytes().count(b"\n")
                seen.append((lines, done))
            await asyncio.sleep(0.01)

    d = asyncio.create_task(watch())
    out = await run(w, e)
    await d
    # every finished request is a whole line in the file by the next loop iteration (no buffer that
    # waits for more records or for a timer); whole lines only, never a partial one
    assert seen and all(lines >= done for lines, done in seen), [s for s in seen if s[0] < s[1]][:5]
    assert sum(1 for lines, done in seen if lines > 0) > 20
    duration = out.summary["duration_s"]
    assert duration > 2.5
    # fsync once a second while records arrive, and at close: the last sync saw the whole file
    sizes = [size for _, size in syncs]
    assert sizes == sorted(sizes), sizes
    assert sizes[-1] == w.results_path().stat().st_size
    assert len(syncs) >= int(duration) - 1  # a loop too busy to tick on time syncs late, not never
    # the gaps: a second, plus what the loop was late by (the run measured it), plus 0.5 s of room
    lag = out.summary["loop_lag_ms"]["max"] / 1000
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(syncs)]
    assert max(gaps) < 1.0 + lag + 0.5, (gaps, lag)


def _start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "oxconsole", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("grace", "signals"),
    [("0.5s", ("SIGTERM",)), ("30s", ("SIGINT", "SIGINT"))],
    ids=["sigterm-grace-expires", "second-sigint-cancels-at-once"],
)
def test_stop_records_in_flight_as_cancelled_exits_130_and_resume_sends_them(
    tmp_path: Path, grace: str, signals: tuple[str, ...]
) -> None:
    tmp = tmp_path
    results = tmp / "out" / "results.jsonl"
    wl = write_workload(
        "sim_instant",
        tmp,
        {
            "name": "stop",
            "run": {"concurrency": 8, "grace": grace},
            "output.results": str(results),
            "prompts": {"synthetic": {"count": 40, "input_tokens": 5, "output_tokens": 4}},
            "sim.models.m": {"ttft": "20s", "tokens_per_s": 200, "jitter": 0},
        },
        file="w.toml",
    )
    p = _start([str(wl), "--headless", "--progress-interval", "0.2"], tmp)
    assert p.stderr is not None
    deadline = time.time() + 30
    while time.time() < deadline:  # a progress line every 0.2 s; wait until all 8 are in flight
        line = p.stderr.readline()
        if not line or "in flight 8/8" in line:
            break
    assert "in flight 8/8" in line, line
    t_sig = time.monotonic()
    for i, name in enumerate(signals):
        p.send_signal(getattr(signal, name))
        if i + 1 < len(signals):  # the next signal only once this one was taken (not coalesced)
            while "oxconsole: stopping" not in line and line:
                line = p.stderr.readline()
    out, err = p.communicate(timeout=30)
    took = time.monotonic() - t_sig
    assert p.returncode == 130, err
    assert "Traceback" not in err
    assert "requests" in out  # the summary was printed
    # grace 0.5 s, or cancelled at once by the second signal: not the 30 s grace, nor the 20 s the
    # requests would take (what is left is the process's own exit, slow on a busy machine)
    assert took < 8.0, took
    recs = [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
    assert len(recs) == 8
    assert {r["error"] for r in recs} == {"cancelled"}
    assert all(r["error_detail"] for r in recs), [r for r in recs if not r["error_detail"]][:5]
    cancelled = {r["id"] for r in recs}
    r = oxconsole_here(str(wl), "--headless", "--resume", "--set", 'sim.models.m.ttft="10ms"', cwd=tmp)
    assert r.returncode == 0, r.stderr
    after = [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
    assert after[:8] == recs  # appended, never truncated
    ok = [x["id"] for x in after if x["status"] == "ok"]
    assert len(ok) == len(set(ok)) == 40
    assert cancelled <= set(ok)


async def test_a_mostly_healthy_model_is_not_cooled_down(tmp_path: Path) -> None:
    w = load_workload(
        "sim_instant",
        tmp_path,
        {
            "run": {"concurrency": 100, "duration": "1s"},
            "prompts": {"synthetic": {"count": 1000, "input_tokens": 5, "output_tokens": 4}},
            "retry.max_attempts": 1,
            "sim.models.m": {
                "ttft": "200ms",
                "tokens_per_s": 100,
                "capacity": 200,
                "jitter": 0.2,
                "error_rate": 0.1,
            },
        },
    )
    out = await run(w)
    recs = journal(w)
    ok = sum(1 for r in recs if r["status"] == "ok")
    assert ok >= 0.8 * len(recs)  # the model is healthy: ~90% of its answers are ok
    assert out.summary["cooldowns"] == []
