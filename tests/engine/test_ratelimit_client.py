"""Provider rate limits end to end over real HTTP: the simulator's `x-ratelimit-*` headers read on
every answer into the summary's `ratelimit`, absent without them, and `pace_by_headers` waiting for
the reset instead of drawing a 429 while using at least 90% of the limit (windows shortened to 2 s
by `[sim] ratelimit_window`; the bench runs the contract's minute)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.commands import Stop
from oxconsole.engine.runner import make_engine
from oxconsole.sim import start_sim
from oxconsole.workload import Workload
from tests.support import engine_for, journal, run, until
from tests.support.workloads import Sets, load_workload

KEYS = {
    "concurrency": "run.concurrency",
    "duration": "run.duration",
    "workers": "run.workers",
    "pace": "endpoints.default.pace_by_headers",
    "repeat": "prompts.repeat",
    "rpm": "sim.rpm_limit",
    "tpm": "sim.tpm_limit",
    "window": "sim.ratelimit_window",
}
"""rl_run's keywords and the keys of tests/workloads/sim_ratelimit.toml they set."""


def rl_run(tmp_path: Path, sets: Sets | None = None, **kw: Any) -> Workload:
    """tests/workloads/sim_ratelimit.toml (requests of 30 tokens as the simulator counts them: 80
    characters in (20) and 10 out) with `kw` (KEYS) and `sets` set."""
    return load_workload("sim_ratelimit", tmp_path, {**{KEYS[k]: v for k, v in kw.items()}, **(sets or {})})


async def test_headers_read_into_the_summary(tmp_path: Path) -> None:
    """rpm_limit 20 and tpm_limit 1000 in one window: 5 requests leave 15 requests and 850 tokens."""
    w = rl_run(tmp_path, rpm=20, tpm=1000, concurrency=1)
    engine = engine_for(w, publish_interval=0.05)
    out = await run(w, engine)
    assert out.summary["requests"]["ok"] == 5, out.summary["requests"]
    rl = out.summary.get("ratelimit")
    want = {"limit_requests": 20, "limit_tokens": 1000, "remaining_requests_min": 15,
            "remaining_tokens_min": 850, "waits": 0, "wait_s": 0.0}  # fmt: skip
    assert rl == {"default": want}, rl
    assert engine.latest is not None and engine.latest.gauges.ratelimit is not None
    live = engine.latest.gauges.ratelimit["default"]  # the snapshot's gauge, as the console reads it
    assert (live["remaining_requests"], live["remaining_tokens"]) == (15, 850), live
    assert 55 < live["reset_requests_s"] <= 60, live


async def test_no_headers_no_ratelimit_key(tmp_path: Path) -> None:
    w = rl_run(tmp_path)
    out = await run(w)
    assert out.summary["requests"]["ok"] == 5
    assert "ratelimit" not in out.summary, out.summary.get("ratelimit")


