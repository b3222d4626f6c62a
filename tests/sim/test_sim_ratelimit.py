"""The simulator's provider rate limits over real HTTP: `x-ratelimit-*` headers on every answer,
computed by hand from the fixed-window rule, and 429 with Retry-After beyond either limit."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from oxconsole.sim import SimProcess
from oxconsole.sim.ratewindows import go_duration
from oxconsole.workload import SimLimits, SimModelProfile, WorkloadError, load_sim_limits
from tests.support.sim import raw_post, running_sim, stats_of

PROFILES = {"m": SimModelProfile(ttft=0.0, tokens_per_s=0.0, output_tokens=5, jitter=0.0)}
MESSAGES = [{"role": "user", "content": "x" * 40}]  # 10 prompt tokens + 5 answer tokens = 15
REQ = ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests")
TOK = ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens")


def reset_ms(value: str) -> float:
    """A reset in the providers' form, in milliseconds."""
    if value.endswith("ms"):
        return float(value[:-2])
    minutes, _, secs = value.removesuffix("s").rpartition("m")
    return (int(minutes or 0) * 60 + float(secs)) * 1000


def test_resets_are_written_as_providers_write_them() -> None:
    cases = {0: "0s", 20: "20ms", 999: "999ms", 1000: "1s", 1500: "1.5s", 59_999: "59.999s", 60_000: "1m0s",
             360_000: "6m0s", 61_250: "1m1.25s"}  # fmt: skip
    assert {ms: go_duration(ms) for ms in cases} == cases
    assert all(reset_ms(v) == ms for ms, v in cases.items()), [
        (ms, v) for ms, v in cases.items() if reset_ms(v) != ms
    ][:5]


async def test_requests_per_minute() -> None:
    """rpm_limit 3 in a 60 s window from the first request: remaining 2, 1, 0, then a 429 whose
    Retry-After is the rest of the window; a 429 is not charged."""
    async with running_sim(PROFILES, SimLimits(rpm_limit=3)) as url:
        answers = [await raw_post(url, {"model": "m", "messages": MESSAGES}) for _ in range(5)]
        stats = (await stats_of(url))["models"]["m"]
    statuses = [a[0] for a in answers]
    assert statuses == [200, 200, 200, 429, 429], statuses
    heads = [a[1] for a in answers]
    assert [h["x-ratelimit-limit-requests"] for h in heads] == ["3"] * 5
    assert [h["x-ratelimit-remaining-requests"] for h in heads] == ["2", "1", "0", "0", "0"]
    assert heads[0]["x-ratelimit-reset-requests"] == "1m0s", heads[0]  # the window starts with it
    resets = [reset_ms(h["x-ratelimit-reset-requests"]) for h in heads]
    assert all(59_000 < r <= 60_000 for r in resets) and resets == sorted(resets, reverse=True), resets
    assert not any(k in h for h in heads for k in TOK), "tpm_limit is off: no token headers"
    retry = float(heads[3]["Retry-After"])
    assert abs(retry * 1000 - resets[3]) <= 1, (retry, resets[3])
    assert int(heads[3]["retry-after-ms"]) == pytest.approx(resets[3], abs=1)
    err = json.loads(answers[3][2])["error"]
    assert (err["type"], err["code"]) == ("requests", "rate_limit_exceeded"), err
    assert (stats["completed"], stats["http_429"]) == (3, 2), stats


async def test_tokens_per_minute_charge_prompt_and_completion() -> None:
    """tpm_limit 40: each request is charged 10 prompt + 5 completion = 15 tokens; 25 and 10 remain,
    and the third (15 > 10) is refused; streamed and whole answers carry the headers alike."""
    async with running_sim(PROFILES, SimLimits(rpm_limit=100, tpm_limit=40)) as url:
        a = await raw_post(url, {"model": "m", "messages": MESSAGES, "stream": True})
        b = await raw_post(url, {"model": "m", "messages": MESSAGES})
        c = await raw_post(url, {"model": "m", "messages": MESSAGES})
        d = await raw_post(url, {"model": "m", "input": "x" * 40}, "/responses")
    assert [x[0] for x in (a, b, c, d)] == [200, 200, 429, 429]
    assert [x[1]["x-ratelimit-remaining-tokens"] for x in (a, b, c, d)] == ["25", "10", "10", "10"]
    assert [x[1]["x-ratelimit-remaining-requests"] for x in (a, b, c, d)] == ["99", "98", "98", "98"]
    assert all(x[1]["x-ratelimit-limit-tokens"] == "40" for x in (a, b, c, d)), [
        x for x in (a, b, c, d) if x[1]["x-ratelimit-limit-tokens"] != "40"
    ][:5]
    assert json.loads(c[2])["error"]["type"] == "tokens"


async def test_a_new_window_restores_the_limits() -> None:
    """A 0.3 s window (from Python: tests cannot wait minutes): two pass, the third waits for the
    window that Retry-After names, and passes then."""
    async with running_sim(PROFILES, SimLimits(rpm_limit=2, window=0.3)) as url:
        ok = [await raw_post(url, {"model": "m", "messages": MESSAGES}) for _ in range(2)]
        refused = await raw_post(url, {"model": "m", "messages": MESSAGES})
        assert refused[0] == 429
        await asyncio.sleep(float(refused[1]["Retry-After"]) + 0.01)
        again = await raw_post(url, {"model": "m", "messages": MESSAGES})
    assert [x[0] for x in ok] == [200, 200]
    assert again[0] == 200 and again[1]["x-ratelimit-remaining-requests"] == "1", again[1]
    assert reset_ms(again[1]["x-ratelimit-reset-requests"]) <= 300


async def test_no_headers_without_limits() -> None:
    async with running_sim(PROFILES) as url:
        _, headers, _ = await raw_post(url, {"model": "m", "messages": MESSAGES})
    assert not any(k.lower().startswith("x-ratelimit") for k in headers), headers


def test_workload_keys_and_the_child_process(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text("[sim]\nrpm_limit = 2\ntpm_limit = 1000\n")
    assert load_sim_limits(path) == SimLimits(rpm_limit=2, tpm_limit=1000)
    path.write_text('[sim]\nrpm_limit = "lots"\n')
    with pytest.raises(WorkloadError) as e:
        load_sim_limits(path)
    assert "sim.rpm_limit: expected an integer >= 0" in e.value.errors[0], e.value.errors
    with SimProcess(PROFILES, limits=SimLimits(rpm_limit=1)) as sim:
        code = (
            "import asyncio, sys; from tests.support.sim import raw_post;"
            "p = {'model': 'm', 'messages': [{'role': 'user', 'content': 'x'}]};"
            "r = asyncio.run(raw_post(sys.argv[1], p)); print(r[0], r[1]['x-ratelimit-remaining-requests'])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, sim.url], capture_output=True, text=True, check=True
        )
    assert out.stdout.split() == ["200", "0"], out


async def test_the_sim_command_reads_the_limits(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text("[sim]\nrpm_limit = 7\n[sim.models.m]\nttft = 0\ntokens_per_s = 0\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "oxconsole.sim",
        "--port",
        "0",
        "--config",
        str(path),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        url = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode().strip()
        status, headers, _ = await raw_post(url, {"model": "m", "messages": MESSAGES})
    finally:
        proc.terminate()
        await proc.wait()
    got = (status, headers.get("x-ratelimit-limit-requests"), headers.get("x-ratelimit-remaining-requests"))
    assert got == (200, "7", "6"), headers
