"""The reading rules on small expositions written for each rule: restarts, replicas, models,
bucket growth, failed URLs, missing figures."""

from __future__ import annotations

import pytest

from oxconsole.metrics.server.parse import Failed, parse
from oxconsole.metrics.server.scrapes import Part, Percentiles, Scrape, read
from tests.support.expositions import ref_quantile, vllm

M = 'model_name="m"'


def scrape(t: float, *bodies: str | bytes) -> Scrape:
    parts = tuple(
        Part(f"http://replica{i}:8000/metrics", parse(b if isinstance(b, bytes) else b.encode()))
        for i, b in enumerate(bodies)
    )
    return Scrape(t, parts)


def test_counter_growth_over_the_span() -> None:
    r = read(scrape(12.0, vllm(prompt=1500, generation=300)), scrape(10.0, vllm(prompt=500, generation=100)))
    assert r.span_s == 2.0
    assert r.total.prompt_tokens_per_s == (1500 - 500) / 2.0
    assert r.total.generation_tokens_per_s == (300 - 100) / 2.0


def test_counter_that_went_down_is_a_restart() -> None:
    """The server restarted between the scrapes: its counters count from 0 again, so their growth
    is their new value, never negative."""
    r = read(
        scrape(11.0, vllm(prompt=40, preempt=1, hits=5, queries=20)),
        scrape(10.0, vllm(prompt=90_000, preempt=7, hits=3000, queries=9000)),
    )
    assert r.total.prompt_tokens_per_s == 40.0
    assert r.total.preemptions == 1.0
    assert r.total.prefix_hit_rate == 5 / 20


def test_histogram_restart_counts_what_it_holds_now() -> None:
    r = read(scrape(11.0, vllm(ttft=(1, 2, 2, 2))), scrape(10.0, vllm(ttft=(50, 80, 90, 100))))
    assert r.total.server_ttft_ms is not None
    assert r.total.server_ttft_ms.p50 == pytest.approx(
        ref_quantile(0.5, [(0.1, 1), (0.5, 2), (1.0, 2)]) * 1000
    )


def test_percentiles_come_from_the_buckets_growth() -> None:
    """Before the span, 1000 requests were fast (all under 0.1 s); during it, 100 slow ones (all
    between 0.5 s and 1 s). The span's p50 is a slow request's, not the lifetime's."""
    before = vllm(ttft=(1000, 1000, 1000, 1000))
    now = vllm(ttft=(1000, 1000, 1100, 1100))
    r = read(scrape(20.0, now), scrape(10.0, before))
    grown = [(0.1, 0.0), (0.5, 0.0), (1.0, 100.0), (float("inf"), 100.0)]
    got = r.total.server_ttft_ms
    assert isinstance(got, Percentiles)
    want = [ref_quantile(q, grown) * 1000 for q in (0.5, 0.9, 0.99)]
    assert [got.p50, got.p90, got.p99] == pytest.approx(want)
    assert 500 < got.p50 < 1000


def test_no_request_finished_means_no_percentiles() -> None:
    r = read(scrape(20.0, vllm(ttft=(5, 9, 9, 9))), scrape(10.0, vllm(ttft=(5, 9, 9, 9))))
    assert r.total.server_ttft_ms is None
    assert "server_ttft_ms" not in r.missing


def test_percentile_beyond_the_last_finite_bound_is_that_bound() -> None:
    r = read(scrape(20.0, vllm(ttft=(0, 0, 0, 10))), scrape(10.0, vllm()))
    assert r.total.server_ttft_ms == Percentiles(1000.0, 1000.0, 1000.0)


def test_two_replicas_gauges_summed_fractions_averaged_counters_summed() -> None:
    before = scrape(10.0, vllm(prompt=100, ttft=(1, 1, 1, 1)), vllm(prompt=1000, ttft=(0, 0, 0, 0)))
    now = scrape(
        15.0,
        vllm(running=3, waiting=1, kv=0.25, prompt=600, ttft=(1, 11, 11, 11)),
        vllm(running=5, waiting=4, kv=0.75, prompt=1500, ttft=(0, 0, 10, 10)),
    )
    r = read(now, before)
    assert r.total.running == 3 + 5
    assert r.total.waiting == 1 + 4
    assert r.total.kv_usage == (0.25 + 0.75) / 2
    assert r.total.prompt_tokens_per_s == ((600 - 100) + (1500 - 1000)) / 5.0
    # the histograms' growths merged: 10 requests in (0.1, 0.5], 10 in (0.5, 1.0]
    merged = [(0.1, 0.0), (0.5, 10.0), (1.0, 20.0), (float("inf"), 20.0)]
    assert r.total.server_ttft_ms is not None
    assert r.total.server_ttft_ms.p50 == pytest.approx(ref_quantile(0.5, merged) * 1000)
    assert r.total.server_ttft_ms.p90 == pytest.approx(ref_quantile(0.9, merged) * 1000)


def test_engine_ranks_of_one_server_are_summed_like_replicas() -> None:
    body = vllm(running=2, kv=0.5, engine="0") + vllm(running=6, kv=0.7, engine="1")
    r = read(scrape(0.0, body))
    assert r.total.running == 8
    assert r.total.kv_usage == pytest.approx(0.6)


