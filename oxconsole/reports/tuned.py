"""Write a tuned workload: the original file with the settings the user dialled in live.

Why this module exists: the point of tuning a deployment from the console is to keep the result.
`write_tuned` takes the workload file as written (plus the `--set` overrides the run started
with), puts in the live concurrency, rate, token budget, routing weights and cascade from a
snapshot (a model disabled live gets weight 0 and leaves the routing rules, so it gets no
traffic, as in the run), and writes ``NAME.tuned.toml`` beside the original with tomli-w, so the
next run starts where this one ended;
it says which keys it changed and which overrides it baked in. Keys and their order follow the
original (comments do not survive: tomli-w writes plain TOML). It never writes a secret: workloads
only name environment variables, and nothing here reads the environment. No Textual import: the
console calls it, but so could a script.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import apply_override, load_workload

__all__ = ["TunedFile", "save_tuned", "tuned_path", "tuned_raw", "write_tuned"]


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


@dataclass(frozen=True)
class TunedFile:
    """What `write_tuned` wrote: where, which keys it changed, which overrides it baked in."""

    path: Path
    changes: tuple[str, ...]
    """Each key changed from the workload as run (``run.concurrency 32 → 48``), in file order."""
    overrides: tuple[str, ...]
    """The run's ``--set`` overrides, written into the file (the tuned file needs none)."""


def tuned_raw(raw: dict[str, Any], snapshot: Snapshot) -> dict[str, Any]:
    """The raw TOML document with the live settings of ``snapshot`` put in (``raw`` is changed in
    place and returned). New keys are appended at the end of their table; existing keys keep their
    place."""
    _tune(raw, snapshot)
    return raw


def _tune(raw: dict[str, Any], snapshot: Snapshot) -> list[str]:
    """Put the live settings into ``raw``; the changes, in words."""
    g = snapshot.gauges
    changes: list[str] = []

    def put(table: dict[str, Any], path: str, key: str, value: Any, default: Any, note: str = "") -> None:
        old = table.get(key, default)
        if value != old:
            changes.append(f"{path}.{key} {_toml(old)} → {_toml(value)}{note}")
        if value != old or key in table:
            table[key] = value

    run = raw.get("run")
    if not isinstance(run, dict):
        run = raw["run"] = {}
    put(run, "run", "concurrency", max(1, int(g.concurrency)), 50)
    rate = max(0.0, float(g.rate))
    if rate <= 0 and run.get("arrival", "closed") != "closed":
        # the engine ran this arrival schedule unlimited, i.e. as a closed loop; an open-loop
        # arrival without a rate would not load, so write what actually ran
        put(run, "run", "arrival", "closed", "closed")
    if rate > 0 or "rate" in run:
        put(run, "run", "rate", _number(rate), 0)
    tpm = max(0, round(float(g.tpm)))  # run.tpm is whole tokens a minute
    if tpm > 0 or "tpm" in run:
        put(run, "run", "tpm", tpm, 0)
    models = raw.get("models")
    off: set[str] = set()
    for i, m in enumerate(models if isinstance(models, list) else ()):
        gauge = g.models.get(str(m.get("name", ""))) if isinstance(m, dict) else None
        if gauge is None:
            continue
        name = str(m["name"])
        if not gauge.enabled:
            off.add(name)
        weight = _number(float(gauge.weight) if gauge.enabled else 0.0)
        put(m, f"models.{i}", "weight", weight, 1, f" ({name}{'' if gauge.enabled else ' off'})")
    changes += _route_around(raw, off)
    changes += _cascade(raw, snapshot)
    return changes


def _cascade(raw: dict[str, Any], snapshot: Snapshot) -> list[str]:
    """`[routing] cascade` as in force now (`Snapshot.quality`'s steps, changed live by the routing
    editor's step column or `set_cascade`); nothing for a run without `[quality]`."""
    steps = (snapshot.quality or {}).get("steps")
    if not isinstance(steps, list | tuple) or not steps:
        return []
    routing = raw.get("routing")
    if not isinstance(routing, dict):
        routing = raw["routing"] = {}
    new, old = [str(m) for m in steps], routing.get("cascade", [])
    if new == old:
        return []
    routing["cascade"] = new
    return [f"routing.cascade {_toml(old)} → {_toml(new)}"]


def _route_around(raw: dict[str, Any], off: set[str]) -> list[str]:
    """Take the models disabled live out of every routing rule, so that, as in the run, they get
    no traffic at all (weight 0 alone keeps a model out of weighted routing only: a rule naming it
    would still send to it). A rule left with no model takes its first fallback, as the run did; a
    rule left with neither is dropped: its prompts go to the strategy over all models, as they did."""
    routing = raw.get("routing")
    rules = routing.get("rules") if isinstance(routing, dict) else None
    if not off or not isinstance(routing, dict) or not isinstance(rules, list):
        return []
    changes: list[str] = []
    kept: list[Any] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            kept.append(rule)
            continue
        models = [m for m in rule.get("models", []) if m not in off]
        fallback = [m for m in rule.get("fallback", []) if m not in off]
        if not models and fallback:
            models, fallback = fallback[:1], fallback[1:]
        tag = f"(tag {rule.get('tag', '?')})"
        if not models:
            changes.append(f"routing.rules.{i} {tag} dropped: all its models were off")
            continue
        for key, new in (("models", models), ("fallback", fallback)):
            if new != rule.get(key, []):
                changes.append(f"routing.rules.{i}.{key} {_toml(rule.get(key, []))} → {_toml(new)} {tag}")
                rule[key] = new
        kept.append(rule)
    routing["rules"] = kept
    return changes


def _toml(v: Any) -> str:
    """A value as it reads in TOML, on one line (``"closed"``, ``["a", "b"]``, ``12.5``)."""
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return tomli_w.dumps({"v": v}).removeprefix("v = ").strip()


def write_tuned(workload_path: str | Path, overrides: Sequence[str], snapshot: Snapshot) -> TunedFile:
    """Write ``NAME.tuned.toml`` beside ``workload_path``: what it changed and baked in.

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
    changes = _tune(raw, snapshot)
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
    return TunedFile(out, tuple(changes), tuple(overrides))


def save_tuned(workload_path: str | Path, overrides: Sequence[str], snapshot: Snapshot) -> Path:
    """`write_tuned`, for callers that want only the path."""
    return write_tuned(workload_path, overrides, snapshot).path
