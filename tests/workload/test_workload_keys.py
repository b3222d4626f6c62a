"""The keys a table accepts are its dataclass's fields (`schema.toml_keys`): every one of them is
read by its section's parser, and a field the parser derives is not a key of the file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from oxconsole.workload import WorkloadError
from oxconsole.workload.cluster import ray_installed
from oxconsole.workload.schema import RunConfig, toml_keys
from tests.support.workloads import WORKLOADS, load_workload

BATCH = str(WORKLOADS / "every_key_batch.jsonl")


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def left_at_default(obj: Any, *not_keys: str, skip: tuple[str, ...] = ()) -> list[str]:
    """The keys of `obj`'s table (less `skip`) whose field still holds its default: each was set to
    another value in tests/workloads/every_key.toml, so such a key was accepted but not read.
    Required fields (no default) have nothing to compare with and are left out."""
    by_name = {f.name: f for f in dataclasses.fields(obj)}
    out = []
    for key in toml_keys(type(obj), *not_keys):
        default = _default(by_name[key])
        if key not in skip and default is not dataclasses.MISSING and getattr(obj, key) == default:
            out.append(f"{type(obj).__name__}.{key} = {getattr(obj, key)!r}")
    return out


def test_every_key_of_every_table_reaches_its_field(tmp_path: Path) -> None:
    sets: dict[str, Any] = {"prompts.file": BATCH}
    if ray_installed():
        sets["run.cluster"] = "ray"
    w = load_workload("every_key", tmp_path, sets)
    unread = [
        *left_at_default(w, "path", "raw", "sim_limits"),
        *left_at_default(w.sim_limits, "window"),
        *left_at_default(w.run, "concurrency_auto", skip=() if ray_installed() else ("cluster",)),
        *left_at_default(w.output),
        *left_at_default(w.endpoints["e"], "name"),
        *left_at_default(w.models[0], skip=("voice", "size", "n")),  # the keys of one API each:
        *[k for k in left_at_default(w.models[1]) if k.split(".")[1].split(" ")[0] == "voice"],
        *[k for k in left_at_default(w.models[2]) if k.split(".")[1].split(" ")[0] in ("size", "n")],
        *left_at_default(w.prompts, skip=("items", "synthetic", "tokenizer")),
        *left_at_default(w.routing),
        *left_at_default(w.routing.rules[0]),
        *left_at_default(w.retry),
        *left_at_default(w.sim["m"]),
        *left_at_default(w.sim_limits, skip=("window",)),
        *left_at_default(w.stages[0]),
        *left_at_default(w.plans["p"], "name"),
        *left_at_default(w.plans["p"].default),
        *left_at_default(w.packing),
        *left_at_default(w.telemetry),
    ]
    assert w.slo is not None
    unread += left_at_default(w.slo)
    assert w.quality is not None  # judge: its own test (a prompt file beside the workload)
    unread += left_at_default(w.quality, "schema_source", skip=("judge",))
    assert not unread, f"accepted by the parser but left at the default: {unread}"


def test_the_prompt_sources_reach_their_fields(tmp_path: Path) -> None:
    synthetic = {
        "count": 3,
        "input_tokens": 7,
        "output_tokens": 9,
        "prefix_tokens": 2,
        "images": {"count": 2, "width": 64, "height": 32},
        "audio_s": 1.5,
        "documents": 4,
    }
    w = load_workload(
        "every_key", tmp_path, {"prompts": {"synthetic": synthetic}, "output.batch_output": None}
    )
    assert w.prompts.synthetic is not None
    assert left_at_default(w.prompts.synthetic) == [], w.prompts.synthetic
    w = load_workload("every_key", tmp_path, {"prompts": {"items": ["a"]}, "output.batch_output": None})
    assert w.prompts.items == ("a",), w.prompts


@pytest.mark.parametrize(
    ("key", "section"),
    [("run.concurrency_auto", "[run]"), ("sim_limits", "the top level"), ("sim.window", "[sim]")],
)
def test_a_field_the_parser_derives_is_not_a_key(tmp_path: Path, key: str, section: str) -> None:
    with pytest.raises(WorkloadError) as e:
        load_workload("every_key", tmp_path, {"prompts.file": BATCH, key: 1})
    assert f"{key}: expected a key of {section}" in str(e.value), str(e.value)


def test_toml_keys_names_a_field_that_is_not_there() -> None:
    assert "concurrency_auto" not in toml_keys(RunConfig, "concurrency_auto")
    with pytest.raises(ValueError, match="RunConfig has no field concurency_auto"):
        toml_keys(RunConfig, "concurency_auto")