def test_a_replica_that_failed_before_has_no_growth_this_span() -> None:
    """Its lifetime counters are not the span's work: only the replica read both times counts."""
    before = scrape(10.0, vllm(prompt=100), b"<html>502 Bad Gateway</html>")
    now = scrape(12.0, vllm(prompt=300, running=1), vllm(prompt=1_000_000, running=2))
    r = read(now, before)
    assert r.total.prompt_tokens_per_s == (300 - 100) / 2.0
    assert r.total.running == 1 + 2


def test_failed_urls_are_reported_with_a_reason() -> None:
    now = scrape(12.0, vllm(running=1), b"\x00\x01\x02 binary")
    r = read(now)
    assert [url for url, _ in r.failed] == ["http://replica1:8000/metrics"]
    assert "binary" in r.failed[0][1]
    assert r.total.running == 1


def test_every_url_failed() -> None:
    r = read(scrape(1.0, b"", b"not metrics at all"))
    assert r.engine == "unknown"
    assert len(r.failed) == 2
    assert r.total.as_dict() == {}
    assert r.missing == ()


def test_split_per_model_by_model_name() -> None:
    before = scrape(10.0, vllm(model="small", prompt=100) + vllm(model="big", prompt=50, engine="1"))
    now = scrape(
        12.0,
        vllm(model="small", running=4, prompt=300) + vllm(model="big", running=1, prompt=450, engine="1"),
    )
    r = read(now, before)
    assert set(r.models) == {"small", "big"}
    assert r.models["small"].running == 4
    assert r.models["big"].running == 1
    assert r.models["small"].prompt_tokens_per_s == (300 - 100) / 2.0
    assert r.models["big"].prompt_tokens_per_s == (450 - 50) / 2.0
    assert r.total.running == 5
    assert r.total.prompt_tokens_per_s == (200 + 400) / 2.0


def test_split_per_model_by_model_label() -> None:
    """Triton labels its series `model`."""
    body = (
        'nv_inference_pending_request_count{model="a",version="1"} 2\n'
        'nv_inference_pending_request_count{model="b",version="1"} 5\n'
        'nv_inference_request_success{model="a",version="1"} 10\n'
    )
    r = read(scrape(0.0, body))
    assert r.engine == "triton"
    assert r.models["a"].waiting == 2
    assert r.models["b"].waiting == 5
    assert r.total.waiting == 7


def test_a_counter_born_during_the_span_counts_from_zero() -> None:
    """A new model's series appear on its first request: all of their value is the span's."""
    before = scrape(10.0, vllm(model="a", prompt=10))
    now = scrape(11.0, vllm(model="a", prompt=30) + vllm(model="b", prompt=7, engine="1"))
    r = read(now, before)
    assert r.models["b"].prompt_tokens_per_s == 7.0
    assert r.total.prompt_tokens_per_s == 20.0 + 7.0


def test_no_span_no_rates() -> None:
    r = read(scrape(10.0, vllm(prompt=5)), scrape(10.0, vllm(prompt=1)))
    assert r.total.prompt_tokens_per_s is None
    assert r.total.preemptions == 0.0


def test_ratio_without_queries_is_absent_not_zero() -> None:
    r = read(scrape(11.0, vllm(hits=5, queries=9)), scrape(10.0, vllm(hits=5, queries=9)))
    assert r.total.prefix_hit_rate is None
    assert "prefix_hit_rate" not in r.missing


def test_missing_lists_what_the_engine_does_not_expose() -> None:
    body = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 0\nllamacpp:prompt_tokens_total 10\n"
    r = read(scrape(0.0, body))
    assert r.engine == "llamacpp"
    # an older llama-server: no cached-token counter (so no prefix hit rate), no spec decoding
    assert r.missing == (
        "kv_usage",
        "prefix_hit_rate",
        "preemptions",
        "generation_tokens_per_s",
        "server_ttft_ms",
        "server_queue_ms",
        "spec_acceptance",
    )


def test_a_renamed_metric_is_read_under_its_old_name() -> None:
    r = read(
        scrape(
            0.0,
            'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nvllm:num_requests_running{model_name="m"} 1\n',
        )
    )
    assert r.total.kv_usage == 0.5


def test_unknown_engine_has_every_figure_missing() -> None:
    r = read(scrape(0.0, "http_requests_total 10\nprocess_cpu_seconds_total 4.2\n"))
    assert r.engine == "unknown"
    assert len(r.missing) == 10
    assert r.failed == ()


def test_engine_can_be_given() -> None:
    """Once recognised, the caller may keep the engine (a scrape where the server answers only
    process metrics is still that server's)."""
    r = read(scrape(0.0, "process_cpu_seconds_total 4.2\n"), engine="vllm")
    assert r.engine == "vllm"
    assert "running" in r.missing


def test_not_finite_values_are_ignored() -> None:
    body = 'vllm:num_requests_running{model_name="m"} NaN\nvllm:num_requests_waiting{model_name="m"} 3\n'
    r = read(scrape(0.0, body))
    assert r.total.running is None
    assert r.total.waiting == 3


def test_parse_failure_type_is_kept_in_the_scrape() -> None:
    s = scrape(0.0, b"\xff\xfe")
    assert isinstance(s.parts[0].result, Failed)
