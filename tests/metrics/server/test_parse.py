"""The parser: agreement with prometheus_client on every fixture, and no exception, ever, on
garbage, binary or oversized answers (each one a failed scrape with its reason)."""

from __future__ import annotations

import random
import time

import pytest

from oxconsole.metrics.server.parse import MAX_BODY, Exposition, Failed, parse
from tests.support.expositions import FIXTURES, fixture_text, oracle

NAMES = sorted(p.stem for p in FIXTURES.glob("*.prom"))


def samples(e: Exposition) -> list[tuple[str, tuple[tuple[str, str], ...], float]]:
    return sorted((n, tuple(sorted(labels.items())), v) for n, ss in e.series.items() for labels, v in ss)


@pytest.mark.parametrize("name", NAMES)
def test_reads_every_sample_prometheus_client_reads(name: str) -> None:
    text = fixture_text(name)
    got = parse(text.encode(), keep=None)
    assert isinstance(got, Exposition)
    want = sorted((n, tuple(sorted(labels.items())), v) for n, ss in oracle(text).items() for labels, v in ss)
    # prometheus_client renames a counter's samples written without `_total` (TGI's, Triton's,
    # llama.cpp's n_tokens_max, DCGM's energy) to name_total; the wire, and our parser, keep the name
    counters = {
        line.split()[2]
        for line in text.splitlines()
        if line.startswith("# TYPE") and line.endswith(" counter")
    }
    ours = sorted(
        (n + "_total" if n in counters and not n.endswith("_total") else n, labels, v)
        for n, labels, v in samples(got)
    )
    assert ours == want
    assert got.bad_lines == 0


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"", "empty"),
        (b"   \n\n", "empty"),
        (b"\x00" * 10, "binary"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"\xff\xfe\xfd metrics", "UTF-8"),
        (b"<html><head><title>502 Bad Gateway</title></head></html>", "no Prometheus samples"),
        (b'{"detail": "Not Found"}', "no Prometheus samples"),
        (b"# only comments\n# HELP x y\n# TYPE x gauge\n", "no Prometheus samples"),
        # llama.cpp build 7010 answered its metrics as one JSON string (llama.cpp issue 17384)
        (
            b'"# HELP llamacpp:prompt_tokens_total x\\n# TYPE llamacpp:prompt_tokens_total counter\\n"',
            "no Prometheus",
        ),
    ],
)
def test_garbage_is_a_failed_scrape(body: bytes, reason: str) -> None:
    got = parse(body)
    assert isinstance(got, Failed)
    assert reason in got.reason


