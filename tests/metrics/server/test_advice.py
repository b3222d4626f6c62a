"""The start-up warning names the URL, what it answered and what the engine needs."""

from __future__ import annotations

import pytest

from oxconsole.metrics.server.advice import NO_ENGINE, warning


@pytest.mark.parametrize(
    ("answered", "needs"),
    [
        ("HTTP 501: This server does not support metrics endpoint. Start it with `--metrics`", "--metrics"),
        ("HTTP 404", "--enable-metrics"),
        ("cannot connect: connection refused", "port 8002"),
        ("a JSON answer, not Prometheus text", "/prometheus/metrics"),
        (NO_ENGINE, "--disable-log-stats"),
        ("no answer within 2 s", "server_metrics"),
    ],
)
def test_what_it_answered_and_what_it_needs(answered: str, needs: str) -> None:
    w = warning("local", [("http://h:8000/metrics", answered)], 1)
    assert w.startswith("endpoints.local.server_metrics: http://h:8000/metrics answered "), w
    assert answered in w and needs in w and '"off"' in w, w


def test_a_replica_that_failed_is_named() -> None:
    w = warning("pool", [("http://b:8000/metrics", "HTTP 503")], 2)
    assert "http://b:8000/metrics" in w and "1 of 2 URLs" in w and "lack these replicas" in w, w
