"""The file beside a journal that describes it (`<results>.meta.json`): where it is, read and
written whole.

Why this module exists: the manifest holds what `--resume` checks (`manifest.py`, which needs the
workload) and the sessions that wrote the journal (`sessions.py`, which `oxconsole report` reads).
Reading it must not load the workload machinery, so that `report` starts fast; and every writer
replaces it whole, so that a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

__all__ = ["manifest_path", "read_manifest", "write_manifest_data"]


def manifest_path(results: Path) -> Path:
    return results.with_name(results.name + ".meta.json")


def read_manifest(results: Path) -> dict[str, Any]:
    """The manifest beside the journal at `results`; empty when missing or not a JSON object."""
    try:
        data = orjson.loads(manifest_path(results).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_manifest_data(results: Path, data: dict[str, Any]) -> None:
    """Replace the manifest with `data` (a temporary file beside it, then a rename). OSError."""
    path = manifest_path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)
