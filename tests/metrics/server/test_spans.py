"""A run's server figures from its scrapes: spans combined exactly, gauges by median and max."""

from __future__ import annotations

import pytest

from oxconsole.metrics.server.parse import Exposition, parse
from oxconsole.metrics.server.scrapes import Part, Scrape, read
from oxconsole.metrics.server.spans import Round, ServerSummary
from tests.support.expositions import ref_quantile, vllm

URL = "http://h:8000/metrics"


def scrape(t: float, body: str | bytes) -> Scrape:
    return Scrape(t, (Part(URL, parse(body if isinstance(body, bytes) else body.encode())),))


def test_a_run_of_scrapes() -> None:
    bodies: list[tuple[float, str | bytes]] = [
        (0.0, vllm(running=1, kv=0.1, prompt=0, hits=0, queries=0, ttft=(0, 0, 0, 0))),
        (1.0, vllm(running=3, kv=0.5, prompt=100, hits=90, queries=100, ttft=(10, 10, 10, 10))),
        (3.0, b"<html>gateway timeout</html>"),
        (4.0, vllm(running=2, kv=0.9, prompt=400, hits=90, queries=1000, preempt=2, ttft=(10, 10, 20, 20))),
    ]
    s = ServerSummary(URL)
    before = None
    for t, body in bodies:
        now = scrape(t, body)
        s.add(Round.of(read(now, before)))
        if isinstance(now.parts[0].result, Exposition):
            before = now
    d = s.as_dict()
    assert d["engine"] == "vllm"
    assert d["scrapes"] == 4 and d["failed_scrapes"] == 1
    assert d["running"] == {"p50": 2.0, "max": 3.0}
    assert d["kv_usage"] == {"p50": 0.5, "max": 0.9}
    # the run's ratio is its hits over its queries, not the mean of the spans' ratios (0.9 and 0)
    assert d["prefix_hit_rate"] == pytest.approx(90 / 1000)
    # tokens over the scraped time: 400 tokens in 4 s (the failed scrape's second is in the span after it)
    assert d["prompt_tokens_per_s"] == pytest.approx(400 / 4.0)
    assert d["preemptions"] == 2.0
    grown = [(100.0, 10.0), (500.0, 10.0), (1000.0, 20.0), (float("inf"), 20.0)]
    assert d["server_ttft_ms"]["p50"] == pytest.approx(ref_quantile(0.5, grown))
    assert d["missing"] == ["server_queue_ms", "spec_acceptance"]


def test_a_server_never_read() -> None:
    s = ServerSummary(URL)
    s.add(Round.of(read(scrape(0.0, b""))))
    assert s.as_dict() == {"engine": "unknown", "url": URL, "scrapes": 1, "failed_scrapes": 1, "missing": []}
