"""Workloads from real sources: length distributions and a shared prefix for synthetic prompts,
ShareGPT files, OpenAI Batch input files, run end to end over real HTTP against the simulator."""

from __future__ import annotations

import itertools
import re
import statistics
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import Engine
from oxconsole.journal.batchout import write_batch_output
from oxconsole.workload import (
    Workload,
    WorkloadError,
    check_prompts,
    describe,
    iter_prompts,
    resolve_headers,
)
from oxconsole.workload import load_workload as load_file
from oxconsole.workload.prompts import jsonarray
from tests.support import oxconsole_here
from tests.support.http import chat_server, ok_answer
from tests.support.workloads import Sets, load_workload, toml_value, write_workload


def journal(w: Workload) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in w.results_path().read_bytes().splitlines() if line.strip()]


async def run(w: Workload) -> list[dict[str, Any]]:
    e = Engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    out = await e.run()
    assert out.exit_code == 0, out
    return journal(w)


# --------------------------------------------------------------------------------------------
# Synthetic lengths and prefix
# --------------------------------------------------------------------------------------------


def _dists(
    tmp_path: Path,
    seed: int = 1,
    count: int = 300,
    prefix: int = 0,
    output: dict[str, Any] | None = None,
    sets: Sets | None = None,
    file: str = "workload.toml",
) -> Workload:
    """tests/workloads/sim_dists.toml with its seed, count, prefix and output distribution set."""
    synthetic: dict[str, Any] = {"prompts.synthetic.count": count, "prompts.synthetic.prefix_tokens": prefix}
    if output is not None:
        synthetic["prompts.synthetic.output_tokens"] = output
    return load_workload("sim_dists", tmp_path, {"run.seed": seed, **synthetic, **(sets or {})}, file=file)


def test_lengths_drawn_within_bounds_and_reproducible_by_seed(tmp_path: Path) -> None:
    a = list(iter_prompts(_dists(tmp_path)))
    b = list(iter_prompts(_dists(tmp_path)))
    c = list(iter_prompts(_dists(tmp_path, seed=2)))
    assert [(p.messages, p.max_tokens) for p in a] == [(p.messages, p.max_tokens) for p in b]
    assert [p.max_tokens for p in a] != [p.max_tokens for p in c]
    outs = [p.max_tokens or 0 for p in a]
    assert all(5 <= x <= 60 for x in outs), [x for x in outs if not (5 <= x <= 60)][:5]
    assert 36 < statistics.mean(outs) < 44
    ins = [p.input_chars / 4 for p in a]
    assert min(ins) >= 20 and max(ins) <= 410
    assert 100 < statistics.mean(ins) < 140
    assert len(set(outs)) > 10  # drawn, not fixed


def test_uniform_and_repeat_passes_draw_the_same_lengths(tmp_path: Path) -> None:
    uniform = {"dist": "uniform", "min": 8, "max": 12}
    w = _dists(tmp_path, count=50, output=uniform)
    w2 = _dists(tmp_path, count=50, output=uniform, sets={"prompts.repeat": 2}, file="w2.toml")
    one = [p.max_tokens for p in iter_prompts(w)]
    two = [p.max_tokens for p in iter_prompts(w2)]
    assert set(one) == {8, 9, 10, 11, 12}
    assert two == one + one


def test_prefix_is_shared_and_comes_first(tmp_path: Path) -> None:
    ps = list(iter_prompts(_dists(tmp_path, count=20, prefix=50)))
    texts = [p.messages[0]["content"] for p in ps]
    prefix = texts[0][:190]
    assert all(t.startswith(prefix) for t in texts), [t for t in texts if not t.startswith(prefix)][:5]
    assert len(set(texts)) == 20
    assert all(p.input_chars >= 50 * 4 + 20 * 4 for p in ps), [
        p for p in ps if not (p.input_chars >= 50 * 4 + 20 * 4)
    ][:5]


