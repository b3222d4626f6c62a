"""The engine's side of adaptive concurrency: each finished request judged and fed to the controller.

Why this module exists: `AutoConcurrency` is pure (verdicts and times in, a limit out); the engine
has records, an SLO and a loop clock. `AutoRun` turns one into the other so that the engine's hook
is two lines: `observe(rec, now, in_flight)` returns the new limit when it changed, else None.
"""

from __future__ import annotations

from oxconsole.engine.drivers.autosearch import AutoConcurrency
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import SloConfig, Workload


class AutoRun:
    """One run's controller and the SLO it judges by; `restart` when auto is turned on again."""

    def __init__(self, slo: SloConfig, concurrency_max: int, start: int) -> None:
        self.slo = slo
        self.concurrency_max = concurrency_max
        self.ctl = AutoConcurrency(slo.target, hi=concurrency_max, start=start)

    @classmethod
    def of(cls, w: Workload) -> AutoRun | None:
        """The workload's auto run, or None when it has no [slo] (auto cannot be turned on)."""
        slo = w.slo
        return None if slo is None else cls(slo, w.run.concurrency_max, w.run.concurrency)

    def restart(self, limit: int, now: float) -> None:
        """Auto (turned on again) starts from the limit the run has now."""
        self.ctl = AutoConcurrency(self.slo.target, hi=self.concurrency_max, start=limit, now=now)

    def observe(self, rec: RequestRecord, now: float, in_flight: int) -> int | None:
        """A finished request at loop time `now` (s since the run began): the new limit, or None."""
        good = rec.slo_ok if rec.slo_ok is not None else self.slo.good(rec)  # the engine's verdict
        latency = (rec.latency_ms or 0.0) / 1000.0
        limit = self.ctl.observe(now, bool(good), latency, in_flight)
        return limit if self.ctl.changed else None
