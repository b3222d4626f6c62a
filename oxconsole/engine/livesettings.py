"""The settings a live command changes, whether a command may change them, and what each changes.

Why this module exists: a run's coordinator (`runner.Engine`) applies each command once, here:
`LiveSettings.apply` says what changed, and the coordinator logs it and tells each shard its part
(`shares.shard_commands`; a shard never holds live settings of its own). Every command passes
`LiveSettings.admit` first (`check` for its values, then its model names): a command that fails
it raises `CommandError` and changes nothing. The console asks `check` too before it sends. Pure
logic: no loop, no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from oxconsole.engine.commands import (
    Command,
    CommandError,
    EnableModel,
    Pause,
    Resume,
    SetAuto,
    SetCascade,
    SetConcurrency,
    SetRate,
    SetTpm,
    SetWeight,
    Stop,
    command_name,
)
from oxconsole.workload import Workload, bounds

What = Literal["concurrency", "rate", "tpm", "weight", "enabled", "paused", "auto", "cascade"]

# The largest values a live command may set: the workload schema's bounds for the same keys
# (run.concurrency, run.rate, run.tpm, models.*.weight; reasons in `oxconsole.workload.bounds`),
# so that a value a command sets is one the workload file could hold, and `s` can save it.
MAX_CONCURRENCY = bounds.MAX_CONCURRENCY
MAX_RATE = bounds.MAX_RATE
MAX_TPM = float(bounds.MAX_COUNT)
MAX_WEIGHT = bounds.MAX_WEIGHT


def _shown(v: object) -> str:
    """A value as an error message shows it: JSON-like, so a string looks like a string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"')[:40] + '"'
    if v is None:
        return "null"
    if isinstance(v, int | float):
        return repr(v)
    return type(v).__name__


def _number(cmd: Command, v: object, top: float, what: str) -> float:
    """`v` as a float when it is a finite number from 0 to `top` (a bool is not a number)."""
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= top:
        return float(v)
    limit = f"{top:g}".replace("e+0", "e").replace("e+", "e")  # 1e6, as the workload's errors say
    raise CommandError(
        f"{command_name(cmd)}: expected a finite number >= 0 and <= {limit}{what}, got {_shown(v)}"
    )


def _flag(cmd: Command, v: object, field: str) -> bool:
    if isinstance(v, bool):
        return v
    raise CommandError(f"{command_name(cmd)}: {field}: expected true or false, got {_shown(v)}")


def _model(cmd: Command, v: object) -> str:
    if isinstance(v, str):
        return v
    raise CommandError(f"{command_name(cmd)}: model: expected a model name, got {_shown(v)}")


def _steps(v: object) -> tuple[str, ...]:
    """A cascade's steps: a non-empty list of model names, each once."""
    if isinstance(v, list | tuple) and v and all(isinstance(m, str) for m in v) and len(set(v)) == len(v):
        return tuple(v)
    raise CommandError(
        f"set_cascade: steps: expected a non-empty list of model names, each once, got {_shown(v)}"
    )


def check(cmd: object) -> Command:
    """The command with its values typed as they will be applied, or `CommandError` saying why no
    run could take it: a value of the wrong type (a bool is not a number, "no" is not a bool), not
    finite, or out of range. Model names are checked by `LiveSettings.admit`, which knows them."""
    if isinstance(cmd, SetConcurrency):
        v = cmd.value
        if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_CONCURRENCY:
            return cmd
        raise CommandError(
            f"set_concurrency: expected an integer >= 1 and <= {MAX_CONCURRENCY:_}, got {_shown(v)}"
        )
    if isinstance(cmd, SetRate):
        return SetRate(_number(cmd, cmd.value, MAX_RATE, " (requests per second; 0 = unlimited)"))
    if isinstance(cmd, SetTpm):
        return SetTpm(_number(cmd, cmd.value, MAX_TPM, " (tokens per minute; 0 = no budget)"))
    if isinstance(cmd, SetWeight):
        model = _model(cmd, cmd.model)
        return SetWeight(model, _number(cmd, cmd.value, MAX_WEIGHT, f" (the weight of {_shown(model)})"))
    if isinstance(cmd, EnableModel):
        return EnableModel(_model(cmd, cmd.model), _flag(cmd, cmd.enabled, "enabled"))
    if isinstance(cmd, Stop):
        return Stop(_flag(cmd, cmd.cancel, "cancel"))
    if isinstance(cmd, SetAuto):
        return SetAuto(_flag(cmd, cmd.on, "on"))
    if isinstance(cmd, Pause | Resume):
        return cmd
    if isinstance(cmd, SetCascade):
        return SetCascade(_steps(cmd.steps))
    raise CommandError(f"not a command: {type(cmd).__name__}")


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
        if self.what == "tpm":
            return SetTpm(self.new)
        if self.what == "weight":
            assert self.model is not None
            return SetWeight(self.model, self.new)
        if self.what == "enabled":
            assert self.model is not None
            return EnableModel(self.model, self.new)
        if self.what == "auto":
            return SetAuto(self.new)
        if self.what == "cascade":
            return SetCascade(tuple(self.new))
        return Pause() if self.new else Resume()


