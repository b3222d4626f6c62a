"""`[prompts] tokenizer`: exact token counts with a Hugging Face tokenizer.json built here (a small
byte-level BPE trained on a few sentences, so words split into several tokens): synthetic prompts
of exactly N tokens, estimates counted with it, errors named with their key."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.engine.runner import Engine
from oxconsole.workload import Workload, WorkloadError, check_prompts, describe, iter_prompts
from tests.support.tokenizer import build_tokenizer
from tests.support.workloads import Sets, load_workload, write_workload

tokenizers = pytest.importorskip("tokenizers")


def n_tokens(tok: Any, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


@pytest.fixture
def tok(tmp_path: Path) -> Any:
    (tmp_path / "tok").mkdir()
    return build_tokenizer(tmp_path / "tok" / "tokenizer.json")


def tokenized(
    tmp_path: Path, source: Sets, sets: Sets | None = None, *, history: str | None = None
) -> Workload:
    """tests/workloads/sim_m.toml with answers of 4 tokens and prompts from `source` (the
    `prompts` table's keys) read with tok/tokenizer.json, then `sets`; `history`: the prompts file."""
    table = {"tokenizer": "tok/tokenizer.json", **source}
    return load_workload(
        "sim_m",
        tmp_path,
        {"sim.models.m.output_tokens": 4, "prompts": table, **(sets or {})},
        prompts=history,
    )


def test_synthetic_prompts_have_exactly_their_tokens(tmp_path: Path, tok: Any) -> None:
    uniform = {"dist": "uniform", "min": 1, "max": 300}
    w = tokenized(tmp_path, {"synthetic": {"count": 40, "prefix_tokens": 17, "input_tokens": uniform}})
    prompts = list(iter_prompts(w))
    for p in prompts:
        text = p.messages[0]["content"]
        assert p.input_tokens is not None and n_tokens(tok, text) == p.input_tokens
        assert 1 <= p.input_tokens - 17 <= 300
        assert "  " not in text
    # every prompt starts with the same prefix of (about) 17 tokens
    texts = [p.messages[0]["content"] for p in prompts]
    shared = os.path.commonprefix(texts)  # noqa: RUF071 - texts, not paths: by character is meant
    assert 15 <= n_tokens(tok, shared) <= 18
    lengths = [p.input_tokens for p in prompts]
    assert len(set(lengths)) > 10  # drawn, not one length


def test_fixed_lengths_and_a_tokenizer_without_prefix(tmp_path: Path, tok: Any) -> None:
    w = tokenized(tmp_path, {"synthetic": {"count": 5, "input_tokens": 64}})
    assert [n_tokens(tok, p.messages[0]["content"]) for p in iter_prompts(w)] == [64] * 5


async def test_estimates_are_counted_with_the_tokenizer(tmp_path: Path, tok: Any) -> None:
    items = ["the quick answer to everything", "gentle rapid careful early final green heavy world"]
    w = tokenized(tmp_path, {"items": items}, {"sim.models.m.usage": False})
    e = Engine(w, results_path=w.results_path(), total_expected=2)
    out = await e.run()
    assert out.exit_code == 0
    recs = [orjson.loads(x) for x in w.results_path().read_bytes().splitlines()]
    got = {r["id"]: (r["input_tokens"], r["tokens_source"]) for r in recs}
    assert got == {f"item-{i}": (n_tokens(tok, t), "estimate") for i, t in enumerate(items)}
    assert any(n_tokens(tok, t) != (len(t) + 3) // 4 for t in items), [t for t in items][
        :5
    ]  # not the 4-characters guess


def test_token_budget_reserves_counted_tokens(tmp_path: Path, tok: Any) -> None:
    from oxconsole.engine.dispatch import Dispatcher
    from oxconsole.engine.router import Router

    w = tokenized(tmp_path, {"items": ["simple quick bright"]})
    p = next(iter_prompts(w))
    d = Dispatcher(w, Router(w.models, w.routing, seed=1), start=lambda *a: None, set_state=lambda s: None)
    assert d.token_estimate(p) == n_tokens(tok, "simple quick bright") + 256


def test_validate_names_the_tokenizer(tmp_path: Path, tok: Any) -> None:
    w = tokenized(tmp_path, {"synthetic": {"count": 2, "input_tokens": 8}})
    text = describe(w, check_prompts(w))
    assert "tokenizer: " in text and "exactly their tokens" in text


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("nope/tokenizer.json", 'prompts.tokenizer: expected an existing tokenizer.json file, got "nope/'),
        ("bad.json", "prompts.tokenizer: expected a Hugging Face tokenizer.json file ("),
        (3, "prompts.tokenizer: expected a path to a tokenizer.json file, got 3"),
    ],
)
def test_tokenizer_errors_name_the_key(tmp_path: Path, value: str | int, fragment: str) -> None:
    (tmp_path / "bad.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(WorkloadError, match=re.escape(fragment)):
        tokenized(tmp_path, {"items": ["x"]}, {"prompts.tokenizer": value})


def test_without_the_package_exit_2_says_how_to_install(tmp_path: Path, tok: Any) -> None:
    table = {"tokenizer": "tok/tokenizer.json", "items": ["x"]}
    write_workload(
        "sim_m",
        tmp_path,
        {"sim.models.m.output_tokens": 4, "prompts": table, "output.results": None},
        file="w.toml",
    )
    code = (
        "import sys; sys.modules['tokenizers'] = None\n"
        "from oxconsole.cli.main import main\n"
        "sys.exit(main(['validate', 'w.toml']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert (
        "prompts.tokenizer: expected the tokenizers package (pip install 'oxconsole[tokenizers]')" in r.stderr
    )


async def test_a_sessions_history_is_counted_turn_by_turn(tmp_path: Path, tok: Any) -> None:
    turns = ["simple quick bright", "the model reads a token stream"]
    history = orjson.dumps({"id": "s", "turns": turns}).decode() + "\n"
    w = tokenized(tmp_path, {"file": "prompts.jsonl"}, {"sim.models.m.usage": False}, history=history)
    out = await Engine(w, results_path=w.results_path(), total_expected=2).run()
    assert out.exit_code == 0
    recs = {r["id"]: r for r in map(orjson.loads, w.results_path().read_bytes().splitlines())}
    assert recs["s#t1"]["input_tokens"] == n_tokens(tok, turns[0])
    answer = recs["s#t1"]["text"]
    assert recs["s#t2"]["input_tokens"] == n_tokens(tok, turns[0]) + n_tokens(tok, answer) + n_tokens(
        tok, turns[1]
    )
