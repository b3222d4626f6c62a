"""Each engine's fixture is recognised and read into the vocabulary; every expected value is
computed here from the fixture's own numbers (read through prometheus_client), never copied.

The scrape before is the fixture with its counters and histograms at half their values, so over
a span of SPAN seconds a counter grew by half its value, and a histogram's growth has the
fixture's own distribution."""

from __future__ import annotations

import math
from typing import Any

import pytest

from oxconsole.metrics.server.parse import parse
from oxconsole.metrics.server.scrapes import Part, Percentiles, Scrape, read, read_gpus
from tests.support.expositions import ENGINE, EXPECTED, SPAN, expected_value, fixture_text, halved, oracle

ALL_FIGURES = (
    "running",
    "waiting",
    "kv_usage",
    "prefix_hit_rate",
    "preemptions",
    "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "server_ttft_ms",
    "server_queue_ms",
    "spec_acceptance",
)


def reading_of(name: str) -> Any:
    text = fixture_text(name)
    before = Scrape(100.0, (Part("http://h:8000/metrics", parse(halved(text).encode())),))
    now = Scrape(100.0 + SPAN, (Part("http://h:8000/metrics", parse(text.encode())),))
    return read(now, before)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_is_recognised(name: str) -> None:
    assert reading_of(name).engine == ENGINE.get(name, name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_figures(name: str) -> None:
    reading = reading_of(name)
    samples = oracle(fixture_text(name))
    for figure, spec in EXPECTED[name].items():
        want = expected_value(spec, samples)
        got = getattr(reading.total, figure)
        if want is None:
            assert got is None, figure
        elif isinstance(want, tuple):
            assert isinstance(got, Percentiles), figure
            assert (got.p50, got.p90, got.p99) == pytest.approx(want, rel=1e-9), figure
        else:
            assert got == pytest.approx(want, rel=1e-9), figure


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_missing_figures(name: str) -> None:
    want = tuple(f for f in ALL_FIGURES if f not in EXPECTED[name])
    assert reading_of(name).missing == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_model_split_matches_total(name: str) -> None:
    """A fixture serves one model (Triton: its TensorRT-LLM step): the per-model figures are the
    total's, under the model's label."""
    reading = reading_of(name)
    samples = oracle(fixture_text(name))
    labelled = {
        labels.get("model_name") or labels.get("model")
        for series in samples.values()
        for labels, _ in series
        if labels.get("model_name") or labels.get("model")
    }
    if not labelled:
        assert reading.models == {}
        return
    assert set(reading.models) <= labelled
    if len(reading.models) == 1:
        (only,) = reading.models.values()
        assert only == reading.total


def test_dcgm_fixture_per_gpu() -> None:
    text = fixture_text("dcgm")
    gpus = read_gpus(Scrape(0.0, (Part("http://h:9400/metrics", parse(text.encode())),)))
    samples = oracle(text)
    uuids = {labels["UUID"] for labels, _ in samples["DCGM_FI_DEV_GPU_UTIL"]}
    assert set(gpus) == uuids
    for figure, metric in (
        ("gpu_util", "DCGM_FI_DEV_GPU_UTIL"),
        ("gpu_mem_used_mb", "DCGM_FI_DEV_FB_USED"),
        ("gpu_power_w", "DCGM_FI_DEV_POWER_USAGE"),
    ):
        for labels, v in samples[metric]:
            assert getattr(gpus[labels["UUID"]], figure) == pytest.approx(v)


def test_dcgm_is_not_an_endpoint_engine() -> None:
    """DCGM is telemetry, read with read_gpus; as an endpoint's answer it is an unknown engine."""
    reading = read(Scrape(0.0, (Part("u", parse(fixture_text("dcgm").encode())),)))
    assert reading.engine == "unknown"
    assert reading.total.as_dict() == {}


def test_first_scrape_reads_gauges_only() -> None:
    text = fixture_text("vllm")
    reading = read(Scrape(0.0, (Part("u", parse(text.encode())),)))
    samples = oracle(text)
    assert reading.span_s is None
    assert reading.total.running == sum(v for _, v in samples["vllm:num_requests_running"])
    assert reading.total.prompt_tokens_per_s is None
    assert reading.total.server_ttft_ms is None
    assert reading.missing == ()


def test_as_dict_uses_the_series_keys() -> None:
    d = reading_of("vllm").total.as_dict()
    assert set(d) == set(ALL_FIGURES)
    ttft = d["server_ttft_ms"]
    assert isinstance(ttft, dict) and set(ttft) == {"p50", "p90", "p99"}
    assert all(math.isfinite(v) for v in ttft.values())
