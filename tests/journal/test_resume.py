"""--resume trusts the journal's ids only while they name the same prompts (manifest checks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oxconsole.journal.fingerprint import check_resume, write_manifest
from oxconsole.workload import Workload, WorkloadError
from tests.support.workloads import Sets, load_workload


def wl(tmp_path: Path, source: Sets, seed: int = 1) -> Workload:
    """tests/workloads/minimal.toml as tmp_path/w.toml with `source` as its prompts table and
    `seed`, journaled to tmp_path/r.jsonl."""
    sets = {"run.seed": seed, "output.results": str(tmp_path / "r.jsonl"), "prompts": source}
    return load_workload("minimal", tmp_path, sets, file="w.toml")


def test_synthetic_seed_change_is_refused(tmp_path: Path) -> None:
    src = {"synthetic": {"count": 10, "input_tokens": 5, "output_tokens": 5}}
    w = wl(tmp_path, src)
    write_manifest(w, tmp_path / "r.jsonl")
    assert check_resume(w, tmp_path / "r.jsonl", ["syn-1"]) == []
    with pytest.raises(WorkloadError, match=r"r\.jsonl: --resume: .*run\.seed"):
        check_resume(wl(tmp_path, src, seed=2), tmp_path / "r.jsonl", ["syn-1"])


def test_line_number_ids_refused_when_file_changes(tmp_path: Path) -> None:
    f = tmp_path / "prompts.jsonl"
    f.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    w = wl(tmp_path, {"file": "prompts.jsonl"})
    write_manifest(w, tmp_path / "r.jsonl")
    f.write_text('{"prompt": "new"}\n{"prompt": "a"}\n{"prompt": "b"}\n')
    with pytest.raises(WorkloadError, match="no explicit ids"):
        check_resume(wl(tmp_path, {"file": "prompts.jsonl"}), tmp_path / "r.jsonl", ["1"])


def test_explicit_ids_may_grow(tmp_path: Path) -> None:
    f = tmp_path / "prompts.jsonl"
    f.write_text('{"id": "x", "prompt": "a"}\n{"id": "y", "prompt": "b"}\n')
    w = wl(tmp_path, {"file": "prompts.jsonl"})
    write_manifest(w, tmp_path / "r.jsonl")
    f.write_text('{"id": "x", "prompt": "a"}\n{"id": "y", "prompt": "b"}\n{"id": "z", "prompt": "c"}\n')
    notes = check_resume(wl(tmp_path, {"file": "prompts.jsonl"}), tmp_path / "r.jsonl", ["x", "y"])
    assert any("explicit ids" in n for n in notes), [n for n in notes][:5]
    # an id the workload no longer has is refused
    f.write_text('{"id": "y", "prompt": "b"}\n')
    with pytest.raises(WorkloadError, match="do not"):
        check_resume(wl(tmp_path, {"file": "prompts.jsonl"}), tmp_path / "r.jsonl", ["x", "y"])


def test_repeat_change_is_refused(tmp_path: Path) -> None:
    w = wl(tmp_path, {"items": ["a", "b"]})
    write_manifest(w, tmp_path / "r.jsonl")
    with pytest.raises(WorkloadError, match=r"prompts\.repeat changed"):
        check_resume(wl(tmp_path, {"items": ["a", "b"], "repeat": 2}), tmp_path / "r.jsonl", ["item-0"])
