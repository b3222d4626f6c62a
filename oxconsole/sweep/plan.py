"""What a sweep will run: `--over KEY=V1,V2,...` read and checked, each point's workload made
through the same override machinery as `--set`, and what a sweep's manifest remembers for
`--resume` (which points ended, with their summaries).

Why this module exists: every point of a sweep must be bad input before anything is sent (every
error at once, exit 2), and a resumed sweep must be the same sweep; both are questions about the
command line and the workload, not about running anything.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oxconsole.base.exits import BadInput
from oxconsole.journal.manifest import read_manifest, write_manifest_data

if TYPE_CHECKING:
    from oxconsole.workload import Workload

__all__ = ["SHORT_KEYS", "Over", "PointPlan", "SweepState", "parse_over", "point_workload"]

SHORT_KEYS = {"concurrency": "run.concurrency", "rate": "run.rate"}
"""`--over` keys that stand for a workload path."""
AUTO_START, AUTO_CAP = 1, 1024
"""An automatic search doubles concurrency from 1, and goes no higher than this."""


@dataclass(frozen=True)
class Over:
    """`--over KEY=...`: the key as given, the workload path it sets, and its values (None: auto)."""

    key: str
    path: str
    texts: tuple[str, ...] | None
    """Each value as typed (what the `--set` machinery parses); None for `auto`."""

    @property
    def auto(self) -> bool:
        return self.texts is None

    def spec(self) -> str:
        return f"{self.key}={'auto' if self.texts is None else ','.join(self.texts)}"

    def setting(self, text: str) -> str:
        """A value as `--set` takes it: `routing.cascade=small+big` is the list `["small", "big"]`
        (a TOML array as typed stays one)."""
        if self.path == "routing.cascade" and not text.lstrip().startswith("["):
            return "[" + ", ".join(f'"{m.strip()}"' for m in text.split("+")) + "]"
        return text


def _split_values(text: str) -> list[str]:
    """Values at commas outside quotes and brackets (`[1, 2]` is one TOML value)."""
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return out


def parse_over(text: str) -> Over:
    """`KEY=V1,V2,...` or `concurrency=auto`; BadInput naming what is wrong."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    where = f"--over {text}"
    if not sep or not key:
        raise BadInput(f"{where}: expected KEY=V1,V2,... (such as concurrency=1,2,4,8 or concurrency=auto)")
    if key not in SHORT_KEYS and "." not in key:  # a plain word is one of the short keys, misspelt
        from oxconsole.workload.problems import did_you_mean

        hint = did_you_mean(key, SHORT_KEYS)
        raise BadInput(
            f"{where}: expected concurrency, rate or a dotted --set path (such as packing.size), "
            f"got {key}" + (f' (did you mean "{hint}"?)' if hint else "")
        )
    path = SHORT_KEYS.get(key, key)
    if rest.strip() == "auto":
        if path != "run.concurrency":
            raise BadInput(f"{where}: expected auto only for concurrency (a search for the knee), got {key}")
        return Over(key, path, None)
    values = _split_values(rest)
    empty = [i for i, v in enumerate(values) if not v]
    if empty:
        raise BadInput(
            f"{where}: expected a value between every comma, got an empty value at position {empty[0] + 1}"
        )
    return Over(key, path, tuple(values))


def value_of(text: str) -> Any:
    """A value as `--set` reads it (TOML; a bare word that is not TOML is a string), for JSON."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text


def point_overrides(over: Over, text: str, base: list[str], seconds: float) -> list[str]:
    """The `--set` list of one point: the sweep's own, then the point's duration and its value."""
    return [*base, f"run.duration={seconds!r}", f"{over.path}={over.setting(text)}"]


def point_workload(path: str, overrides: list[str]) -> tuple[Workload, int | None]:
    """A point's workload and its request count when known; WorkloadError as `load_workload`."""
    from oxconsole.workload import check_prompts, load_workload

    w = load_workload(path, overrides)
    return w, check_prompts(w).total_requests


@dataclass
class PointPlan:
    """One point to run: its index, value, workload and request count."""

    index: int
    text: str
    value: Any
    workload: Workload
    total: int | None
    overrides: tuple[str, ...] = ()
    """The point's `--set` list (the sweep's own, its duration, its value)."""


def check_points(path: str, over: Over, base: list[str], seconds: float) -> list[PointPlan]:
    """Every listed point's workload, or BadInput naming each value that no run could use (for
    auto: the first value, standing for the search)."""
    from oxconsole.workload import WorkloadError

    texts = over.texts if over.texts is not None else (str(AUTO_START),)
    plans: list[PointPlan] = []
    problems: list[str] = []
    for i, text in enumerate(texts):
        sets = point_overrides(over, text, base, seconds)
        try:
            w, total = point_workload(path, sets)
        except WorkloadError as e:
            problems.append(f"--over {over.key}={text}: {e}")
            continue
        plans.append(PointPlan(i, text, value_of(over.setting(text)), w, total, tuple(sets)))
    if problems:
        raise BadInput("\n".join(problems))
    return plans


@dataclass
class SweepState:
    """What a sweep's manifest (`<results>.meta.json`, key `sweep`) remembers: the sweep it is, how
    many times each point was started (ids stay unique when a point runs again), and every point
    that ended (its end is the marker `--resume` trusts), with its value and summary."""

    spec: str
    point_duration: float
    overrides: list[str]
    starts: dict[int, int] = field(default_factory=dict)
    done: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Point index -> {"value", "text", "summary"}."""

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "point_duration": self.point_duration,
            "overrides": self.overrides,
            "starts": {str(k): v for k, v in self.starts.items()},
            "points": {str(k): v for k, v in sorted(self.done.items())},
        }

    def save(self, results: Path, name: str, workload: str) -> None:
        data = read_manifest(results)
        data.update({"name": name, "workload": workload, "sweep": self.to_json()})
        write_manifest_data(results, data)

    def id_suffix(self, index: int) -> str:
        """`@POINT` the first time a point runs, `@POINT.N` the N-th time (a resumed sweep runs a
        point that had not ended again, beside its earlier records)."""
        n = self.starts.get(index, 1)
        return f"@{index}" if n == 1 else f"@{index}.{n}"


def resumed_state(results: Path, fresh: SweepState) -> SweepState:
    """The state of the sweep being resumed; BadInput when the journal's sweep is another one."""
    old = read_manifest(results).get("sweep")
    label = f"{results}: --resume"
    if not isinstance(old, dict):
        raise BadInput(f"{label}: expected the journal of a sweep (its manifest has none)")
    for key, now in (
        ("spec", fresh.spec),
        ("point_duration", fresh.point_duration),
        ("overrides", fresh.overrides),
    ):
        if old.get(key) != now:
            raise BadInput(
                f"{label}: expected the same sweep, but its {key} was {old.get(key)!r}, now {now!r}"
            )
    fresh.starts = {int(k): int(v) for k, v in (old.get("starts") or {}).items()}
    fresh.done = {int(k): v for k, v in (old.get("points") or {}).items() if isinstance(v, dict)}
    return fresh