class LiveSettings:
    """Concurrency, rate, token budget, per-model weights and switches, and pause: what the console
    may change.

    `apply(cmd)` admits the command (or raises `CommandError`, changing nothing), updates the
    settings and returns what changed (nothing when a command changes nothing: the same value
    again, a pause once stopping). `Stop` is not a setting: the caller stops its run, and calls
    `stopping()` so that pause and resume are ignored from then on.
    """

    def __init__(
        self,
        concurrency: int,
        rate: float,
        weights: dict[str, float],
        enabled: dict[str, bool] | None = None,
        paused: bool = False,
        tpm: float = 0.0,
        auto: bool = False,
        auto_refused: str | None = None,
        cascade: tuple[str, ...] | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.cascade = cascade
        """`[routing] cascade` in force now, in order; None = this run judges no answers (no
        `[quality]`), so it can have no cascade."""
        self.auto = auto
        """The concurrency is the auto controller's (`run.concurrency = "auto"`, key `a`)."""
        self.auto_refused = auto_refused
        """Why this run cannot turn auto on (no [slo], several workers); None = it can."""
        self.rate = rate
        """Requests per second for the whole run; 0 = unlimited."""
        self.tpm = tpm
        """Tokens per minute for the whole run; 0 = no token budget."""
        self.weights = dict(weights)
        self.enabled = dict(enabled) if enabled is not None else {m: True for m in weights}
        self.paused = paused
        self.stopped = False

    @classmethod
    def of(cls, w: Workload) -> LiveSettings:
        """The settings a workload starts with."""
        return cls(
            w.run.concurrency,
            float(w.run.rate),
            {m.name: float(m.weight) for m in w.models},
            tpm=float(w.run.tpm),
            auto=w.run.concurrency_auto,
            auto_refused=auto_refusal(w),
            cascade=None if w.quality is None else tuple(w.routing.cascade),
        )

    def stopping(self) -> None:
        """The run is stopping: pause and resume change nothing from now on."""
        self.stopped = True

    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError` when no run, or not this run, could
        take it (`check`, then a model this run does not have). Changes nothing either way, and
        reads only the model names, which never change: safe from any thread."""
        cmd = check(cmd)
        if isinstance(cmd, SetAuto) and cmd.on and self.auto_refused:
            raise CommandError(f"set_auto: {self.auto_refused}")
        if isinstance(cmd, SetWeight | EnableModel) and cmd.model not in self.weights:
            models = ", ".join(f'"{m}"' for m in self.weights)
            raise CommandError(f"{command_name(cmd)}: unknown model {_shown(cmd.model)} (models: {models})")
        if isinstance(cmd, SetCascade):
            if self.cascade is None:
                raise CommandError("set_cascade: this run has no [quality] table (nothing to escalate)")
            for m in cmd.steps:
                if m not in self.weights:
                    models = ", ".join(f'"{m}"' for m in self.weights)
                    raise CommandError(f"set_cascade: unknown model {_shown(m)} (models: {models})")
        return cmd

    def apply(self, cmd: Command) -> list[Change]:
        """Take a command: the settings it changed, old and new (empty when nothing changed).
        Raises `CommandError` (before anything changes) for a command `admit` refuses."""
        cmd = self.admit(cmd)
        out: list[Change] = []
        if isinstance(cmd, SetConcurrency) and self.auto:  # a hand on the limit takes it over
            out.append(Change("auto", True, False))
            self.auto = False
        change = self._change(cmd)
        return out if change is None else [*out, change]

    def auto_limit(self, value: int) -> Change | None:
        """The auto controller's new limit (auto stays on): the change, or None when the same."""
        value = max(1, min(MAX_CONCURRENCY, value))
        if value == self.concurrency:
            return None
        change = Change("concurrency", self.concurrency, value)
        self.concurrency = value
        return change

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
        elif isinstance(cmd, SetTpm):
            if cmd.value != self.tpm:
                change = Change("tpm", self.tpm, cmd.value)
                self.tpm = cmd.value
        elif isinstance(cmd, SetWeight):
            if cmd.value != self.weights[cmd.model]:
                change = Change("weight", self.weights[cmd.model], cmd.value, cmd.model)
                self.weights[cmd.model] = cmd.value
        elif isinstance(cmd, EnableModel):
            if cmd.enabled != self.enabled[cmd.model]:
                change = Change("enabled", self.enabled[cmd.model], cmd.enabled, cmd.model)
                self.enabled[cmd.model] = cmd.enabled
        elif isinstance(cmd, SetAuto):
            if cmd.on != self.auto:
                change = Change("auto", self.auto, cmd.on)
                self.auto = cmd.on
        elif isinstance(cmd, SetCascade):
            if cmd.steps != self.cascade:
                change = Change("cascade", list(self.cascade or ()), list(cmd.steps))
                self.cascade = cmd.steps
        elif isinstance(cmd, Pause | Resume):
            paused = isinstance(cmd, Pause)
            if paused != self.paused and not self.stopped:
                change = Change("paused", self.paused, paused)
                self.paused = paused
        # Stop is not a setting: the caller stops its run (and calls `stopping`).
        return change


NO_SLO = "auto concurrency needs an [slo] table in the workload (the SLO it holds the limit to)"
"""Why a run without `[slo]` refuses auto concurrency (the console says it before asking)."""


def auto_refusal(w: Workload) -> str | None:
    """Why this workload's run cannot have auto concurrency (None: it can): auto looks for the
    highest limit meeting [slo], and one engine must judge every request."""
    if w.slo is None:
        return NO_SLO
    if w.run.workers != 1:
        return "auto concurrency needs run.workers = 1 (one engine judges every request)"
    return None
