"""The stage driver: runs a workload's `[[stages]]` on a live run, then ends it.

Why this module exists: a load shape is a sequence of live changes at known times, so it is driven
through the very path a console key takes (`apply(cmd, by="stage")` on the run's loop, which
`LiveSettings` admits and logs), whatever the run's shards. It is a driver of the run's settings
over time, not a run of its own (as auto concurrency, `autorun.py`, is). What it adds:
each boundary is logged as a change (`what` = "stage", from the stage before to this one, so that
a phase starts there even when no setting changes), the requests sent in a stage are marked with
it (`stage_mark`: the record's `stage` and `warmup`), ramps move in steps, and after the last stage
the run ends as when `run.duration` runs out (not a stop: not exit 130).

Ramps: linear from the values in force at the boundary to the stage's own, as a staircase of
`ramp_steps` steps (one a second, at least 4 in a short stage); the first step is taken at the
boundary and the last, the stage's value, a step before its end, so the stage ends holding it.
Each step that changes a value is a change (`by` = "stage"). A key (or a command) that changes a
setting during a stage holds until the next boundary: a ramp stops moving a setting that someone
else changed.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Protocol

from oxconsole.engine.commands import By, Command, SetConcurrency, SetRate
from oxconsole.engine.livesettings import LiveSettings
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.stages import StageSpan
from oxconsole.workload import Stage, Workload, stages_duration

__all__ = ["RAMP_STEP_S", "StageDriver", "ramp_steps"]

RAMP_STEP_S = 1.0
"""A ramp changes its values at most once a second (more often only to take 4 steps)."""
MIN_RAMP_STEPS = 4


class StageRun(Protocol):
    """What the driver needs of the run's coordinator (`runner.Engine`), on the run's loop."""

    w: Workload
    live: LiveSettings
    collector: Collector
    stage_mark: tuple[int, bool] | None

    def apply(self, cmd: Command, by: By = "command") -> object: ...
    def elapsed(self) -> float: ...


def ramp_steps(duration: float) -> int:
    """How many steps a ramp of `duration` seconds takes: one a second, at least 4."""
    return max(MIN_RAMP_STEPS, math.floor(duration / RAMP_STEP_S))


def ramp_value(start: float, end: float, step: int, steps: int) -> float:
    """The value at step `step` (1..steps) of a linear staircase from `start` to `end`."""
    return start + (end - start) * step / steps


class StageDriver:
    """Runs the stages of `run.w` in order on the run's loop, then calls `end` (the run's end)."""

    def __init__(self, run: StageRun, end: Callable[[], None]) -> None:
        self.run = run
        self.stages = run.w.stages
        self.end = end
        self.index = -1
        self._task: asyncio.Task[None] | None = None
        self._mine: dict[str, float] = {}  # the value this driver last set, per setting

    @classmethod
    def start(cls, run: StageRun, end: Callable[[], None]) -> StageDriver:
        """Begin the first stage now (the run's clock has just started) and the rest on time."""
        driver = cls(run, end)
        loop = asyncio.get_running_loop()
        driver._begin(0, driver.stages[0])  # at once: stage 0 starts with the run's clock
        driver._task = loop.create_task(driver._drive(loop.time()))
        return driver

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _drive(self, t0: float) -> None:
        loop = asyncio.get_running_loop()
        due = 0.0
        for k, stage in enumerate(self.stages):
            if self.run.live.stopped:
                return
            if k > 0:
                self._begin(k, stage)
            if stage.ramp:
                await self._ramp(stage, t0 + due)
            due += stage.duration
            await asyncio.sleep(max(0.0, t0 + due - loop.time()))
        self.run.collector.stage_log.end(self.run.elapsed())
        self.end()

    def _begin(self, k: int, stage: Stage) -> None:
        """Stage k's boundary: its mark on new requests, its change, its settings (not a ramp's)."""
        run = self.run
        t = run.elapsed() if k else 0.0  # the first stage begins with the run
        self.index = k
        run.stage_mark = (k, stage.warmup)
        span = StageSpan(k, t, stage.warmup, stage.ramp, stage.duration)
        span.concurrency = stage.concurrency if stage.concurrency is not None else run.live.concurrency
        span.rate = stage.rate if stage.rate is not None else run.live.rate
        run.collector.stage_log.begin(span, t, len(self.stages), stages_duration(self.stages))
        if k > 0:
            run.collector.change(t, "stage", k - 1, k, by="stage")
        self._mine = {"concurrency": run.live.concurrency, "rate": run.live.rate}
        if not stage.ramp:
            self._set(stage.concurrency, stage.rate)

    async def _ramp(self, stage: Stage, start_at: float) -> None:
        loop = asyncio.get_running_loop()
        c0, r0 = self.run.live.concurrency, self.run.live.rate
        steps = ramp_steps(stage.duration)
        for i in range(1, steps + 1):
            await asyncio.sleep(max(0.0, start_at + (i - 1) * stage.duration / steps - loop.time()))
            if self.run.live.stopped:
                return
            c = None if stage.concurrency is None else round(ramp_value(c0, stage.concurrency, i, steps))
            r = None if stage.rate is None else round(ramp_value(r0, stage.rate, i, steps), 3)
            self._set(c, r)

    def _set(self, concurrency: int | None, rate: float | None) -> None:
        """Set what the stage names, unless a key or a command changed it since this driver did."""
        live = self.run.live
        if concurrency is not None and live.concurrency == self._mine["concurrency"]:
            self._mine["concurrency"] = concurrency
            self.run.apply(SetConcurrency(concurrency), "stage")
        if rate is not None and live.rate == self._mine["rate"]:
            self._mine["rate"] = rate
            self.run.apply(SetRate(rate), "stage")