def test_a_million_synthetic_prompts_stream_in_constant_memory(tmp_path: Path) -> None:
    """Drawing prompts holds nothing per prompt: memory after 3,000 is what it was after 1,000
    (keeping each prompt would add ~2,000 x 300 bytes), and a million is never made up front."""
    w = _dists(tmp_path, count=1_000_000)
    tracemalloc.start()
    try:
        at: dict[int, int] = {}
        for i, p in enumerate(itertools.islice(iter_prompts(w), 3_000), 1):
            assert p.max_tokens
            if i in (1_000, 3_000):
                at[i] = tracemalloc.get_traced_memory()[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak
    assert at[3_000] - at[1_000] < 100_000, at


def test_every_distribution_error_is_reported_at_once(tmp_path: Path) -> None:
    synthetic = {
        "count": 3,
        "prefix_tokens": -1,
        "input_tokens": {"dist": "gauss", "mean": -3, "stdev": 1, "min": 10, "max": 5},
        "output_tokens": {"dist": "uniform", "mean": 3, "min": 16},
    }
    with pytest.raises(WorkloadError) as e:
        load_workload("sim_m", tmp_path, {"prompts": {"synthetic": synthetic}})
    text = str(e.value)
    for fragment in (
        'input_tokens.dist: expected "normal" | "lognormal" | "uniform", got "gauss"',
        "input_tokens.mean: expected a number > 0",
        'input_tokens.stdev: expected a key of a length distribution (did you mean "stddev"?)',
        "input_tokens.max: expected an integer >= min (10), got 5",
        'output_tokens.mean: expected nothing: a "uniform" distribution takes min and max only',
        "output_tokens.max: expected an integer >= 1",
        "prefix_tokens: expected an integer >= 0, got -1",
    ):
        assert fragment in text, text
    assert len(e.value.errors) == 7


def test_mean_outside_min_max_and_wrong_types(tmp_path: Path) -> None:
    synthetic = {
        "count": 3,
        "input_tokens": {"dist": "normal", "mean": 500, "stddev": 5, "max": 100},
        "output_tokens": "lots",
    }
    with pytest.raises(WorkloadError) as e:
        load_workload("sim_m", tmp_path, {"prompts": {"synthetic": synthetic}})
    assert "input_tokens.mean: expected a number between min (1) and max (100), got 500" in str(e.value)
    assert "output_tokens: expected an integer >= 1 or a distribution" in str(e.value)


def test_validate_describes_the_drawn_lengths(tmp_path: Path) -> None:
    w = _dists(tmp_path, count=1000, prefix=30)
    text = describe(w, check_prompts(w))
    assert "lognormal(mean 120, stddev 60, 20..400) input tokens after a shared prefix of 30" in text
    assert "max_tokens normal(mean 40, stddev 10, 5..60)" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("max_tokens: mean"))
    assert "p50" in line and "p99" in line and "min" in line
    stats = check_prompts(w).output_lengths
    assert stats is not None and stats.count == 1000
    assert stats.min >= 5 and stats.max <= 60 and stats.min <= stats.p50 <= stats.p99 <= stats.max
    drawn = sorted(p.max_tokens or 0 for p in iter_prompts(w))
    assert stats.p50 == drawn[499] and stats.max == drawn[-1]
    inputs = check_prompts(w).input_lengths
    assert inputs is not None and inputs.min >= 50  # the prefix counts


async def test_drawn_max_tokens_reach_the_server(tmp_path: Path) -> None:
    w = _dists(tmp_path, count=60, prefix=20, output={"dist": "uniform", "min": 3, "max": 30})
    recs = await run(w)
    wanted = {p.id: p.max_tokens for p in iter_prompts(w)}
    assert len(recs) == 60
    # the simulator answers with exactly max_tokens tokens (its own output_tokens is larger)
    assert {r["id"]: r["output_tokens"] for r in recs} == wanted
    assert all(r["tokens_source"] == "usage" for r in recs), [
        r for r in recs if r["tokens_source"] != "usage"
    ][:5]
    assert min(r["input_tokens"] for r in recs) >= 20 + 20


# --------------------------------------------------------------------------------------------
# ShareGPT
# --------------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _conv(cid: object, *turns: tuple[str, str]) -> dict[str, Any]:
    return {"id": cid, "conversations": [{"from": f, "value": v} for f, v in turns]}


def _sharegpt(tmp_path: Path, data: bytes, name: str = "sg.json") -> Workload:
    (tmp_path / name).write_bytes(data)
    return load_workload("sim_dists", tmp_path, {"prompts": {"file": name, "format": "sharegpt"}})


CONVS = [
    _conv("a", ("system", "Be nice."), ("human", 'Hi [there] {x} "q" \\'), ("gpt", "x" * 40)),
    _conv("b", ("gpt", "no question here")),
    _conv(7, ("human", "second"), ("gpt", "y" * 9), ("human", "later"), ("gpt", "z" * 400)),
]


