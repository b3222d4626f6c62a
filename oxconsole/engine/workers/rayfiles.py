"""The files a workload reads on its own (its prompts file, its tokenizer), carried to Ray's nodes.

Why this module exists: on a Ray cluster an actor runs on another machine, where the prompts file
the user gave on theirs does not exist. The driver puts each file's bytes in Ray's object store
once (`to_ship`); each actor writes them to a folder of its own and runs on a workload that names
those copies (`localized`). A file above `SHIP_MAX` is not carried (a warning says so): it must
then be readable at the same path on every node (a shared file system), as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oxconsole.workload import Workload

__all__ = ["SHIP_MAX", "localized", "to_ship"]

SHIP_MAX = 256 * 1024 * 1024
"""Bytes: a file larger than this stays where it is (Ray's object store holds it once, in memory,
on the driver's node and on each node that reads it)."""

FIELDS = ("file", "tokenizer")
"""The `[prompts]` keys that name a file."""


def to_ship(w: Workload, put: Callable[[bytes], Any], warn: Callable[[str], None]) -> dict[str, Any]:
    """`{"file": ref, "tokenizer": ref}` for the workload's files, each read once and `put` (Ray's
    `ray.put`); a file above SHIP_MAX is left out, with a warning."""
    out: dict[str, Any] = {}
    for key in FIELDS:
        path: Path | None = getattr(w.prompts, key)
        if path is None:
            continue
        size = path.stat().st_size
        if size > SHIP_MAX:
            warn(
                f"prompts.{key} {path} is {size / 2**20:.0f} MB, more than the {SHIP_MAX / 2**20:.0f} MB "
                "sent to the Ray nodes: it must be readable at that path on every node"
            )
            continue
        out[key] = put(path.read_bytes())
    return out


def localized(w: Workload, files: Mapping[str, bytes], folder: Path) -> Workload:
    """`w` naming copies of its files written in `folder` (the actor's own) from `files`."""
    changes: dict[str, Path] = {}
    for key, data in files.items():
        original: Path = getattr(w.prompts, key)
        copy = folder / f"{key}-{original.name}"
        copy.write_bytes(data)
        changes[key] = copy
    if not changes:
        return w
    return dataclasses.replace(w, prompts=dataclasses.replace(w.prompts, **changes))  # type: ignore[arg-type]
