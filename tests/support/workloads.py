"""The test workloads: TOML files under tests/workloads/, loaded with `--set`-style overrides.

Why this module exists: most tests need a workload that differs from a few shared shapes in a
key or two. Each shape is a file (`tests/workloads/NAME.toml`, its comment saying what it is for);
a test names it and the keys it changes, `load_workload("sim_exact", tmp_path, {"run.concurrency": 8})`,
and those are applied by the product's own `--set` code (`workload/overrides.py`), so a test's
workload is read exactly as a user's file with `--set` would be. The file is written to the test's
folder (prompt files and the journal are found beside it), and `output.results` goes there too
unless the file or an override says otherwise.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from oxconsole.workload import Workload, apply_override
from oxconsole.workload import load_workload as load_file

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
"""tests/workloads/: one TOML file per shared shape."""

Sets = Mapping[str, Any]
"""Dotted key -> value, as `--set KEY=VALUE` takes them (`{"run.concurrency": 8}`); the value
None removes the key if the file has it (TOML has no null, so None can say "not in this file")."""


def toml_value(value: Any) -> str:
    """`value` written as TOML on one line, as it would follow `--set KEY=` (tables inline)."""
    if isinstance(value, dict):
        items = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).removeprefix("v = ").strip()


def _key(key: str) -> str:
    return tomli_w.dumps({key: 0}).removesuffix(" = 0\n")


def workload_doc(name: str, sets: Sets | None = None) -> dict[str, Any]:
    """tests/workloads/NAME.toml as a TOML document, `sets` applied in order."""
    raw = tomllib.loads((WORKLOADS / f"{name}.toml").read_text())
    for key, value in (sets or {}).items():
        if value is None:
            _remove(raw, key)
        else:
            apply_override(raw, f"{key}={toml_value(value)}", f"{name}.toml")
    return raw


def _remove(raw: dict[str, Any], key: str) -> None:
    """`key` out of the document, wherever it was (absent already: nothing to do)."""
    *parents, last = key.split(".")
    table: Any = raw
    for part in parents:
        if isinstance(table, list):
            table = table[int(part)]
        elif part in table:
            table = table[part]
        else:
            return
    table.pop(last, None)


def write_workload(
    name: str,
    folder: Path,
    sets: Sets | None = None,
    *,
    file: str = "workload.toml",
    prompts: str | None = None,
) -> Path:
    """tests/workloads/NAME.toml with `sets` applied, written as folder/FILE (its path). Without an
    `output.results` of its own, the journal is folder/results.jsonl (`{"output.results": None}`
    leaves the key out: the journal goes where the product puts it); `prompts`, when given, is
    written as folder/prompts.jsonl."""
    if prompts is not None:
        (folder / "prompts.jsonl").write_text(prompts)
    raw = workload_doc(name, sets)
    if (sets or {}).get("output.results", "") is not None:
        raw.setdefault("output", {}).setdefault("results", str(folder / "results.jsonl"))
    path = folder / file
    path.write_text(tomli_w.dumps(raw))
    return path


def load_workload(
    name: str,
    folder: Path,
    sets: Sets | None = None,
    *,
    file: str = "workload.toml",
    prompts: str | None = None,
) -> Workload:
    """`write_workload`, then the file loaded as the command line loads it."""
    return load_file(write_workload(name, folder, sets, file=file, prompts=prompts))


def fast_slow(tmp_path: Path, target: float, slow_errors: float, sets: Sets | None = None) -> Path:
    """tests/workloads/sim_fast_slow.toml as tmp_path/w.toml: half the requests meet the SLO."""
    return write_workload(
        "sim_fast_slow",
        tmp_path,
        {"slo.target": target, "sim.models.slow.error_rate": slow_errors, **(sets or {})},
        file="w.toml",
    )