@pytest.mark.parametrize("shape", ["array", "array-small-reads", "jsonl"])
def test_sharegpt_json_and_jsonl(tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if shape == "jsonl":
        data = b"\n".join(orjson.dumps(c) for c in CONVS) + b"\n"
    else:
        data = orjson.dumps(CONVS, option=orjson.OPT_INDENT_2)
    if shape == "array-small-reads":
        monkeypatch.setattr(jsonarray, "READ_SIZE", 3)  # objects and escapes cut across reads
    w = _sharegpt(tmp_path, data)
    ps = list(iter_prompts(w))
    assert [p.id for p in ps] == ["a", "7"]
    assert ps[0].messages == [{"role": "user", "content": 'Hi [there] {x} "q" \\'}]
    assert [p.max_tokens for p in ps] == [10, 3]  # the first answer, ~4 characters a token
    stats = check_prompts(w)
    assert stats.count == 2 and stats.skipped == 1
    text = describe(w, stats)
    assert "ShareGPT file" in text and "skipped: 1 conversations" in text and "max_tokens: mean 6.5" in text


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b'[{"conversations": []}, 3]', "entry 2: expected a JSON object"),
        (b'[{"conversations": [{"from": "human"}]}]', "entry 1: conversations.0: expected an object"),
        (b'[{"conversations": "hi"}]', "entry 1: conversations: expected an array"),
        (
            b'[{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]}',
            "ends inside",
        ),
        (b'{"conversations": 1}\n{broken\n', "line 1: conversations"),
        (
            b"[" + b",".join([orjson.dumps(_conv("d", ("human", "x"), ("gpt", "y")))] * 2) + b"]",
            'entry 2: id: expected a unique id (entry 1 has the same id), got "d"',
        ),
        (b"[]", "at least one prompt"),
    ],
)
def test_sharegpt_bad_entries_are_named(tmp_path: Path, data: bytes, fragment: str) -> None:
    w = _sharegpt(tmp_path, data)
    with pytest.raises(WorkloadError, match=re.escape(fragment)):
        check_prompts(w)


def test_sharegpt_array_streams_in_constant_memory(tmp_path: Path) -> None:
    # few long conversations rather than many short ones: the same 10 MB to stream, and tracemalloc
    # (which slows every allocation) has a tenth of the objects to follow
    conv = orjson.dumps(_conv(None, ("human", "q " * 1000), ("gpt", "a " * 4000)))
    (tmp_path / "big.json").write_bytes(b"[" + b",\n".join([conv] * 1_000) + b"]")  # ~10 MB
    w = load_workload("sim_dists", tmp_path, {"prompts": {"file": "big.json", "format": "sharegpt"}})
    tracemalloc.start()
    try:
        n = sum(1 for _ in iter_prompts(w))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert n == 1_000
    assert peak < 4_000_000, peak  # a read (1 MiB) and what is left of the one before


@pytest.mark.slow
async def test_sharegpt_example_runs_against_the_simulator(tmp_path: Path) -> None:
    results = f"output.results={toml_value(str(tmp_path / 'results.jsonl'))}"
    w = load_file(EXAMPLES / "sharegpt.toml", (results,))  # its prompts file beside it, its journal here
    recs = await run(w)
    assert len(recs) == 35
    wanted = {p.id: p.max_tokens for p in iter_prompts(w)}
    assert {r["id"]: r["output_tokens"] for r in recs} == wanted
    assert "sg-0006#1" not in wanted  # no human turn: skipped


# --------------------------------------------------------------------------------------------
# OpenAI Batch input and output
# --------------------------------------------------------------------------------------------


def _line(cid: str, model: str = "m", **body: Any) -> dict[str, Any]:
    b = {"model": model, "messages": [{"role": "user", "content": f"q {cid}"}], **body}
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": b}


def _batch_file(tmp_path: Path, lines: list[Any]) -> None:
    data = b"".join((x if isinstance(x, bytes) else orjson.dumps(x)) + b"\n" for x in lines)
    (tmp_path / "batch.jsonl").write_bytes(data)


