"""Which trials of a run ended, kept in its journal's manifest: what `--resume` continues from.

Why this module exists: `run.trials = N` runs the workload N times into one journal. A run
stopped part way must resume the trial that was cut (its requests already ok are not sent again)
and then run the rest, and `oxconsole report` must count only trials that ended. A trial's end is
recorded in the manifest (`<results>.meta.json`, key `trials`) the moment it ends, as a sweep's
points are; that is the marker `--resume` trusts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oxconsole.journal.manifest import read_manifest, write_manifest_data

__all__ = ["KEY", "TrialState"]

KEY = "trials"
"""The manifest's key: ``{"n": N, "done": [1, 2, ...]}``."""


@dataclass
class TrialState:
    """How many trials the run has, and those that ended (1-based)."""

    n: int
    done: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> TrialState | None:
        """The state a manifest keeps; None without one (a run of one trial, or an older journal)."""
        d = manifest.get(KEY)
        if not isinstance(d, dict) or type(d.get("n")) is not int or d["n"] < 1:
            return None
        done = d.get("done")
        ended = sorted({k for k in done if type(k) is int and k >= 1}) if isinstance(done, list) else []
        return cls(d["n"], ended)

    @classmethod
    def read(cls, results: Path) -> TrialState | None:
        return cls.of(read_manifest(results))

    def next(self) -> int | None:
        """The first trial that has not ended (the one a resume continues); None when all have."""
        return next((k for k in range(1, self.n + 1) if k not in self.done), None)

    def ended(self, results: Path, trial: int) -> None:
        """Record that `trial` ended. OSError when the manifest cannot be written."""
        if trial not in self.done:
            self.done.append(trial)
        self.save(results)

    def save(self, results: Path) -> None:
        data = read_manifest(results)
        data[KEY] = {"n": self.n, "done": sorted(self.done)}
        write_manifest_data(results, data)
