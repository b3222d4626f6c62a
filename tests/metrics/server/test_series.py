"""The series file: a round written as a line and read back adds the same to a summary; a
hostile file is read around."""

from __future__ import annotations

from pathlib import Path

import orjson

from oxconsole.metrics.server.parse import parse
from oxconsole.metrics.server.scrapes import Gpu, Part, Scrape, read
from oxconsole.metrics.server.series import MAX_LINE, gpu_line, line, read_series, round_of, series_path
from oxconsole.metrics.server.spans import Round, ServerSummary
from tests.support.expositions import vllm

URL = "http://h:8000/metrics"


def scrape(t: float, body: str | bytes) -> Scrape:
    return Scrape(t, (Part(URL, parse(body if isinstance(body, bytes) else body.encode())),))


BODIES: list[tuple[float, str | bytes]] = [
    (0.0, vllm(running=1, kv=0.1, ttft=(0, 0, 0, 0))),
    (1.0, vllm(running=3, kv=0.5, prompt=100, hits=90, queries=100, ttft=(10, 10, 10, 10))),
    (2.0, b"not metrics at all\n" * 200),
    (4.0, vllm(running=2, kv=0.9, prompt=400, hits=90, queries=1000, preempt=2, ttft=(10, 10, 20, 20))),
]


def test_written_and_read_back_the_summary_is_the_same() -> None:
    live, replayed = ServerSummary(URL), ServerSummary(URL)
    before = None
    for t, body in BODIES:
        now = scrape(t, body)
        r = read(now, before)
        if r.answered:
            before = now
        live.add(Round.of(r))
        got = round_of(orjson.loads(orjson.dumps(line(1.7e9 + t, "x", r))))
        assert got is not None, line(1.7e9 + t, "x", r)
        endpoint, when, rnd = got
        assert (endpoint, when) == ("x", 1.7e9 + t)
        replayed.add(rnd)
    assert replayed.as_dict() == live.as_dict()
    assert live.as_dict()["failed_scrapes"] == 1


def test_the_line_speaks_the_contract() -> None:
    r = read(scrape(1.0, vllm(running=3, waiting=2, kv=0.42, prompt=50)), scrape(0.0, vllm()))
    d = line(1_700_000_000.0, "x", r)
    assert {k: d[k] for k in ("t", "endpoint", "engine", "running", "waiting", "kv_usage")} == {
        "t": 1_700_000_000.0,
        "endpoint": "x",
        "engine": "vllm",
        "running": 3.0,
        "waiting": 2.0,
        "kv_usage": 0.42,
    }, d
    assert d["prompt_tokens_per_s"] == 50.0 and d["span_s"] == 1.0, d
    assert "gpu" not in d and "answered" not in d, d


def test_gpu_lines_are_not_rounds() -> None:
    d = gpu_line(5.0, "http://g:9400/metrics", "GPU-1", Gpu(87.0, 40_000.0, None))
    assert d == {"t": 5.0, "gpu": "GPU-1", "url": "http://g:9400/metrics", "gpu_util": 87.0,
                 "gpu_mem_used_mb": 40_000.0}  # fmt: skip
    assert round_of(d) is None


def test_a_hostile_series_file_is_read_around(tmp_path: Path) -> None:
    good = line(1.0, "x", read(scrape(1.0, vllm(running=4))))
    p = tmp_path / "results.server.jsonl"
    with open(p, "wb") as f:
        f.write(orjson.dumps(good) + b"\n")
        f.write(b"x" * (MAX_LINE + 10) + b"\n")  # over-long
        f.write(b"\x00\xff binary\n")
        f.write(b'{"endpoint": 3, "t": "soon", "engine": []}\n')  # wrong kinds
        f.write(
            b'{"endpoint": "x", "t": 2, "engine": "vllm", "sums": {"counters": '
            b'{"prompt_tokens_per_s": [1]}}}\n'
        )
        f.write(b"[1, 2]\n")
        f.write(orjson.dumps(good))  # the last line, with no newline (a run that stopped mid-line)
    lines = list(read_series(p))
    rounds = [r for d in lines if (r := round_of(d)) is not None]
    assert len(rounds) == 2, lines
    assert all(r[2].gauges["running"] == 4.0 for r in rounds), rounds


def test_series_path_follows_the_journal() -> None:
    assert series_path(Path("runs/x/results.jsonl")) == Path("runs/x/results.server.jsonl")
    assert series_path(Path("a.b.jsonl")) == Path("a.b.server.jsonl")
    assert series_path(Path("plain")) == Path("plain.server.jsonl")