BATCH = {"prompts": {"file": "batch.jsonl", "format": "openai-batch"}}
"""The prompts as OpenAI Batch input lines, in batch.jsonl."""


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (
            _line("a", model="gpt-4o"),
            'line 2: body.model: expected the name of a model in [[models]], got "gpt-4o"',
        ),
        (_line("a", model="mm"), '(did you mean "m"?)'),
        ({**_line("a"), "url": "/v1/embeddings"}, 'line 2: url: expected "/v1/chat/completions"'),
        ({**_line("a"), "method": "GET"}, 'line 2: method: expected "POST", got "GET"'),
        (
            {k: v for k, v in _line("a").items() if k != "custom_id"},
            "line 2: custom_id: expected a non-empty",
        ),
        ({**_line("a"), "body": []}, "line 2: body: expected a JSON object"),
        (_line("a", messages="hi"), "line 2: body.messages: expected a non-empty array"),
        (b"{nope", "line 2: expected a JSON object, got invalid JSON"),
        (_line("first"), 'line 2: id: expected a unique id (line 1 has the same id), got "first"'),
    ],
)
def test_batch_bad_lines_are_named(tmp_path: Path, line: Any, fragment: str) -> None:
    _batch_file(tmp_path, [_line("first"), line])
    w = load_workload("sim_dists", tmp_path, BATCH)
    with pytest.raises(WorkloadError, match=re.escape(fragment)):
        check_prompts(w)


def test_batch_output_needs_a_batch_file(tmp_path: Path) -> None:
    with pytest.raises(
        WorkloadError, match=re.escape("output.batch_output: expected a prompts file of format")
    ):
        load_workload("sim_m", tmp_path, {"output.batch_output": "o.jsonl"})