def windows_of(recs: list[dict[str, Any]], window: float) -> list[int]:
    """Requests sent in each window, from the first send (the simulator's windows start with its
    first request)."""
    sends = sorted(r["t_sent"] for r in recs)
    counts: dict[int, int] = {}
    for t in sends:
        k = int((t - sends[0]) // window)
        counts[k] = counts.get(k, 0) + 1
    return [counts.get(k, 0) for k in range(max(counts) + 1)]


def throttled(recs: list[dict[str, Any]]) -> int:
    return sum(
        (r.get("attempt_errors") or {}).get("http_429", 0) + (r.get("error") == "http_429") for r in recs
    )


@pytest.mark.parametrize("pace", [False, True])
@pytest.mark.slow
async def test_pace_by_headers_waits_for_the_reset(tmp_path: Path, pace: bool) -> None:
    """30 requests a 2 s window, 7 s of demand far beyond it: unpaced, the simulator answers 429s;
    paced, none, each window after the first holds at least 27 and at most 30 sends, and the
    waits are counted as client queue time."""
    w = rl_run(tmp_path, rpm=30, window="2s", duration="7s", repeat=100000, pace=pace)
    out = await run(w)
    recs = journal(w)
    n429 = throttled(recs)
    if not pace:
        assert n429 > 0, "without pacing the simulator must answer some 429s"
        return
    assert n429 == 0, (n429, windows_of(recs, 2.0))
    counts = windows_of(recs, 2.0)
    steady = counts[1:3]
    assert all(27 <= c <= 30 for c in steady), counts
    rl = out.summary["ratelimit"]["default"]
    assert rl["waits"] >= 3 and rl["wait_s"] > 1.0, rl
    queued = max(r["queue_ms"] for r in recs)
    assert queued > 500, queued  # the wait shows as queue time, not latency
    assert max(r["latency_ms"] for r in recs if r["status"] == "ok") < 500


@pytest.mark.slow
async def test_workers_headers_reach_the_coordinator_and_pace_together(
    tmp_path: Path,
) -> None:
    """Two workers share the limit: no 429, the summary's figures from their shards."""
    w = rl_run(
        tmp_path,
        rpm=40,
        window="2s",
        duration="5s",
        repeat=100000,
        pace=True,
        workers=2,
        concurrency=8,
    )
    engine = make_engine(w, results_path=w.results_path(), publish_interval=0.05)
    assert engine.shards.remote
    task = asyncio.create_task(engine.run())
    seen: list[Any] = []

    def live_or_end() -> bool:
        s = engine.latest
        if s is not None and s.gauges.ratelimit:
            seen.append(s.gauges.ratelimit["default"])
            return True
        return task.done()

    await until(live_or_end, 90, "a live headroom (workers start slowly on a loaded machine)")
    assert seen, "the run ended with no snapshot showing the workers' headroom"
    live = seen[0]
    assert live["limit_requests"] == 40 and live["remaining_requests"] is not None, live
    out = await task
    recs = journal(w)
    assert throttled(recs) == 0, windows_of(recs, 2.0)
    counts = windows_of(recs, 2.0)
    assert 36 <= counts[1] <= 40, counts
    rl = out.summary["ratelimit"]["default"]
    assert rl["limit_requests"] == 40 and rl["remaining_requests_min"] is not None and rl["waits"] >= 2, rl


@pytest.mark.slow
async def test_pace_by_headers_keeps_to_the_token_limit(tmp_path: Path) -> None:
    """tpm_limit 900 a 2 s window, 30 tokens a request (20 in, 10 out, reserved exactly): no 429,
    and each full window after the first holds 27 to 30 requests' tokens."""
    w = rl_run(tmp_path, tpm=900, window="2s", duration="7s", repeat=100000, pace=True)
    out = await run(w)
    recs = journal(w)
    assert throttled(recs) == 0, windows_of(recs, 2.0)
    assert all(r["input_tokens"] + r["output_tokens"] == 30 for r in recs if r["status"] == "ok")
    counts = windows_of(recs, 2.0)
    assert all(27 <= c <= 30 for c in counts[1:3]), counts
    rl = out.summary["ratelimit"]["default"]
    assert rl["limit_tokens"] == 900 and rl["limit_requests"] is None and rl["waits"] >= 2, rl


@pytest.mark.slow
async def test_one_endpoint_waiting_for_its_reset_holds_no_other(tmp_path: Path) -> None:
    """20 requests a second, every other one to an endpoint that allows 6 a 2 s window (paced) and
    the rest to one without limits: the free endpoint's requests leave when due (each within
    0.5 s of its due time, all 50 of them), while the limited one's wait for their resets (no 429,
    at most 6 sends a window). Dispatch used to wait for the limited endpoint's reset in line, and
    every free request due meanwhile waited with it (up to the 2 s window)."""
    free_runner, free_url = await start_sim(profiles=None, seed=1)
    try:
        w = load_workload("sim_ratelimit_two", tmp_path, {"endpoints.free.base_url": free_url})
        out = await run(w)
    finally:
        await free_runner.cleanup()
    recs = journal(w)
    free = [r for r in recs if r["model"] == "f"]
    limited = [r for r in recs if r["model"] == "m"]
    late = sorted(round(r["t_sent"] - r["t_scheduled"], 3) for r in free)
    assert len(free) >= 45 and late[-1] < 0.5, (len(free), late[-10:])
    assert throttled(limited) == 0, windows_of(limited, 2.0)
    assert max(windows_of(limited, 2.0)) <= 6, windows_of(limited, 2.0)
    rl = out.summary["ratelimit"]["limited"]
    assert rl["waits"] >= 2, rl
    assert "free" not in out.summary["ratelimit"], out.summary["ratelimit"]


async def test_a_stop_gives_back_the_requests_held_for_a_reset(tmp_path: Path) -> None:
    """30 prompts, 50 a second, against a paced endpoint that allows 6 a 10 s window: 6 are sent,
    24 wait in its queue. A stop ends the run at once (not at the reset), with the 24 counted as
    not sent (what --resume sends) and none of them in the journal."""
    # 50 a second: the first answer (10 ms) is in before the second request, so the limit is known.
    at_50 = {"run.arrival": "constant", "run.rate": 50}
    w = rl_run(tmp_path, at_50, concurrency=30, pace=True, repeat=30, rpm=6, window="10s")
    engine = engine_for(w, publish_interval=0.05)
    task = asyncio.create_task(run(w, engine))
    shard = engine.shards.one  # type: ignore[attr-defined]
    await until(lambda: shard.dispatch.held.held == 24, 10.0, "24 requests held for the reset")
    engine.apply(Stop(), "key")
    t0 = time.monotonic()
    out = await asyncio.wait_for(task, 20.0)
    took = time.monotonic() - t0
    recs = journal(w)
    assert len(recs) == 6 and all(r["status"] == "ok" for r in recs), [r["status"] for r in recs]
    assert out.not_sent == 24 and out.interrupted, (out.not_sent, out.interrupted)
    assert took < 5.0, took  # the reset is 10 s away
    assert shard.slots.in_use == 0, shard.slots.in_use


def test_validate_says_which_endpoints_are_paced(tmp_path: Path) -> None:
    from oxconsole.workload.describe import _endpoint_lines

    paced = "\n".join(_endpoint_lines(rl_run(tmp_path, pace=True)))
    assert "paced by its x-ratelimit-* headers" in paced, paced
    assert "paced" not in "\n".join(_endpoint_lines(rl_run(tmp_path)))


def test_pace_by_headers_must_be_a_bool(tmp_path: Path) -> None:
    from oxconsole.workload import WorkloadError

    with pytest.raises(WorkloadError) as err:
        rl_run(tmp_path, pace="yes")
    text = str(err.value)
    assert (
        "workload.toml" in text and "endpoints.default.pace_by_headers" in text and "true or false" in text
    ), text


def test_the_sim_window_is_a_positive_duration(tmp_path: Path) -> None:
    from oxconsole.workload import WorkloadError

    assert rl_run(tmp_path, window="2s").sim_limits.window == 2.0
    with pytest.raises(WorkloadError) as err:
        rl_run(tmp_path, window="0s")
    text = str(err.value)
    assert "sim.ratelimit_window" in text and "a duration > 0" in text, text
