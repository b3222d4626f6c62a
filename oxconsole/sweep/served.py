"""A whole sweep behind one control socket: `ServedSweep` looks like one run to the control server.

Why this module exists: a console attached to a sweep must stay attached across its points and
see where the sweep is. The control server serves any `RunEngine`; this one answers for the point
running now (its snapshots, with the sweep gauge, `Snapshot.sweep`, added) and for the sweep as a
whole (its state, its stop, its end). Between two points its state stays "running" (or "paused"),
never "done": only the sweep's end is an end.

What a command does during a sweep:
- a change of the swept setting (`+`/`-` and `a` over concurrency, the rate keys over rate, the
  token budget over `run.tpm`) is refused (`CommandError`, the reply says why): it would measure
  the point at another value than the one it is named for;
- pause holds the sweep (`Sweep.pause`: the point running is paused and, once resumed, run again
  from its start; no point starts while held); resume lets it go on; stop stops the sweep;
- any other change (a model's weight, the rate over concurrency, ...) applies to the point
  running only: each point starts from the workload with its own value.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oxconsole.engine.commands import (
    By,
    Command,
    CommandError,
    Pause,
    Resume,
    SetAuto,
    SetConcurrency,
    SetRate,
    SetTpm,
    Stop,
)
from oxconsole.engine.inturn import RunsInTurn
from oxconsole.engine.outcome import RunOutcome
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.sweep.gauge import done_rows, sweep_gauge

if TYPE_CHECKING:
    from oxconsole.engine.runner import Engine
    from oxconsole.sweep.run import Sweep, SweepEnd

__all__ = ["LOCKED", "ServedSweep", "SweepOutcome"]

LOCKED: dict[str, tuple[str, ...]] = {
    "run.concurrency": ("concurrency", "auto"),
    "run.rate": ("rate",),
    "run.tpm": ("tpm",),
}
"""The live settings a sweep over a workload path holds fixed (the gauge's `locked`)."""
_SETTING: dict[type, str] = {SetConcurrency: "concurrency", SetAuto: "auto", SetRate: "rate", SetTpm: "tpm"}


@dataclass
class SweepOutcome(RunOutcome):
    """A sweep's end as the control server sends it: `summary` is `{"sweep": ..., "out": text,
    "err": text}` (what the sweep printed on stdout and stderr at its end), `code` its exit code."""

    code: int = 0

    @property
    def exit_code(self) -> int:
        return self.code


Finish = Callable[["SweepEnd"], tuple[dict[str, Any], int]]
"""What the sweep's end prints and writes (its table, JSON, notes); the end message and exit code."""


class ServedSweep(RunsInTurn):
    """A `RunEngine` over a `Sweep`: `await run()` runs every point, then `finish` (on the loop)."""

    not_running = "the sweep is not running"

    def __init__(self, sweep: Sweep, finish: Finish) -> None:
        super().__init__()
        self.sweep = sweep
        self.w = sweep.plans[0].workload
        self.warnings = sweep.warnings
        self.total_expected: int | None = None
        self.locked = LOCKED.get(sweep.over.path, ())
        self._finish = finish
        self._ended = False
        self._engine: Engine | None = None
        """The engine whose snapshots `_src` is from."""
        self._src: Snapshot | None = None
        self._out: Snapshot | None = None
        self._made_for: tuple[object, ...] = ()
        self._rows: tuple[list[dict[str, Any]], str | None] = ([], None)
        self._rows_for = -1

    # --- what the control server reads ----------------------------------------------------------
    @property
    def inner(self) -> Engine | None:
        return self.sweep.engine

    @property
    def state(self) -> str:
        """The point's state; between points "running" or "paused" (held); "done" at the end."""
        if self._ended:
            return "done"
        e = self.sweep.engine
        if e is None or e.state in ("done", "starting"):
            return "paused" if self.sweep.held else "running"
        return e.state

    @property
    def latest(self) -> Snapshot | None:
        """The point's newest snapshot with the sweep gauge (the same object until it changes)."""
        e = self.sweep.engine
        if e is not None and e is not self._engine and e.latest is not None:
            self._engine = e
            e.publish_interval = self._interval
        if e is not None and e is self._engine and e.latest is not None:
            self._src = e.latest
        src = self._src
        if src is None:
            return None
        state, done = self.state, self.sweep.state.done
        key = (src, state, len(done), self.sweep.current, self.sweep.held)
        if self._out is None or key != self._made_for:
            self._made_for = key
            self._out = self._wrap(src, state, fresh=e is self._engine)
        return self._out

    def _wrap(self, src: Snapshot, state: str, *, fresh: bool) -> Snapshot:
        sw, plan = self.sweep, self.sweep.current
        done = sw.state.done
        if self._rows_for != len(done):
            self._rows, self._rows_for = done_rows(sw.over.key, done), len(done)
        gauge = sweep_gauge(
            sw.over.key,
            index=plan.index if plan is not None else 0,
            value=plan.text if plan is not None else "",
            count=None if sw.over.auto else len(sw.plans),
            done=self._rows,
            point_s=sw.point_seconds,
            elapsed_s=src.elapsed_s if fresh else 0.0,
        )
        gauge["locked"] = list(self.locked)
        gauge["held"] = sw.held
        gauges = src.gauges if src.gauges.state == state else dataclasses.replace(src.gauges, state=state)
        return dataclasses.replace(src, gauges=gauges, sweep=gauge)

    # --- commands -------------------------------------------------------------------------------
    def admit(self, cmd: Command) -> Command:
        self._refuse_locked(cmd)
        return super().admit(cmd)

    def apply(self, cmd: Command, by: By = "command") -> list[dict[str, Any]]:
        """Stop and pause/resume act on the sweep; the swept setting is refused; anything else
        goes to the point running (its changes are what it returns; the sweep's own acts log none)."""
        self._refuse_locked(cmd)
        sw, e = self.sweep, self.sweep.engine
        if isinstance(cmd, Stop):
            sw.stop(cancel=cmd.cancel)
            return []
        if isinstance(cmd, Resume):  # a point paused is spoiled: `resume` runs it again
            sw.resume()
            return []
        if isinstance(cmd, Pause):
            sw.pause()
        if e is None:
            if isinstance(cmd, Pause):
                return []
            raise CommandError("between two points of the sweep: nothing to change yet, try again")
        return e.apply(cmd, by)

    def summary_now(self) -> dict[str, Any]:
        """The point running so far (its own summary: a point is a run of its own), with where the
        sweep is (`sweep`: the gauge the console reads); between points, only where the sweep is."""
        e = self.sweep.engine
        out = e.summary_now() if e is not None else {}
        snap = self.latest
        if snap is not None and snap.sweep is not None:
            out["sweep"] = dict(snap.sweep)
        return out

    def _refuse_locked(self, cmd: Command) -> None:
        setting = _SETTING.get(type(cmd))
        if setting is not None and setting in self.locked:
            over = self.sweep.over
            raise CommandError(
                f"{setting}: refused during a sweep over {over.key}: each point runs at its own "
                f"value, and a change would measure another one"
            )

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        self.sweep.stop(cancel=cancel)

    # --- the run ---------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        self._loop = asyncio.get_running_loop()
        end = await self.sweep.run()
        summary, code = self._finish(end)
        self._ended = True
        return SweepOutcome(
            summary=summary, ok=0, error=0, interrupted=end.stopped, warnings=list(end.warnings), code=code
        )
