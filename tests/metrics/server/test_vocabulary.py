"""The table: detection by the contract's prefixes, and names the parser keeps."""

from __future__ import annotations

import pytest

from oxconsole.metrics.server.vocabulary import (
    DCGM,
    ENGINES,
    FIGURES,
    GPU_FIGURES,
    WANTED,
    detect_engine,
    source_names,
)


@pytest.mark.parametrize(
    "name, engine",
    [
        ("vllm:num_requests_running", "vllm"),
        ("sglang:num_running_reqs", "sglang"),
        ("tgi_queue_size", "tgi"),
        ("llamacpp:requests_processing", "llamacpp"),
        ("trtllm_num_requests_running", "trtllm"),
        ("nv_inference_request_success", "triton"),
        ("DCGM_FI_DEV_GPU_UTIL", "unknown"),
        ("http_requests_total", "unknown"),
        ("nv_trt_llm_request_metrics", "unknown"),  # the TensorRT-LLM backend alone is not Triton's prefix
    ],
)
def test_detect_by_prefix(name: str, engine: str) -> None:
    assert detect_engine(["process_cpu_seconds_total", name]) == engine


def test_detect_prefers_the_contracts_order() -> None:
    assert detect_engine(["nv_inference_count", "trtllm_num_requests_running"]) == "trtllm"
    assert detect_engine(["tgi_queue_size", "vllm:num_requests_running"]) == "vllm"


def test_the_table_speaks_the_contracts_figures() -> None:
    assert [p.engine for p in ENGINES] == ["vllm", "sglang", "tgi", "llamacpp", "trtllm", "triton"]
    for p in ENGINES:
        assert set(p.figures) <= set(FIGURES), p.engine
        assert all(p.figures[f] for f in p.figures), p.engine
    assert set(DCGM.figures) == set(GPU_FIGURES)


def test_every_name_read_is_kept_by_the_parser() -> None:
    for p in (*ENGINES, DCGM):
        for sources in p.figures.values():
            for s in sources:
                assert set(source_names(s)) <= WANTED
