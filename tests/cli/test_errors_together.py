"""Every error at once, everywhere: `validate` says the unset `api_key_env` beside the file's other
errors, `sweep --over` names a misspelt key with a did-you-mean beside a bad `--point-duration`,
and `--set models.NAME.KEY` picks a model by its name."""

from __future__ import annotations

from pathlib import Path

from tests.support import oxconsole_here
from tests.support.workloads import Sets, write_workload

BAD: Sets = {
    "run.concurrency": "fifty",
    "endpoints.default": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "OXC_TEST_UNSET_KEY"},
    "prompts.items": ["a"],
    "output.results": None,
}
"""tests/workloads/minimal.toml with a bad concurrency and an unset key variable."""

GOOD: Sets = {"models": [{"name": "small"}, {"name": "big"}], "prompts.items": ["a"], "output.results": None}
"""tests/workloads/minimal.toml with two models, "small" and "big"."""


def write(tmp_path: Path, sets: Sets) -> None:
    write_workload("minimal", tmp_path, sets, file="w.toml")


def test_validate_names_the_unset_key_beside_other_errors(tmp_path: Path) -> None:
    write(tmp_path, BAD)
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path, env={"OXC_TEST_UNSET_KEY": ""})
    assert r.returncode == 2, r.stderr
    assert 'run.concurrency: expected an integer >= 1, got "fifty"' in r.stderr, r.stderr
    assert "endpoints.default.api_key_env: environment variable OXC_TEST_UNSET_KEY is not set" in r.stderr


def test_validate_names_the_unset_key_beside_a_bad_prompts_file(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text("not json\n")
    write(tmp_path, {**BAD, "run.concurrency": 2, "prompts": {"file": "p.jsonl"}})
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path, env={"OXC_TEST_UNSET_KEY": ""})
    assert r.returncode == 2, r.stderr
    assert "p.jsonl: line 1: expected a JSON object" in r.stderr, r.stderr
    assert "OXC_TEST_UNSET_KEY is not set" in r.stderr, r.stderr


def test_set_a_model_by_its_name(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    r = oxconsole_here("validate", "w.toml", "--set", "models.big.weight=3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "big    endpoint default, weight 3 (75%)" in r.stdout, r.stdout
    r = oxconsole_here("validate", "w.toml", "--set", "models.bigg.weight=3", cwd=tmp_path)
    assert r.returncode == 2 and 'got "bigg" (did you mean "big"?)' in r.stderr, r.stderr


def test_sweep_over_misspelt_with_a_bad_point_duration(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    r = oxconsole_here(
        "sweep", "w.toml", "--over", "concurency=1,2", "--point-duration", "soon", cwd=tmp_path
    )
    assert r.returncode == 2, r.stderr
    assert 'got concurency (did you mean "concurrency"?)' in r.stderr, r.stderr
    assert "--point-duration: expected a duration > 0" in r.stderr, r.stderr


def test_a_prompts_file_tells_every_bad_line(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text(
        '{"id": "a", "prompt": "x"}\nnot json\n{"id": "a", "prompt": "y"}\n{"id": "c", "prompt": 5}\n'
    )
    write(tmp_path, {**GOOD, "prompts": {"file": "p.jsonl"}})
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    for said in (
        "p.jsonl: line 2: expected a JSON object, got invalid JSON",
        'p.jsonl: line 3: id: expected a unique id (line 1 has the same id), got "a"',
        "p.jsonl: line 4: prompt: expected a non-empty string, got 5",
    ):
        assert said in r.stderr, (said, r.stderr)


def test_a_batch_file_tells_an_unknown_model_a_delete_and_a_repeated_custom_id_together(
    tmp_path: Path,
) -> None:
    import orjson

    def line(cid: str, model: str = "small", method: str = "POST") -> bytes:
        body = {"model": model, "messages": [{"role": "user", "content": f"q {cid}"}]}
        return orjson.dumps({"custom_id": cid, "method": method, "url": "/v1/chat/completions", "body": body})

    lines = [
        line("a"),
        line("b", model="gpt-4o"),
        line("c", method="DELETE"),
        line("a"),
        line("d"),
        line("d"),
    ]
    (tmp_path / "batch.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    write(
        tmp_path,
        {**GOOD, "prompts.items": None, "prompts.file": "batch.jsonl", "prompts.format": "openai-batch"},
    )
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    for said in (
        'batch.jsonl: line 2: body.model: expected the name of a model in [[models]], got "gpt-4o"',
        'batch.jsonl: line 3: method: expected "POST", got "DELETE"',
        'batch.jsonl: line 4: id: expected a unique id (line 1 has the same id), got "a"',
        'batch.jsonl: line 6: id: expected a unique id (line 5 has the same id), got "d"',
    ):
        assert said in r.stderr, (said, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
