"""run.workers: several engine processes, one journal, one collector, commands split into shares."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.commands import EnableModel, Pause, Resume, SetConcurrency, SetRate, SetWeight, Stop
from oxconsole.engine.runner import Engine, make_engine
from oxconsole.engine.workers.pool import ProcessShards
from oxconsole.engine.workers.split import split
from oxconsole.workload import Workload
from tests.support import journal, read_jsonl, until
from tests.support.http import chat_server, ok_answer
from tests.support.ray import descendants
from tests.support.workloads import load_workload, write_workload


def two_workers(tmp_path: Path, count: int, ttft: str) -> Workload:
    """tests/workloads/sim_workers.toml: `count` prompts, each answered `ttft` after admission."""
    sim = {"ttft": ttft, "tokens_per_s": 0}
    return load_workload(
        "sim_workers", tmp_path, {"prompts.synthetic.count": count, "sim.models": {"a": sim, "b": sim}}
    )


def worker_gauges(e: Engine) -> list[dict[str, Any]]:
    """What each worker last reported of itself (its own engine's gauges)."""
    assert isinstance(e.shards, ProcessShards), e.shards
    return [wk.gauges for wk in e.shards.workers if wk.gauges is not None]


def every_worker(e: Engine, cond) -> bool:  # type: ignore[no-untyped-def]
    gs = worker_gauges(e)
    return len(gs) == e.shards.n and all(cond(g) for g in gs)


def test_split_shares() -> None:
    assert split(10, 2) == [5, 5]
    assert split(11, 2) == [6, 5]
    assert split(1, 3) == [1, 1, 1]  # every worker keeps at least one slot
    assert sum(split(1000, 7)) == 1000


@pytest.mark.slow
async def test_two_workers_one_journal_each_id_once(tmp_path: Path) -> None:
    w = two_workers(tmp_path, 200, "20ms")
    e = make_engine(w, results_path=w.results_path(), total_expected=200, publish_interval=0.05)
    assert isinstance(e.shards, ProcessShards) and e.shards.n == 2
    seen_limits: list[int] = []
    peak_after = 0

    async def drive() -> None:
        nonlocal peak_after
        await until(lambda: e.latest is not None and e.latest.counts.total >= 60, timeout=60)
        e.apply(SetConcurrency(2))
        e.apply(Pause())
        # each worker says it is paused: no rate limit, so from then on it dispatches nothing
        await until(lambda: every_worker(e, lambda g: g["state"] == "paused" and g["concurrency"] == 1))
        frozen = sum(g["dispatched"] for g in worker_gauges(e))
        await asyncio.sleep(0.3)
        assert sum(g["dispatched"] for g in worker_gauges(e)) == frozen
        e.apply(Resume())
        while e.state == "running":
            if e.latest is not None:
                seen_limits.append(e.latest.gauges.concurrency)
                peak_after = max(peak_after, e.latest.gauges.in_flight)
            await asyncio.sleep(0.02)

    d = asyncio.create_task(drive())
    out = await e.run()
    await d
    recs = journal(w)
    ids = [r["id"] for r in recs]
    assert len(ids) == 200 and len(set(ids)) == 200
    assert out.exit_code == 0
    assert out.summary["requests"]["ok"] == 200
    assert out.summary["workers"] == 2
    # the workers' own event-loop lag and GC pacing reach the summary: the worst worker's lag
    # (every timing may include that much), the collections of all of them
    ends = [wk.end for wk in e.shards.workers]
    assert all(end is not None for end in ends), [end for end in ends if end is None][:5]
    lag = out.summary["loop_lag_ms"]
    assert lag == {k: max(end["loop_lag_ms"][k] for end in ends) for k in ("p50", "p99", "max")}  # type: ignore[index]
    assert lag["max"] > 0.0
    assert out.summary["gc"]["collections"] == sum(end["gc"]["collections"] for end in ends)  # type: ignore[index]
    assert [c["what"] for c in out.summary["changes"]] == ["concurrency", "paused", "paused"]
    # the fork server the workers came from was stopped and waited for: their CPU counts in this
    # process's children (as `time` and the benchmarks read it), and nothing outlives the run
    left = [
        pid for pid in descendants(os.getpid()) if "forkserver" in Path(f"/proc/{pid}/cmdline").read_text()
    ]
    assert left == []
    assert set(seen_limits) == {2}
    assert peak_after <= 2
    assert {r["model"] for r in recs} == {"a", "b"}


@pytest.mark.slow
async def test_rate_weight_enable_and_stop_reach_every_worker(tmp_path: Path) -> None:
    """`Engine.apply` over worker processes for what test_two_workers does not send: each worker
    applies its share (a rate split in two), the same weight and switch, and a stop ends the run early."""
    w = two_workers(tmp_path, 4000, "20ms")
    e = make_engine(w, results_path=w.results_path(), total_expected=4000, publish_interval=0.05)
    assert isinstance(e.shards, ProcessShards)
    switched = 0.0

    async def drive() -> None:
        nonlocal switched
        await until(lambda: e.latest is not None and e.latest.counts.total >= 40, timeout=60)
        e.apply(SetRate(60.0))
        e.apply(SetWeight("b", 3.0))
        e.apply(EnableModel("a", False))
        await until(
            lambda: every_worker(
                e,
                lambda g: (
                    g["rate"] == 30.0
                    and g["models"]["b"]["weight"] == 3.0
                    and not g["models"]["a"]["enabled"]
                ),
            )
        )
        switched = time.time()
        g = e.gauges()
        assert (g.rate, g.models["b"].weight, g.models["a"].enabled) == (60.0, 3.0, False)
        n = len(journal(w))
        await until(lambda: len(journal(w)) >= n + 30)  # 30 more at 60/s
        e.apply(Stop())

    d = asyncio.create_task(drive())
    out = await e.run()
    await d
    assert out.exit_code == 130  # stopped before every request was sent
    assert [c["what"] for c in out.summary["changes"]] == ["rate", "weight", "enabled"]
    recs = journal(w)
    assert 70 <= len(recs) < 4000  # stopped early
    late = [r for r in recs if r["t_scheduled"] > switched]
    assert late and {r["model"] for r in late} == {"b"}


@pytest.mark.slow
async def test_worker_crash_is_reported_not_silent(tmp_path: Path) -> None:
    w = two_workers(tmp_path, 2000, "50ms")
    e = make_engine(w, results_path=w.results_path(), total_expected=2000)
    shards = e.shards
    assert isinstance(shards, ProcessShards)

    async def kill_one() -> None:
        await until(lambda: e.latest is not None and e.latest.counts.total >= 20, timeout=60)
        pid = shards.workers[0].proc.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # once the pool has seen it, the survivor's 1,000 requests are not this test's business
        await until(lambda: any("worker 0 ended unexpectedly" in x for x in e.warnings))
        e.apply(Stop())

    k = asyncio.create_task(kill_one())
    out = await e.run()
    await k
    assert out.exit_code == 130  # the crash is not silent, and the stop came before all was sent
    assert out.crashed and out.summary["requests"]["not_sent"] > 0
    assert any("worker 0 ended unexpectedly" in x for x in out.warnings), [x for x in out.warnings][:5]
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == len(set(ids)) and 20 <= len(ids) < 2000


async def test_attempt_errors_reach_the_parent_while_requests_retry(tmp_path: Path) -> None:
    # Every attempt is a 429 asking for 0.5 s: each request fails twice, waits, and ends with a
    # third 429 after about a second. Its retried attempts must show in the parent's snapshot at
    # once (a worker forwards them live), not only when the records that carry them arrive.
    w = load_workload(
        "sim_instant",
        tmp_path,
        {
            "run": {"concurrency": 8, "workers": 2},
            "prompts": {"synthetic": {"count": 8, "input_tokens": 5, "output_tokens": 4}},
            "retry": {"max_attempts": 3, "backoff": "1ms", "backoff_max": "5ms"},
            "sim.models.m": {"ttft": "5ms", "throttle_rate": 1.0, "retry_after": "500ms"},
        },
    )
    e = make_engine(w, results_path=w.results_path(), total_expected=8, publish_interval=0.02)
    assert isinstance(e.shards, ProcessShards)
    live_before_any_record: list[int] = []

    async def watch() -> None:
        while e.state != "done":
            s = e.latest
            if s is not None and s.counts.total == 0 and s.attempt_errors:
                live_before_any_record.append(sum(s.attempt_errors.values()))
            await asyncio.sleep(0.01)

    wt = asyncio.create_task(watch())
    out = await e.run()
    await wt
    recs = [orjson.loads(x) for x in w.results_path().read_bytes().splitlines()]
    assert len(recs) == 8 and all(r["error"] == "http_429" for r in recs)
    assert live_before_any_record, "no attempt error reached the parent before the first record"
    journaled: dict[str, int] = {}
    for r in recs:
        for cls, n in (r["attempt_errors"] or {}).items():
            journaled[cls] = journaled.get(cls, 0) + n
    assert journaled == {"http_429": 16}
    assert out.summary["attempt_errors"] == journaled  # counted live, then once as final
    assert e.latest is not None and e.latest.attempt_errors == journaled


async def test_each_runs_workers_take_the_environment_it_starts_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker processes are forked from a server that outlives a run (it imported the engine once):
    each run's workers still read the environment as it is when that run starts (a header value
    from `headers_env` changed between two runs reaches the server as changed)."""
    seen: list[str | None] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("x-org"))
        return ok_answer()

    async with chat_server(handler) as url:
        for value in ("first", "second"):
            monkeypatch.setenv("TEST_WORKERS_ORG", value)
            w = load_workload(
                "sim_instant",
                tmp_path,
                {
                    "run": {"stream": False, "workers": 2},
                    "endpoints.default": {
                        "base_url": f"{url}/v1",
                        "headers_env": {"X-Org": "TEST_WORKERS_ORG"},
                    },
                    "prompts.items": ["a", "b", "c", "d"],
                    "sim": None,
                },
            )
            out = await make_engine(w, results_path=w.results_path(), total_expected=4).run()
            assert out.exit_code == 0, out.warnings
    assert seen == ["first"] * 4 + ["second"] * 4


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _workers_of(pid: int) -> list[int]:
    """The worker processes of the run `pid`: the fork server's children."""
    found = []
    for q in descendants(pid):
        try:
            parent = int(Path(f"/proc/{q}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"forkserver" in _cmdline(q) and b"forkserver" in _cmdline(parent):
            found.append(q)
    return sorted(found)


@pytest.mark.slow
def test_kill_9_of_one_worker_says_what_was_lost_and_how_to_send_it(tmp_path: Path) -> None:
    """A worker killed outright: the run goes on with the other, and its end says which worker,
    how it ended, how many of its requests were lost, and the command that sends them (exit 1:
    the run finished, not every request made it); that command then sends exactly those."""
    write_workload(
        "sim_workers",
        tmp_path,
        {
            "name": "k",
            "output.results": "out/results.jsonl",
            "models": [{"name": "a"}],
            "prompts.synthetic.count": 1500,
            "sim.models": {"a": {"ttft": "50ms", "tokens_per_s": 0}},
        },
        file="w.toml",
    )
    results = tmp_path / "out" / "results.jsonl"
    cmd = [sys.executable, "-m", "oxconsole", "w.toml", "--headless", "--summary-json", "s.json"]
    p = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (results.exists() and results.read_bytes().count(b"\n") >= 40):
        time.sleep(0.05)
    workers = _workers_of(p.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1, err
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    lost = summary["requests"]["not_sent"]
    assert 0 < lost < 750, summary["requests"]
    line = next((x for x in err.splitlines() if "worker" in x and "ended unexpectedly" in x), "")
    assert "killed by SIGKILL" in line, err
    assert f"{lost:,} of its 750 requests were lost" in line and "--resume" in line, (lost, line)
    assert f"{lost:,} requests not sent; continue with: oxconsole w.toml --resume" in err, err
    again = subprocess.run(
        [sys.executable, "-m", "oxconsole", "w.toml", "--headless", "--resume"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    ids = [r["id"] for r in read_jsonl(results)]
    assert len(ids) == 1500 == len(set(ids)), (len(ids), len(set(ids)))
