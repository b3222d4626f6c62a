"""A workload run N times in a row (`run.trials`): one coordinator per trial, one journal, served
as one run.

Why this module exists: one run measures its own figures; it cannot see what changes from one
run to the next (a server's warm caches, a neighbour on the host, the routing of a new connection
pool). Trials repeat the run, each an ordinary `Engine` (its own connections, its own simulator
when the endpoint is `sim`, the same seed) whose records carry `trial` and ids ending in
`@trialN` (`LocalShard` stamps them, in worker processes too), all in the one journal. Each
trial's end is recorded in the manifest (`journal/trialstate.py`) as it happens, so `--resume`
continues the trial that was cut (its requests already ok are not sent again) and then runs the
rest. Like a served sweep, `Trials` looks like one run to the control server and the console: its
snapshots are the trial running now (with `Snapshot.trial` saying which), and only the last
trial's end is the run's end. The summary over every trial (and its `trials` block) is the whole
journal's, made by the caller at the end as after `--resume` (`reports/summary.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from oxconsole.engine.commands import By, Command, CommandError, Stop
from oxconsole.engine.inturn import RunsInTurn
from oxconsole.engine.outcome import RunOutcome
from oxconsole.engine.runner import Engine
from oxconsole.journal.trialstate import TrialState
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import Workload

__all__ = ["MakeEngine", "Trials", "trial_workload"]

MakeEngine = Callable[[Workload, AbstractSet[str], int | None], Engine]
"""An engine for one trial: its workload (`trial_workload`), the ids it skips, its request count."""


def trial_workload(w: Workload, trial: int) -> Workload:
    """`w` as trial `trial` runs it (`run.trial` set: its records are stamped with it)."""
    return dataclasses.replace(w, run=dataclasses.replace(w.run, trial=trial))


class Trials(RunsInTurn):
    """The trials of a run from `first` on (`RunEngine`): `await run()` runs each in turn."""

    not_running = "the trials are not running"

    def __init__(
        self,
        w: Workload,
        results: Path,
        state: TrialState,
        make: MakeEngine,
        *,
        first: int = 1,
        skip: AbstractSet[str] = frozenset(),
        total: int | None = None,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        super().__init__()
        self.w = w
        self.results = results
        self.trials = state
        self.first = first
        self.skip = skip
        self.each = total
        """Requests of one whole trial, when known."""
        self.total_expected = None if total is None else max(0, total - len(skip))
        self.warnings: list[str] = []
        self.engine: Engine | None = None
        self.current = first
        self._make = make
        self._say = say
        self._stopping = False
        self._src: Snapshot | None = None
        self._out: Snapshot | None = None

    # --- what the control server and the command line read ----------------------------------------
    @property
    def inner(self) -> Engine | None:
        return self.engine

    @property
    def state(self) -> str:
        """The trial's state; "starting" before the first, "running" between two trials (only the
        last one's end is "done")."""
        e = self.engine
        if e is None:
            return "starting"
        if e.state == "done" and not self._last():
            return "running" if not self._stopping else "draining"
        return e.state

    def _last(self) -> bool:
        return self._stopping or self.current >= self.trials.n

    @property
    def latest(self) -> Snapshot | None:
        """The trial's newest snapshot, saying which trial it is (the same object until it changes)."""
        e = self.engine
        src = e.latest if e is not None else None
        if src is None:
            return self._out
        if src is not self._src:
            self._src = src
            self._out = dataclasses.replace(src, trial={"index": self.current, "count": self.trials.n})
        return self._out

    @property
    def metrics(self) -> Any:
        """The trial's `/metrics` endpoint, when `[output] prometheus` serves one."""
        return getattr(self.engine, "metrics", None)

    # --- commands --------------------------------------------------------------------------------
    def apply(self, cmd: Command, by: By = "command") -> list[dict[str, Any]]:
        """A command goes to the trial running (the next trial starts from the workload again);
        a stop stops the trials too. The changes the trial running logged."""
        if isinstance(cmd, Stop):
            self._stopping = True
        e = self.engine
        if e is None:
            if isinstance(cmd, Stop):
                return []
            raise CommandError("between two trials: nothing to change yet, try again")
        return e.apply(cmd, by)

    def summary_now(self) -> dict[str, Any]:
        """The trial running so far (a trial is a run of its own; the whole journal's summary,
        every trial in it, comes at the end)."""
        e = self.engine
        return e.summary_now() if e is not None else {}

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        self._stopping = True
        if self.engine is not None:
            self.engine.request_stop(cancel=cancel, interrupted=interrupted)

    # --- the run ---------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        """Each trial from `first` to the last, until one is stopped early or cannot be saved.
        The outcome is the last trial's, with the requests of every trial counted; its summary
        is that trial's own (the caller makes the whole journal's)."""
        self._loop = asyncio.get_running_loop()
        n = self.trials.n
        ok = error = 0
        last: RunOutcome | None = None
        crashed = False
        for k in range(self.first, n + 1):
            if self._stopping and last is not None:
                break
            skip = self.skip if k == self.first else frozenset()
            total = None if self.each is None else max(0, self.each - len(skip))
            self.current = k
            self._say(f"oxconsole: trial {k} of {n}" + (" (resumed)" if skip else ""))
            engine = self._make(trial_workload(self.w, k), skip, total)
            engine.publish_interval = self._interval
            self.engine = engine
            running = asyncio.ensure_future(engine.run())
            await asyncio.sleep(0)  # the engine has taken the loop: a stop now is a stop while starting
            if self._stopping:  # stopped before the first trial could start
                engine.request_stop(interrupted=True)
            out = await running
            ok, error, crashed, last = ok + out.ok, error + out.error, crashed or out.crashed, out
            self.warnings.extend(x for x in out.warnings if x not in self.warnings)
            cut = out.stopped_early or out.journal_failure is not None or out.crashed
            try:  # the manifest says the journal holds trials, and which ended, from the first on
                if cut:
                    self.trials.save(self.results)
                else:
                    self.trials.ended(self.results, k)
            except OSError as e:
                self.warnings.append(f"could not record trial {k} in the manifest ({e.strerror or e})")
            if cut:
                break  # not ended: `--resume` runs it again, then the rest
        if last is None:  # every trial had ended: nothing to send
            return RunOutcome(
                summary={"name": self.w.name, "requests": {"not_sent": 0}}, ok=0, error=0, interrupted=False
            )
        left = n - self.current  # trials not started, when the last one run was cut or stopped
        not_sent = last.not_sent
        if left and self.each is not None and not_sent is not None:
            not_sent += left * self.each
        elif left:
            not_sent = None
        last.summary.setdefault("requests", {})["not_sent"] = not_sent
        return dataclasses.replace(
            last,
            ok=ok,
            error=error,
            interrupted=last.interrupted or bool(left),
            skipped=len(self.skip),
            warnings=self.warnings,
            crashed=crashed,
            not_sent=not_sent,
        )
