"""The server's side over real HTTP: each engine's exposition served by a loopback server of the
test's own and read by the run's scrape task into one vocabulary; a restart, replicas, trtllm-serve's
other path, the start-up warning, and the simulator read exactly, sample by sample."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.serverwatch import ServerWatch
from oxconsole.metrics.bound import server_bound
from oxconsole.metrics.server.live import queue_place
from oxconsole.metrics.server.series import read_series, series_path
from tests.support import engine_for, run, until
from tests.support.expositions import ENGINE, EXPECTED, expected_value, fixture_text, halved, oracle, vllm
from tests.support.metricsserver import FAST, metrics_server, rounds, text, workload
from tests.support.workloads import load_workload


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n != "trtllm"))
async def test_each_engines_exposition_read_over_http(tmp_path: Path, name: str) -> None:
    """The fixture earlier in its life (counters at half), then as it is: the second round's
    figures are the fixture's own, computed here from prometheus_client's reading of it."""
    body = fixture_text(name)
    async with metrics_server(text(halved(body), body)) as (origin, _):
        watch, warnings = await rounds(workload(tmp_path, origin), 2, tmp_path)
    assert warnings == [], warnings
    t = watch.targets[0]
    g = t.live.gauge(0.0)
    assert g["engine"] == ENGINE.get(name, name), g
    samples = oracle(body)
    lines = [d for d in read_series(series_path(tmp_path / "results.jsonl")) if "span_s" in d]
    for figure, spec in EXPECTED[name].items():
        want = expected_value(spec, samples)
        got = g.get(figure)
        if spec[0] == "rate":  # over the span the watch measured: (growth, span) in the line's sums
            grown, span = lines[0]["sums"]["counters"][figure]
            assert grown == pytest.approx(want * 4.0, rel=1e-9), (figure, lines[0])  # read over 4 s
            assert lines[0][figure] == pytest.approx(grown / span, rel=1e-9), (figure, lines[0])
        elif want is None:
            assert got is None, (figure, g)
        elif isinstance(want, tuple):
            assert isinstance(got, dict), (figure, g)
            assert (got["p50"], got["p90"], got["p99"]) == pytest.approx(want, rel=1e-9), (figure, got)
        else:
            assert got == pytest.approx(want, rel=1e-9), (figure, g)


async def test_trtllm_serve_is_found_at_its_prometheus_path(tmp_path: Path) -> None:
    body = fixture_text("trtllm")
    iteration_stats = text(b'[{"iter": 1, "numActiveRequests": 3}]', content_type="application/json")
    also = {"/prometheus/metrics": text(halved(body), body)}
    async with metrics_server(iteration_stats, also=also) as (origin, served):
        watch, warnings = await rounds(workload(tmp_path, origin), 2)
    assert warnings == [], warnings
    assert served.paths[0] == "/metrics" and set(served.paths[1:]) == {"/prometheus/metrics"}, served.paths
    g = watch.targets[0].live.gauge(0.0)
    assert g["engine"] == "trtllm" and g["url"].endswith("/prometheus/metrics"), g
    assert g["running"] == sum(v for _, v in oracle(body)["trtllm_num_requests_running"]), g


async def test_a_counter_that_went_down_is_a_restart(tmp_path: Path) -> None:
    bodies = (vllm(prompt=90_000, preempt=7), vllm(prompt=40, preempt=1), vllm(prompt=100, preempt=1))
    async with metrics_server(text(*bodies)) as (origin, _):
        await rounds(workload(tmp_path, origin), 3, tmp_path)
    lines = [d for d in read_series(series_path(tmp_path / "results.jsonl")) if "span_s" in d]
    assert len(lines) >= 2, lines
    restart, after = lines[0], lines[1]
    # the restart's growth is its new value (40 tokens, 1 preemption), never negative
    assert restart["sums"]["counters"]["prompt_tokens_per_s"][0] == 40, restart
    assert restart["preemptions"] == 1.0, restart
    assert after["sums"]["counters"]["prompt_tokens_per_s"][0] == 60, after


async def test_replicas_counts_summed_fractions_averaged(tmp_path: Path) -> None:
    a = vllm(running=3, waiting=1, kv=0.5, hits=10, queries=100)
    b = vllm(running=2, waiting=4, kv=0.3, hits=90, queries=100)
    async with (
        metrics_server(text(a)) as (one, _),
        metrics_server(text(b)) as (two, _),
    ):
        w = workload(
            tmp_path, one, **{"endpoints.default.server_metrics": [one + "/metrics", two + "/metrics"]}
        )
        watch, warnings = await rounds(w, 1)
    g = watch.targets[0].live.gauge(0.0)
    assert warnings == [], warnings
    assert (g["running"], g["waiting"]) == (5.0, 5.0), g
    assert g["kv_usage"] == pytest.approx(0.4), g  # two caches at 0.5 and 0.3: 0.4 full, not 0.8
    assert g["url"] == [one + "/metrics", two + "/metrics"], g


async def test_a_replica_that_fails_is_named_once(tmp_path: Path) -> None:
    async with metrics_server(text(vllm(running=3))) as (one, _):
        dead = "http://127.0.0.1:9/metrics"  # the discard port: nothing listens
        w = workload(tmp_path, one, **{"endpoints.default.server_metrics": [one + "/metrics", dead]})
        watch, warnings = await rounds(w, 3)
    assert len(warnings) == 1 and dead in warnings[0] and "1 of 2 URLs" in warnings[0], warnings
    d = watch.targets[0].run.as_dict()
    assert d["running"]["max"] == 3.0 and d["failed_scrapes"] == 0, d  # the round read the other


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (501, "This server does not support metrics endpoint. Start it with `--metrics`", "--metrics"),
        (404, "Not Found", "--enable-metrics"),
    ],
)
async def test_missing_metrics_said_once_with_the_flag(
    tmp_path: Path, status: int, body: str, says: str
) -> None:
    from aiohttp import web

    async def refuse(request: web.Request, n: int) -> web.StreamResponse:
        return web.Response(status=status, text=body)

    async with metrics_server(refuse) as (origin, _):
        watch, warnings = await rounds(workload(tmp_path, origin), 3)
    assert len(warnings) == 1, warnings
    w = warnings[0]
    assert f"{origin}/metrics answered HTTP {status}" in w and says in w, w
    d = watch.targets[0].run.as_dict()
    assert (d["scrapes"], d["failed_scrapes"], d["engine"]) == (3, 3, "unknown"), d


async def test_text_without_an_engine_is_said(tmp_path: Path) -> None:
    body = "# TYPE python_gc_objects_collected_total counter\npython_gc_objects_collected_total 12\n"
    async with metrics_server(text(body)) as (origin, _):
        _, warnings = await rounds(workload(tmp_path, origin), 1)
    assert len(warnings) == 1 and "without any engine's metrics" in warnings[0], warnings
    assert "--disable-log-stats" in warnings[0], warnings


async def test_the_key_goes_only_to_the_endpoints_own_origin(tmp_path: Path, monkeypatch: Any) -> None:
    from aiohttp import web

    seen: list[str | None] = []

    async def answer(request: web.Request, n: int) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization"))
        return web.Response(text=vllm(running=1))

    monkeypatch.setenv("SRV_KEY", "sk-serverwatch-secret")
    async with metrics_server(answer) as (origin, _), metrics_server(answer) as (other, _):
        w = workload(
            tmp_path,
            origin,
            **{
                "endpoints.default.api_key_env": "SRV_KEY",
                "endpoints.default.server_metrics": [origin + "/metrics", other + "/metrics"],
            },
        )
        await rounds(w, 1)
    assert sorted(seen, key=str) == ["Bearer sk-serverwatch-secret", None], seen


@pytest.mark.slow
async def test_the_simulator_read_exactly_sample_by_sample(tmp_path: Path) -> None:
    """Capacity 4, six in flight, every answer 2 s after admission: until the first four end,
    every round reads 4 running and 2 waiting; after, 2 running and none waiting; the KV usage is
    what the requests in service hold. Rounds within 0.15 s of the change are left out (a round
    in flight while the first four end reads either side)."""
    w = load_workload(
        "sim_exact",
        tmp_path,
        {
            "run.concurrency": 6,
            "run.requests": 6,
            "prompts.synthetic": None,
            "prompts.items": [f"{i}" + "x" * 39 for i in range(6)],  # 40 characters: 10 tokens
            "sim.models.m.ttft": "2s",
            "sim.models.m.capacity": 4,
            "sim.models.m.kv_tokens": 1000,
            "endpoints.default.server_metrics_interval": FAST,
        },
    )
    e = engine_for(w, publish_interval=0.1)
    seen: list[tuple[dict[str, Any], str]] = []

    async def watch_live() -> None:
        while True:
            await asyncio.sleep(0.1)
            snap = e.latest
            if snap is None or not snap.gauges.server or "running" not in snap.gauges.server["default"]:
                continue
            g = dict(snap.gauges.server["default"])
            # the scrape was read age_s before the snapshot: a pair that straddles the first four
            # ending (2 s in) sets the engine's count before against the client's after
            read_at = snap.elapsed_s - g.get("age_s", 0.0)
            if side(read_at) is not None and side(read_at) == side(snap.elapsed_s):
                seen.append((g, server_bound(snap)))

    def side(t: float) -> int | None:
        return 0 if t < 2.0 - 0.15 else 1 if t > 2.0 + 0.15 else None

    watcher = asyncio.create_task(watch_live())
    out = await run(w, e)
    watcher.cancel()
    assert out.summary["requests"]["ok"] == 6, out.summary["requests"]
    # live, beside the client's six in flight: four running, two waiting, and the server is the bound
    # (the run itself is "draining": its six requests were all sent at once)
    queued = [(g, b) for g, b in seen if g["waiting"] == 2]
    assert queued, seen
    assert all(g["running"] == 4 and g["client_in_flight"] == 6 for g, _ in queued), queued
    assert any(b == "server queue" for _, b in queued), queued
    lines = [d for d in read_series(series_path(w.results_path())) if d.get("endpoint") == "default"]
    t0 = e.started_at
    held = 10 + 4  # each request's prompt (10 tokens) and answer (4 tokens)
    first = [d for d in lines if 0.15 <= d["t"] - t0 <= 2.0 - 0.15]
    second = [d for d in lines if 2.0 + 0.15 <= d["t"] - t0 <= 4.0 - 0.15]
    assert len(first) >= 4 and len(second) >= 4, [(round(d["t"] - t0, 3), d.get("running")) for d in lines]
    for d in first:
        assert (d["running"], d["waiting"], d["kv_usage"]) == (4, 2, 4 * held / 1000), (d["t"] - t0, d)
    for d in second:
        assert (d["running"], d["waiting"], d["kv_usage"]) == (2, 0, 2 * held / 1000), (d["t"] - t0, d)
    # after the end, none out now: the last round is set against what was out when it was read
    server = e.latest.gauges.server if e.latest is not None else None
    last = server["default"] if server else {}
    assert queue_place(last, 0)[0] != "others", last
    s = out.summary["server"]["default"]
    assert s["engine"] == "vllm" and s["failed_scrapes"] == 0, s
    assert s["running"]["max"] == 4 and s["waiting"]["max"] == 2, s
    assert out.summary["phases"][0]["server"]["default"]["running"]["max"] == 4, out.summary["phases"]


@pytest.mark.slow
@pytest.mark.subprocess
async def test_only_the_coordinator_scrapes_with_worker_processes(tmp_path: Path) -> None:
    from oxconsole.engine.runner import make_engine

    async with metrics_server(text(vllm(running=1))) as (origin, served):
        w = load_workload(
            "sim_exact",
            tmp_path,
            {
                "run.workers": 2,
                "run.requests": 40,
                "prompts.synthetic.count": 40,
                "endpoints.default.server_metrics": origin + "/metrics",
                "endpoints.default.server_metrics_interval": FAST,
            },
        )
        e = make_engine(w, results_path=w.results_path(), total_expected=40)
        out = await run(w, e, sim="process")
    s = out.summary["server"]["default"]
    assert out.summary["workers"] == 2 and s["scrapes"] >= 2, (out.summary.get("workers"), s)
    # one GET a round (and one cut short by the end): none from the workers
    assert s["scrapes"] <= served.asked <= s["scrapes"] + 1, (served.asked, s)


async def test_dcgm_gpus_over_http(tmp_path: Path) -> None:
    body = fixture_text("dcgm")
    async with metrics_server(text(body)) as (gpus, _), metrics_server(text(vllm(running=1))) as (origin, _):
        w = workload(tmp_path, origin, **{"telemetry.dcgm": gpus + "/metrics"})
        warnings: list[str] = []
        watch = ServerWatch(w, {}, warnings, series=series_path(tmp_path / "results.jsonl"))
        watch.start()
        try:
            await until(lambda: bool(watch.gpu_latest), 15.0, "a DCGM round")
        finally:
            await watch.stop()
    assert warnings == [], warnings
    util = {labels["UUID"]: v for labels, v in oracle(body)["DCGM_FI_DEV_GPU_UTIL"]}
    live = watch.gpus()
    assert live is not None and {g: d["gpu_util"] for g, d in live.items()} == util, live
    summary: dict[str, Any] = {}
    watch.into(summary)
    assert {g: d["gpu_util"]["max"] for g, d in summary["gpus"].items()} == util, summary["gpus"]
    lines = [d for d in read_series(series_path(tmp_path / "results.jsonl")) if "gpu" in d]
    assert {d["gpu"] for d in lines} == set(util), lines
