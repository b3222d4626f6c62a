"""Bad `[quality]` and `[routing] cascade` configuration: each error names the file, the key and
what was expected (exit 2 from the command line, no traceback), every one at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.workload import WorkloadError
from tests.support.workloads import load_workload, write_workload


def prompts(n: int) -> str:
    return "\n".join(orjson.dumps({"id": f"q{i}", "prompt": "p", "expected": "a"}).decode() for i in range(n))


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            {"quality.json_schema": "missing.json"},
            r"quality\.json_schema: expected a readable JSON Schema file",
        ),
        (
            {"quality.json_schema": {"type": "nonsense"}},
            r"quality\.json_schema: expected a valid JSON Schema",
        ),
        (
            {"quality.regex": "(unclosed"},
            r"quality\.regex: expected a valid regular expression \(Python syntax\)",
        ),
        (
            {"quality.judge": {"model": "nobody", "prompt": "j.txt", "pass": "x"}},
            r"quality\.judge\.model: expected the name of a model",
        ),
        ({"quality": None}, r"routing\.cascade: expected a \[quality\] table beside it"),
        (
            {"routing.cascade": ["small", "small"]},
            r"routing\.cascade\.1: expected a model not already in the cascade",
        ),
        ({"quality.colour": 1}, r"quality\.colour: expected a key of \[quality\]"),
    ],
)
def test_bad_quality_config_names_file_key_and_expectation(
    tmp_path: Path, sets: dict[str, Any], message: str
) -> None:
    (tmp_path / "j.txt").write_text("{answer}")
    with pytest.raises(WorkloadError, match=r"workload\.toml: " + message):
        load_workload("cascade", tmp_path, sets, prompts=prompts(2))


def test_an_invalid_schema_file_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"type": 12}')
    with pytest.raises(
        WorkloadError, match=r"quality\.json_schema: expected a valid JSON Schema, got \"s\.json\""
    ):
        load_workload("cascade", tmp_path, {"quality.json_schema": "s.json"}, prompts=prompts(2))


def test_validate_exits_2_listing_every_error_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("[1, 2")
    sets = {"quality.json_schema": "s.json", "quality.regex": "(", "routing.cascade": ["small", "nobody"]}
    path = write_workload("cascade", tmp_path, sets, prompts=prompts(2))
    p = subprocess.run(
        [sys.executable, "-m", "oxconsole", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    for key in ("quality.json_schema: expected a file of JSON", "quality.regex:", "routing.cascade.1:"):
        assert key in p.stderr, (key, p.stderr)