def test_over_the_limit_is_a_failed_scrape() -> None:
    body = b"vllm:num_requests_running 1\n" * (MAX_BODY // 28 + 1)
    assert len(body) > MAX_BODY
    got = parse(body)
    assert isinstance(got, Failed) and "8 MiB" in got.reason


def test_up_to_the_limit_is_read() -> None:
    line = b"vllm:num_requests_running 1\n"
    body = line * (MAX_BODY // len(line))
    got = parse(body)
    assert isinstance(got, Exposition)
    assert got.lines == MAX_BODY // len(line)


def test_mostly_prose_is_given_up_on_early() -> None:
    body = b"\n".join(b"this is not a metric line %d" % i for i in range(200_000))
    got = parse(body)
    assert isinstance(got, Failed)
    assert got.reason == "no Prometheus samples in the answer"


def test_one_odd_line_is_skipped_not_fatal() -> None:
    """prometheus_client raises on it and loses the whole scrape."""
    text = fixture_text("vllm") + "this line is from a fork\n"
    got = parse(text.encode())
    assert isinstance(got, Exposition)
    assert got.bad_lines == 1
    assert got.series["vllm:num_requests_running"][0][1] == 7.0


def test_more_bad_lines_than_good_is_a_failed_scrape() -> None:
    body = b"a 1\nb 2\n" + b"x y z\n" * 3
    got = parse(body, keep=None)
    assert isinstance(got, Failed) and "3 of 5" in got.reason


def test_label_values_with_escapes_braces_and_commas() -> None:
    body = (
        b'm{a="x\\"y",b="back\\\\slash",c="new\\nline"} 1\nm{a="brace}",b="comma,here"} 2\nm{a="open{"} 3\n'
    )
    got = parse(body, keep=None)
    assert isinstance(got, Exposition)
    assert [dict(labels) for labels, _ in got.series["m"]] == [
        {"a": 'x"y', "b": "back\\slash", "c": "new\nline"},
        {"a": "brace}", "b": "comma,here"},
        {"a": "open{"},
    ]


def test_timestamps_exemplars_crlf_and_special_values() -> None:
    body = (
        b"a 1 1700000000000\r\n"
        b'b_bucket{le="0.5"} 3 # {trace_id="abc"} 0.4 1700000000.1\r\n'
        b"c NaN\nd +Inf\ne -Inf\nf 1e+06\n# EOF\n"
    )
    got = parse(body, keep=None)
    assert isinstance(got, Exposition)
    values = {n: ss[0][1] for n, ss in got.series.items()}
    assert values["a"] == 1 and values["b_bucket"] == 3 and values["f"] == 1e6
    assert values["c"] != values["c"]  # NaN
    assert values["d"] == float("inf") and values["e"] == float("-inf")


def test_unkept_series_are_named_but_not_stored() -> None:
    got = parse(fixture_text("vllm").encode())
    assert isinstance(got, Exposition)
    assert "python_gc_objects_collected_total" in got.names
    assert "python_gc_objects_collected_total" not in got.series
    assert "vllm:num_requests_running" in got.series


def mutations(rng: random.Random, base: bytes, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        b = bytearray(base)
        for _ in range(rng.randint(1, 40)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.4:
                b[i] = rng.randrange(256)
            elif op < 0.7:
                del b[i : i + rng.randint(1, 20)]
            else:
                b[i:i] = bytes(rng.choice(b'{}"=,\\ #\n\r\t.e+-') for _ in range(rng.randint(1, 5)))
        out.append(bytes(b))
    return out


def test_never_raises_on_random_or_mutated_bodies() -> None:
    rng = random.Random(7)
    bodies: list[bytes] = [rng.randbytes(rng.randint(0, 4096)) for _ in range(300)]
    bodies += [
        bytes(rng.choice(b'ab{}"=,\\ #\n1.5e') for _ in range(rng.randint(0, 2000))) for _ in range(300)
    ]
    for name in NAMES:
        bodies += mutations(rng, fixture_text(name).encode(), 60)
    for body in bodies:
        got = parse(body)
        assert isinstance(got, (Exposition, Failed))
        got_all = parse(body, keep=None)
        assert isinstance(got_all, (Exposition, Failed))


@pytest.mark.parametrize(
    "body",
    [
        b'm{a="' + b"b " * 200_000 + b" 1",  # a label block that never closes
        b"vllm:num_requests_running{" + b"a" * 1_000_000 + b"} 1",  # one long run of name characters
        b"vllm:num_requests_running{" + b'a="""' * 100_000 + b"} 1",
        b'vllm:num_requests_running{a="' + b"\\" * 1_000_001 + b'"} 1',
        b"vllm:num_requests_running{" + b"a=" * 300_000 + b'"} 1',
        b"m{" + b"{" * 1_000_000 + b" 1",
    ],
)
def test_no_line_makes_the_parser_backtrack(body: bytes) -> None:
    """Every case here is read (or refused) in linear time: ~0.01-0.09 s of CPU for a megabyte.
    A regex that backtracks (nested quantifiers took 1.5 s on a 40-byte line) takes minutes to
    ages on these, so the bound is a guard against that, not a speed claim (bench/ has those)."""
    t0 = time.process_time()
    parse(body)
    parse(body, keep=None)
    took = time.process_time() - t0
    assert took < 5.0, f"{len(body)} bytes took {took:.2f} s of CPU"
