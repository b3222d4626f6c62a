"""--resume with nothing changed works for every prompt source: a run, its last records dropped
from the journal (as a stop would leave it), then the same workload loaded afresh and resumed
sends exactly the dropped ids, once each. The fingerprint written with the first run and the one
made for the resume must agree in form (lists, not tuples; dicts, not dataclasses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.journal import ok_ids
from oxconsole.workload import check_prompts
from oxconsole.workload import load_workload as load_file
from tests.support import engine_for, read_jsonl, run
from tests.support.workloads import Sets, load_workload

SIM: Sets = {"run": {"concurrency": 4, "seed": 3}, "sim.models.m.output_tokens": 4}
"""tests/workloads/sim_m.toml at 4 in flight, seed 3, answers of 4 tokens; the test sets the prompts."""

DIST = {"dist": "normal", "mean": 40, "stddev": 8, "min": 8, "max": 80}


def _batch(tmp_path: Path) -> None:
    lines = [
        {"custom_id": f"b{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4}}
        for i in range(6)
    ]  # fmt: skip
    (tmp_path / "batch.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def _sharegpt(tmp_path: Path) -> None:
    convs = [
        {
            "id": f"c{i}",
            "conversations": [{"from": "human", "value": f"hi {i}"}, {"from": "gpt", "value": "k"}],
        }
        for i in range(6)
    ]
    (tmp_path / "sg.json").write_bytes(orjson.dumps(convs))


def _jsonl(tmp_path: Path, ids: bool) -> None:
    rows = [({"id": f"p{i}"} if ids else {}) | {"prompt": f"question {i}"} for i in range(6)]
    (tmp_path / "prompts.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def _turns(tmp_path: Path) -> None:
    rows = [{"id": f"s{i}", "turns": ["first", "second"]} for i in range(3)]
    (tmp_path / "prompts.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def _tokenizer(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    from tests.support.tokenizer import build_tokenizer

    (tmp_path / "tok").mkdir()
    build_tokenizer(tmp_path / "tok" / "tokenizer.json")


SYNTHETIC = {"count": 6, "input_tokens": 20, "output_tokens": 4}

SOURCES: dict[str, tuple[Sets, Any]] = {
    "file with ids": ({"file": "prompts.jsonl"}, lambda p: _jsonl(p, True)),
    "file of line numbers": ({"file": "prompts.jsonl"}, lambda p: _jsonl(p, False)),
    "items": ({"items": ["a", "b", "c", "d", "e"]}, None),
    "synthetic ints": ({"synthetic": SYNTHETIC}, None),
    "synthetic distributions": (
        {"synthetic": {"count": 6, "input_tokens": DIST, "output_tokens": DIST}},
        None,
    ),
    "synthetic prefix": ({"synthetic": {**SYNTHETIC, "prefix_tokens": 9}}, None),
    "sharegpt": ({"file": "sg.json", "format": "sharegpt"}, _sharegpt),
    "openai-batch": ({"file": "batch.jsonl", "format": "openai-batch"}, _batch),
    "sessions": ({"file": "prompts.jsonl"}, _turns),
    "repeat": ({"items": ["a", "b", "c"], "repeat": 2}, None),
    "tokenizer": (
        {
            "tokenizer": "tok/tokenizer.json",
            "synthetic": {"count": 6, "input_tokens": DIST, "prefix_tokens": 8},
        },
        _tokenizer,
    ),
}


@pytest.mark.parametrize("source", list(SOURCES))
async def test_resume_with_nothing_changed(tmp_path: Path, source: str) -> None:
    prompts, setup = SOURCES[source]
    if setup is not None:
        setup(tmp_path)
    w = load_workload("sim_m", tmp_path, {**SIM, "prompts": prompts})
    first = await run(w)
    assert first.exit_code == 0, first
    results = w.results_path()
    records = read_jsonl(results)
    everything = sorted(r["id"] for r in records)
    kept = records[:-2]
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))

    again = load_file(w.path)  # a new process: nothing carried over in memory
    done, _ = ok_ids(results)
    total = check_prompts(again).total_requests
    engine = engine_for(again, skip_ids=done, total_expected=None if total is None else total - len(done))
    second = await run(again, engine)
    assert second.exit_code == 0, (source, engine.warnings)
    ids = sorted(r["id"] for r in read_jsonl(results))
    if source == "sessions":  # an unfinished session is sent again from turn 1 (its history)
        touched = {r["id"].split("#")[0] for r in records[-2:]}
        want = sorted([r["id"] for r in kept] + [i for i in everything if i.split("#")[0] in touched])
    else:
        want = everything
    assert ids == want, f"{source}: after resume {ids}, expected {want}"
