"""Write a tuned workload: the original file with the settings the user dialled in live.

Why this module exists: the point of tuning a deployment from the console is to keep the result.
`save_tuned` takes the workload file as written (plus the `--set` overrides the run started with),
puts in the live concurrency, rate and routing weights from a snapshot, and writes
``NAME.tuned.toml`` beside the original with tomli-w, so the next run starts where this one
ended. Keys and their order follow the original (comments do not survive: tomli-w writes plain
TOML). It never writes a secret: workloads only name environment variables, and nothing here reads
the environment. No Textual import: the console calls it, but so could a script.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import apply_override, load_workload

__all__ = ["save_tuned", "tuned_path", "tuned_raw"]


def tuned_path(workload_path: str | Path) -> Path:
    """``NAME.tuned.toml`` beside the original (NAME = the original's stem; a tuned file re-tuned
    keeps its name rather than growing ``.tuned.tuned``)."""
    p = Path(workload_path)
    stem = p.stem
    if stem.endswith(".tuned"):
        stem = stem[: -len(".tuned")]
    return p.with_name(f"{stem}.tuned.toml")


def _number(v: float) -> int | float:
    """Whole numbers as TOML integers (``weight = 3``, not ``3.0``)."""
    return int(v) if float(v).is_integer() else round(float(v), 6)


def tuned_raw(raw: dict[str, Any], snapshot: Snapshot) -> dict[str, Any]:
    """The raw TOML document with the live settings of ``snapshot`` put in (``raw`` is changed in
    place and returned). New keys are appended at the end of their table; existing keys keep their
    place."""
    g = snapshot.gauges
    run = raw.get("run")
    if not isinstance(run, dict):
        run = {}
        raw["run"] = run
    run["concurrency"] = max(1, int(g.concurrency))
    rate = max(0.0, float(g.rate))
    arrival = run.get("arrival", "closed")
    if rate <= 0 and arrival != "closed":
        # the engine ran this arrival schedule unlimited, i.e. as a closed loop; an open-loop
        # arrival without a rate would not load, so write what actually ran
        run["arrival"] = "closed"
    if rate > 0 or "rate" in run:
        run["rate"] = _number(rate)
    models = raw.get("models")
    if isinstance(models, list):
        for m in models:
            if not isinstance(m, dict):
                continue
            gauge = g.models.get(str(m.get("name", "")))
            if gauge is None:
                continue
            weight = float(gauge.weight) if gauge.enabled else 0.0
            if weight != float(m.get("weight", 1.0)) or "weight" in m:
                m["weight"] = _number(weight)
    return raw


def save_tuned(workload_path: str | Path, overrides: Sequence[str], snapshot: Snapshot) -> Path:
    """Write ``NAME.tuned.toml`` beside ``workload_path`` and return its path.

    The original is read again (not the in-memory workload) so the file keeps its keys and their
    order; the run's ``--set`` overrides are applied first, then the live settings. The result is
    loaded back with `load_workload` before it is written, so a tuned file that would not load
    (say, every model disabled) raises `WorkloadError` instead of leaving a broken file behind.
    """
    src = Path(workload_path)
    with src.open("rb") as f:
        raw: dict[str, Any] = tomllib.load(f)
    label = str(workload_path)
    for arg in overrides:
        apply_override(raw, arg, label)
    tuned_raw(raw, snapshot)
    out = tuned_path(src)
    text = tomli_w.dumps(raw)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        load_workload(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(out)
    return out