async def test_batch_bodies_are_sent_as_given(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        answer = {
            "choices": [{"message": {"content": "fine"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }
        return web.json_response(answer)

    given = [
        _line("x1", max_tokens=12, temperature=0.3, seed=9, response_format={"type": "json_object"}),
        _line("x2", model="m2", max_completion_tokens=5, stream_options={"include_usage": False}),
    ]
    _batch_file(tmp_path, given)
    async with chat_server(handler) as url:
        w = load_workload(
            "sim_dists",
            tmp_path,
            {
                "run": {"stream": False},
                "endpoints.default.base_url": f"{url}/v1",
                "models": [{"name": "m", "max_tokens": 999, "temperature": 1.5}, {"name": "m2"}],
                **BATCH,
                "sim": None,
            },
        )
        recs = await run(w)
    assert sorted(r["id"] for r in recs) == ["x1", "x2"]
    by_model = {b["model"]: b for b in seen}
    assert by_model["m"] == {**given[0]["body"], "stream": False}  # the model's max_tokens/temperature unused
    assert by_model["m2"] == {k: v for k, v in given[1]["body"].items() if k != "stream_options"} | {
        "stream": False
    }
    assert {r["id"]: r["model"] for r in recs} == {"x1": "m", "x2": "m2"}


def test_batch_run_writes_output_and_errors_files(tmp_path: Path) -> None:
    _batch_file(tmp_path, [_line("ok-1"), _line("bad-1", model="broken"), _line("ok-2", max_tokens=3)])
    write_workload(
        "sim_dists",
        tmp_path,
        {
            **BATCH,
            "models": [{"name": "m"}, {"name": "broken"}],
            "sim.models.broken": {"error_rate": 1.0},
            "retry.max_attempts": 1,
            "output": {"results": "out/results.jsonl", "batch_output": "out/{name}-batch.jsonl"},
        },
        file="w.toml",
    )
    r = oxconsole_here("w.toml", "--headless", cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # a request failed
    assert "batch output: 2 answers" in r.stderr
    out = [orjson.loads(x) for x in (tmp_path / "out/w-batch.jsonl").read_bytes().splitlines()]
    errs = [orjson.loads(x) for x in (tmp_path / "out/w-batch.errors.jsonl").read_bytes().splitlines()]
    assert sorted(x["custom_id"] for x in out) == ["ok-1", "ok-2"]
    for x in out:
        assert x["id"].startswith("batch_req_") and x["error"] is None
        resp = x["response"]
        assert resp["status_code"] == 200 and resp["request_id"].startswith("req_")
        body = resp["body"]
        assert body["object"] == "chat.completion" and body["model"] == "m"
        assert isinstance(body["choices"][0]["message"]["content"], str)
        assert (
            body["usage"]["total_tokens"]
            == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
        )
    assert (
        next(x for x in out if x["custom_id"] == "ok-2")["response"]["body"]["usage"]["completion_tokens"]
        == 3
    )
    assert [x["custom_id"] for x in errs] == ["bad-1"]
    assert errs[0]["response"]["status_code"] == 500 and errs[0]["response"]["body"]["error"]["message"]


def test_batch_output_keeps_the_last_record_of_a_resumed_request(tmp_path: Path) -> None:
    journal_path = tmp_path / "j.jsonl"
    recs = [
        {"id": "a", "status": "error", "error": "timeout", "error_detail": "no answer"},
        {"id": "b", "status": "ok", "text": "B", "input_tokens": 2, "output_tokens": 1, "model": "m"},
        {"id": "a", "status": "ok", "text": "A", "input_tokens": 2, "output_tokens": 1, "model": "m"},
        {"id": "c", "status": "error", "error": "timeout", "error_detail": "no answer"},
    ]
    journal_path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs) + b'{"id": "cut')
    assert write_batch_output(journal_path, tmp_path / "o.jsonl", "run") == (2, 1)
    out = [orjson.loads(x) for x in (tmp_path / "o.jsonl").read_bytes().splitlines()]
    assert [(x["custom_id"], x["response"]["body"]["choices"][0]["message"]["content"]) for x in out] == [
        ("b", "B"),
        ("a", "A"),
    ]
    err = orjson.loads((tmp_path / "o.errors.jsonl").read_bytes())
    assert err["response"] is None and err["error"] == {"code": "timeout", "message": "no answer"}


def test_batch_example_validates() -> None:
    from oxconsole.workload import load_workload

    w = load_workload(EXAMPLES / "batch.toml")
    stats = check_prompts(w)
    assert stats.count == 6 and stats.models_referenced == {"small", "large"}
    assert "OpenAI Batch input file" in describe(w, stats)


# --------------------------------------------------------------------------------------------
# extra_body, ignore_eos, endpoint headers
# --------------------------------------------------------------------------------------------

SECRET = "org-SECRET-4242-value"


async def test_extra_body_ignore_eos_and_headers_reach_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_ORG_ID", SECRET)
    seen: list[tuple[dict[str, str], dict[str, Any]]] = []  # header names lower-cased

    async def handler(request: web.Request) -> web.Response:
        seen.append(({k.lower(): v for k, v in request.headers.items()}, await request.json()))
        if len(seen) == 1:  # an error whose detail echoes the header value
            return web.json_response({"error": {"message": f"bad org {SECRET}"}}, status=400)
        return ok_answer()

    async with chat_server(handler) as url:
        w = load_workload(
            "sim_dists",
            tmp_path,
            {
                "run": {"stream": False, "concurrency": 1},
                "endpoints.default": {
                    "base_url": f"{url}/v1",
                    "headers": {"X-Team": "evals"},
                    "headers_env": {"X-Org": "TEST_ORG_ID"},
                },
                "models": [
                    {
                        "name": "m",
                        "ignore_eos": True,
                        "extra_body": {"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}},
                    }
                ],
                "prompts": {"items": ["a", "b"]},
                "sim": None,
            },
        )
        e = Engine(w, results_path=w.results_path(), total_expected=2)
        out = await e.run()
    assert len(seen) == 2
    for headers, body in seen:
        assert headers["x-team"] == "evals" and headers["x-org"] == SECRET
        assert body["ignore_eos"] is True and body["top_k"] == 20
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
    recs = journal(w)
    assert sorted(r["status"] for r in recs) == ["error", "ok"]
    everything = w.results_path().read_text() + orjson.dumps(out.summary).decode() + "".join(out.warnings)
    assert SECRET not in everything
    assert "bad org ***" in everything


def test_header_errors_and_missing_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = {
        "endpoints.default.headers": {"Bad Name": "x", "X-A": 3},
        "endpoints.default.headers_env": {"X-Org": "not a name"},
        "models.0": {"name": "m", "extra_body": {"model": "other", "top_k": 2}, "ignore_eos": "yes"},
        "prompts.items": ["a"],
    }
    with pytest.raises(WorkloadError) as e:
        load_workload("minimal", tmp_path, bad)
    text = str(e.value)
    assert len(e.value.errors) == 5, text
    assert 'headers."Bad Name": expected a header name' in text
    assert "headers.X-A: expected a header value (string), got 3" in text
    assert "headers_env.X-Org: expected the NAME of an environment variable" in text
    assert "extra_body.model: expected a field other than model" in text
    assert "ignore_eos: expected true or false" in text
    monkeypatch.delenv("TEST_NO_SUCH_VAR", raising=False)
    env = {"endpoints.default.headers_env": {"X-Org": "TEST_NO_SUCH_VAR"}}
    w = load_workload("sim_dists", tmp_path, {"prompts": {"items": ["a"]}, **env})
    with pytest.raises(WorkloadError, match="X-Org: environment variable TEST_NO_SUCH_VAR is not set"):
        resolve_headers(w, "default")
    monkeypatch.setenv("TEST_NO_SUCH_VAR", SECRET)
    text = describe(w, check_prompts(w))
    assert "headers X-Org from $TEST_NO_SUCH_VAR (set)" in text and SECRET not in text
