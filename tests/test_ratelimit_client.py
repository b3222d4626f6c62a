"""Provider rate limits end to end over real HTTP: the simulator's `x-ratelimit-*` headers read on
every answer into the summary's `ratelimit`, absent without them, and `pace_by_headers` waiting for
the reset instead of drawing a 429 while using at least 90% of the limit (windows shortened to 2 s
by `[sim] ratelimit_window`; the bench runs the contract's minute)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from oxconsole.engine.runner import make_engine
from tests.conftest import WorkloadFactory
from tests.support import engine_for, journal, run, until

RUN = """
name = "rl"
[run]
concurrency = {concurrency}
duration = "{duration}"
grace = "5s"
workers = {workers}
[endpoints.default]
base_url = "sim"
pace_by_headers = {pace}
[[models]]
name = "m"
max_tokens = 10
[prompts]
items = ["{prompt}"]
repeat = {repeat}
[sim]
rpm_limit = {rpm}
tpm_limit = {tpm}
ratelimit_window = "{window}"
[sim.models.m]
ttft = "10ms"
tokens_per_s = 0
output_tokens = 10
jitter = 0
"""


def rl_run(make_workload: WorkloadFactory, **kw: Any) -> Any:
    """Requests of 30 tokens as the simulator counts them: 80 characters in (20) and 10 out."""
    args = {"concurrency": 4, "duration": "0s", "workers": 1, "pace": "false", "prompt": "word " * 16,
            "repeat": 5, "rpm": 0, "tpm": 0, "window": "60s"} | kw  # fmt: skip
    return make_workload(RUN.format(**args))


async def test_headers_read_into_the_summary(make_workload: WorkloadFactory) -> None:
    """rpm_limit 20 and tpm_limit 1000 in one window: 5 requests leave 15 requests and 850 tokens."""
    w = rl_run(make_workload, rpm=20, tpm=1000, concurrency=1)
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


async def test_no_headers_no_ratelimit_key(make_workload: WorkloadFactory) -> None:
    w = rl_run(make_workload)
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
async def test_pace_by_headers_waits_for_the_reset(make_workload: WorkloadFactory, pace: bool) -> None:
    """30 requests a 2 s window, 7 s of demand far beyond it: unpaced, the simulator answers 429s;
    paced, none, each window after the first holds at least 27 and at most 30 sends, and the
    waits are counted as client queue time."""
    w = rl_run(make_workload, rpm=30, window="2s", duration="7s", repeat=100000, pace=str(pace).lower())
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
@pytest.mark.subprocess
async def test_workers_headers_reach_the_coordinator_and_pace_together(
    make_workload: WorkloadFactory,
) -> None:
    """Two workers share the limit: no 429, the summary's figures from their shards."""
    w = rl_run(
        make_workload,
        rpm=40,
        window="2s",
        duration="5s",
        repeat=100000,
        pace="true",
        workers=2,
        concurrency=8,
    )
    engine = make_engine(w, results_path=w.results_path(), publish_interval=0.05)
    assert engine.shards.remote
    task = asyncio.create_task(engine.run())
    await until(lambda: engine.latest is not None and engine.latest.gauges.ratelimit, 20, "a live headroom")
    assert engine.latest is not None and engine.latest.gauges.ratelimit is not None
    live = engine.latest.gauges.ratelimit["default"]
    assert live["limit_requests"] == 40 and live["remaining_requests"] is not None, live
    out = await task
    recs = journal(w)
    assert throttled(recs) == 0, windows_of(recs, 2.0)
    counts = windows_of(recs, 2.0)
    assert 36 <= counts[1] <= 40, counts
    rl = out.summary["ratelimit"]["default"]
    assert rl["limit_requests"] == 40 and rl["remaining_requests_min"] is not None and rl["waits"] >= 2, rl


@pytest.mark.slow
async def test_pace_by_headers_keeps_to_the_token_limit(make_workload: WorkloadFactory) -> None:
    """tpm_limit 900 a 2 s window, 30 tokens a request (20 in, 10 out, reserved exactly): no 429,
    and each full window after the first holds 27 to 30 requests' tokens."""
    w = rl_run(make_workload, tpm=900, window="2s", duration="7s", repeat=100000, pace="true")
    out = await run(w)
    recs = journal(w)
    assert throttled(recs) == 0, windows_of(recs, 2.0)
    assert all(r["input_tokens"] + r["output_tokens"] == 30 for r in recs if r["status"] == "ok")
    counts = windows_of(recs, 2.0)
    assert all(27 <= c <= 30 for c in counts[1:3]), counts
    rl = out.summary["ratelimit"]["default"]
    assert rl["limit_tokens"] == 900 and rl["limit_requests"] is None and rl["waits"] >= 2, rl


def test_validate_says_which_endpoints_are_paced(make_workload: WorkloadFactory) -> None:
    from oxconsole.workload.describe import _endpoint_lines

    paced = "\n".join(_endpoint_lines(rl_run(make_workload, pace="true")))
    assert "paced by its x-ratelimit-* headers" in paced, paced
    assert "paced" not in "\n".join(_endpoint_lines(rl_run(make_workload)))


def test_pace_by_headers_must_be_a_bool(make_workload: WorkloadFactory) -> None:
    from oxconsole.workload import WorkloadError

    with pytest.raises(WorkloadError) as err:
        rl_run(make_workload, pace='"yes"')
    text = str(err.value)
    assert (
        "workload.toml" in text and "endpoints.default.pace_by_headers" in text and "true or false" in text
    ), text


def test_the_sim_window_is_a_positive_duration(make_workload: WorkloadFactory) -> None:
    from oxconsole.workload import WorkloadError

    assert rl_run(make_workload, window="2s").sim_limits.window == 2.0
    with pytest.raises(WorkloadError) as err:
        rl_run(make_workload, window="0s")
    text = str(err.value)
    assert "sim.ratelimit_window" in text and "a duration > 0" in text, text
