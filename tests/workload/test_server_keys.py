"""`server_metrics`, `server_metrics_interval`, `[telemetry] dcgm` and the simulator's metrics
keys: read as written, and every mistake named in TOML words (exit 2 before anything is sent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oxconsole.workload import WorkloadError
from tests.support.workloads import load_workload


def test_auto_by_default(tmp_path: Path) -> None:
    w = load_workload("sim_exact", tmp_path)
    assert (w.endpoints["default"].server_metrics, w.endpoints["default"].server_metrics_interval) == (
        "auto",
        1.0,
    )
    assert w.telemetry.dcgm == () and w.sim_limits.metrics_format == "vllm" and w.sim["m"].kv_tokens == 65536


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("auto", "auto"),
        ("off", "off"),
        ("http://h:8000/metrics", ("http://h:8000/metrics",)),
        (["http://a:8000/metrics", "https://b/m"], ("http://a:8000/metrics", "https://b/m")),
    ],
)
def test_server_metrics_as_written(tmp_path: Path, value: Any, expected: Any) -> None:
    w = load_workload("sim_exact", tmp_path, {"endpoints.default.server_metrics": value})
    assert w.endpoints["default"].server_metrics == expected


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("endpoints.default.server_metrics", "on", '"auto" | "off", an http(s):// URL'),
        ("endpoints.default.server_metrics", "h:8000/metrics", "an http(s):// URL"),
        ("endpoints.default.server_metrics", [], "a list of them"),
        ("endpoints.default.server_metrics", ["http://a/m", 3], "endpoints.default.server_metrics.1"),
        ("endpoints.default.server_metrics_interval", "100ms", "a duration from 250ms to 60s"),
        ("endpoints.default.server_metrics_interval", 61, "a duration from 250ms to 60s"),
        ("telemetry.dcgm", "localhost:9400", "an http(s):// URL"),
        ("telemetry.dcm", "http://g:9400/metrics", "telemetry.dcm"),
        ("sim.metrics_format", "sglang", '"vllm" | "llamacpp"'),
        ("sim.models.m.kv_tokens", 0, "sim.models.m.kv_tokens"),
    ],
)
def test_mistakes_are_named(tmp_path: Path, key: str, value: Any, says: str) -> None:
    with pytest.raises(WorkloadError) as e:
        load_workload("sim_exact", tmp_path, {key: value})
    text = str(e.value)
    assert says in text and key.split(".")[-1] in text, text


def test_interval_and_telemetry_read(tmp_path: Path) -> None:
    w = load_workload(
        "sim_exact",
        tmp_path,
        {
            "endpoints.default.server_metrics_interval": "250ms",
            "telemetry.dcgm": ["http://g1:9400/metrics", "http://g2:9400/metrics"],
            "sim.metrics_format": "llamacpp",
            "sim.models.m.kv_tokens": 4096,
        },
    )
    assert w.endpoints["default"].server_metrics_interval == 0.25
    assert w.telemetry.dcgm == ("http://g1:9400/metrics", "http://g2:9400/metrics")
    assert w.sim_limits.metrics_format == "llamacpp"
    assert w.sim["m"].kv_tokens == 4096
