"""The settings a live command changes, and the one decision of what each command changes.

Why this module exists: a run in one process (`Engine`) and a run on worker processes
(`WorkerPool`) take the same commands and must log the same changes; both ask `LiveSettings.apply`
what changed, then act on the answer in their own way (the engine resizes its slots and retunes its
limiter; the pool forwards each worker its share). Pure logic: no loop, no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from oxconsole.engine.commands import (
    Command,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetWeight,
)
from oxconsole.workload import Workload

What = Literal["concurrency", "rate", "weight", "enabled", "paused"]


@dataclass(frozen=True, slots=True)
class Change:
    """One setting that a command changed, as the collector logs it (`Collector.change`)."""

    what: What
    old: Any
    new: Any
    model: str | None = None
    """The model a "weight" or "enabled" change is about."""

    def command(self) -> Command:
        """The command that sets this setting to its new value (what a worker pool forwards)."""
        if self.what == "concurrency":
            return SetConcurrency(self.new)
        if self.what == "rate":
            return SetRate(self.new)
        if self.what == "weight":
            assert self.model is not None
            return SetWeight(self.model, self.new)
        if self.what == "enabled":
            assert self.model is not None
            return EnableModel(self.model, self.new)
        return Pause() if self.new else Resume()


class LiveSettings:
    """Concurrency, rate, per-model weights and switches, and pause: what the console may change.

    `apply(cmd)` updates them and returns what changed (nothing when a command changes nothing:
    the same value again, an unknown model, a pause once stopping). `Stop` is not a setting: the
    caller stops its run, and calls `stopping()` so that pause and resume are ignored from then on.
    """

    def __init__(
        self,
        concurrency: int,
        rate: float,
        weights: dict[str, float],
        enabled: dict[str, bool] | None = None,
        paused: bool = False,
    ) -> None:
        self.concurrency = concurrency
        self.rate = rate
        """Requests per second for the whole run; 0 = unlimited."""
        self.weights = dict(weights)
        self.enabled = dict(enabled) if enabled is not None else {m: True for m in weights}
        self.paused = paused
        self.stopped = False

    @classmethod
    def of(cls, w: Workload) -> LiveSettings:
        """The settings a workload starts with."""
        return cls(w.run.concurrency, float(w.run.rate), {m.name: float(m.weight) for m in w.models})

    def stopping(self) -> None:
        """The run is stopping: pause and resume change nothing from now on."""
        self.stopped = True

    def admit(self, cmd: Command) -> Command | None:
        """The command as it will be applied, or None when it names nothing this run has.

        Every live command passes here before it changes anything: the one place to check that a
        value is finite and in range and that a model exists. Today it clamps concurrency to at
        least 1 and rate to at least 0, and drops unknown models and negative weights.
        """
        if isinstance(cmd, SetConcurrency):
            return SetConcurrency(max(1, int(cmd.value)))
        if isinstance(cmd, SetRate):
            return SetRate(max(0.0, float(cmd.value)))
        if isinstance(cmd, SetWeight):
            ok = cmd.model in self.weights and cmd.value >= 0
            return SetWeight(cmd.model, float(cmd.value)) if ok else None
        if isinstance(cmd, EnableModel):
            return cmd if cmd.model in self.enabled else None
        return cmd

    def apply(self, cmd: Command) -> list[Change]:
        """Take a command: the settings it changed, old and new (empty when nothing changed)."""
        admitted = self.admit(cmd)
        change = None if admitted is None else self._change(admitted)
        return [] if change is None else [change]

    def _change(self, cmd: Command) -> Change | None:
        change: Change | None = None
        if isinstance(cmd, SetConcurrency):
            if cmd.value != self.concurrency:
                change = Change("concurrency", self.concurrency, cmd.value)
                self.concurrency = cmd.value
        elif isinstance(cmd, SetRate):
            if cmd.value != self.rate:
                change = Change("rate", self.rate, cmd.value)
                self.rate = cmd.value
        elif isinstance(cmd, SetWeight):
            if cmd.value != self.weights[cmd.model]:
                change = Change("weight", self.weights[cmd.model], cmd.value, cmd.model)
                self.weights[cmd.model] = cmd.value
        elif isinstance(cmd, EnableModel):
            if cmd.enabled != self.enabled[cmd.model]:
                change = Change("enabled", self.enabled[cmd.model], cmd.enabled, cmd.model)
                self.enabled[cmd.model] = cmd.enabled
        elif isinstance(cmd, Pause | Resume):
            paused = isinstance(cmd, Pause)
            if paused != self.paused and not self.stopped:
                change = Change("paused", self.paused, paused)
                self.paused = paused
        # Stop is not a setting: the caller stops its run (and calls `stopping`).
        return change
