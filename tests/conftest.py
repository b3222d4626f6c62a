"""Shared fixtures: workloads written to a temporary folder, run against the embedded simulator."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from oxconsole.workload import Workload, load_workload

WorkloadFactory = Callable[..., Workload]


@pytest.fixture
def make_workload(tmp_path: Path) -> WorkloadFactory:
    """Write TOML text (dedented) as workload.toml in tmp_path and load it; results go to tmp_path."""

    def make(text: str, *, overrides: tuple[str, ...] = (), prompts: str | None = None) -> Workload:
        if prompts is not None:
            (tmp_path / "prompts.jsonl").write_text(textwrap.dedent(prompts).lstrip())
        body = textwrap.dedent(text)
        if "[output]" not in body:
            body += f'\n[output]\nresults = "{tmp_path / "results.jsonl"}"\n'
        path = tmp_path / "workload.toml"
        path.write_text(body)
        return load_workload(path, overrides)

    return make
