"""Every bundled example loads and its prompts check, as `oxconsole validate` would: an example
that a change of the workload's keys broke is found here, not by a new user."""

from __future__ import annotations

from pathlib import Path

import pytest

from oxconsole.workload import check_prompts, load_workload

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 10, [p.name for p in EXAMPLES]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_loads_and_its_prompts_check(path: Path) -> None:
    w = load_workload(path)
    stats = check_prompts(w)
    assert stats.total_requests != 0 or w.run.duration > 0, (path.name, stats)
    assert w.models, path.name
