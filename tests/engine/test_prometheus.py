"""`/metrics` while a run lasts: scraped over real HTTP during a run against the simulator, the
contract's names, loopback by default, the port released at the end, nothing secret in it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from oxconsole.metrics import LogHistogram
from oxconsole.workload import load_workload
from tests.support import free_port
from tests.support.report import sim_workload

pytest.importorskip("prometheus_client")

from oxconsole.engine.prometheus import BUCKETS_S, to_buckets

NAMES = (
    'oxconsole_requests_total{model="m",status="ok"}',
    "oxconsole_in_flight",
    "oxconsole_concurrency_limit",
    "oxconsole_rate_limit",
    'oxconsole_output_tokens_total{model="m"}',
    'oxconsole_cost_total{model="m"}',
    'oxconsole_ttft_seconds_bucket{le="0.25",model="m"}',
    'oxconsole_itl_seconds_count{model="m"}',
    'oxconsole_latency_seconds_sum{model="m"}',
)


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return str(r.read().decode())
    except OSError:
        return None


def value(text: str, name: str) -> float:
    line = next(ln for ln in text.splitlines() if ln.startswith(name + " "))
    return float(line.rsplit(" ", 1)[1])


def test_to_buckets_is_cumulative_and_exact() -> None:
    h = LogHistogram()
    for ms in (3.0, 7.0, 40.0, 90.0, 400.0, 4000.0, 200_000.0):
        h.record(ms)
    cum, total, n = to_buckets(h)
    assert n == 7 and total == pytest.approx(204.540)
    at = dict(zip(BUCKETS_S, cum, strict=False))
    assert at[0.005] == 1 and at[0.01] == 2 and at[0.05] == 3 and at[0.1] == 4 and at[0.5] == 5
    assert at[5.0] == 6 and at[120.0] == 6 and cum[-1] == 7  # +Inf


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_scraped_during_a_run_then_released(tmp_path: Path) -> None:
    port = free_port()
    wl = sim_workload(tmp_path, concurrency=4, count=150, ttft="60ms", jitter=0, sets={"name": "prom"})
    env = {**os.environ, "OXC_SECRET_KEY": "sk-never-shown"}
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--prometheus", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while p.poll() is None and time.monotonic() < deadline:
            text = scrape(port)
            if text is not None and "oxconsole_in_flight" in text:
                seen.append(text)
            time.sleep(0.3)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert len(seen) >= 3, "too few scrapes during the run"
    last = seen[-1]
    for name in NAMES:
        assert name in last, name
    oks = [value(t, 'oxconsole_requests_total{model="m",status="ok"}') for t in seen]
    assert oks == sorted(oks) and 0 < oks[-1] <= 150
    assert value(last, "oxconsole_concurrency_limit") == 4
    assert "sk-never-shown" not in last and "Authorization" not in last
    with socket.socket() as s:  # the port is free again (a server may take it, as servers do)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
    assert scrape(port) is None


def test_loopback_default_and_bad_address(tmp_path: Path) -> None:
    one = {"name": "x", "output.results": str(tmp_path / "r.jsonl")}
    sim_workload(
        tmp_path, concurrency=1, count=1, ttft="1ms", jitter=0, sets={**one, "output.prometheus": ":9464"}
    )
    assert load_workload(tmp_path / "w.toml").output.prometheus_address() == ("127.0.0.1", 9464)
    sim_workload(
        tmp_path, concurrency=1, count=1, ttft="1ms", jitter=0, sets={**one, "output.prometheus": "nowhere"}
    )
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole", "validate", str(tmp_path / "w.toml")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "output.prometheus" in r.stderr


async def test_every_scrape_is_one_moment(tmp_path: Path) -> None:
    """From the first scrape the gauges hold the run's settings, and in every scrape each model's
    histograms count exactly its `ok` requests (one snapshot per scrape, histograms copied with it)."""
    import asyncio

    from tests.support import engine_for, run

    port = free_port()
    one = {
        "name": "one",
        "output.results": str(tmp_path / "r.jsonl"),
        "output.prometheus": f"127.0.0.1:{port}",
    }
    sim_workload(tmp_path, concurrency=8, count=200, ttft="20ms", jitter=0, sets=one)
    w = load_workload(tmp_path / "w.toml")
    engine = engine_for(w)
    task = asyncio.create_task(run(w, engine))
    seen: list[str] = []
    while not task.done():
        text = await asyncio.to_thread(scrape, port)
        if text is not None and "oxconsole_concurrency_limit" in text:
            seen.append(text)
        await asyncio.sleep(0.02)
    assert (await task).exit_code == 0
    assert len(seen) >= 3, f"{len(seen)} scrapes"
    assert [value(t, "oxconsole_concurrency_limit") for t in seen] == [8.0] * len(seen)
    counted = 0
    for t in seen:
        if 'oxconsole_requests_total{model="m",status="ok"}' not in t:
            continue
        ok = value(t, 'oxconsole_requests_total{model="m",status="ok"}')
        for h in ("ttft", "latency"):
            n = value(t, f'oxconsole_{h}_seconds_count{{model="m"}}')
            assert n == ok, f"{h} histogram counts {n}, requests_total ok {ok} in one scrape"
        counted += ok > 0
    assert counted >= 1, "no scrape saw a finished request"


@pytest.mark.parametrize("spelling", ["0", "0.0.0.0", "::0", "[::0]", "[::]"])
def test_every_interface_warned_in_any_spelling(tmp_path: Path, spelling: str) -> None:
    from oxconsole.engine.prometheus import metrics_endpoint

    port = free_port()
    one = {
        "name": "x",
        "output.results": str(tmp_path / "r.jsonl"),
        "output.prometheus": f"{spelling}:{port}",
    }
    sim_workload(tmp_path, concurrency=1, count=1, ttft="1ms", jitter=0, sets=one)
    warnings: list[str] = []
    ep = metrics_endpoint(load_workload(tmp_path / "w.toml"), warnings)
    if ep is not None:
        ep.close()
    assert any("every interface" in m for m in warnings), (spelling, warnings)


def test_loopback_and_named_hosts_not_warned(tmp_path: Path) -> None:
    from oxconsole.workload.values import every_interface

    seen = {h: every_interface(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost", "10.0.0.1")}
    assert not any(seen.values()), seen
