"""Running a sweep: its points one after another on one event loop, sharing the endpoints' HTTP
clients (warm connections) and one journal, each record tagged with its `point`.

Why this module exists: a sweep is many short runs that must measure the server, not connection
setup, and leave one journal a `--resume` can continue. Each point is an ordinary `Engine` run
(the engine's own dispatch, limits, retries and summary) whose records come here (`record_sink`):
their id gets the point's suffix, they get `point`, they go to the sweep's journal and the point's
collector. A point ends once its phase has settled (its TTFT p50 and requests/s known to
`run.settle_tolerance`, `metrics/settle.py`), or at `--point-duration`, its limit: a knee read
off settled points does not move with the noise of a point cut short. A point's end (its
summary) goes into the manifest at once; that is what `--resume` trusts.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oxconsole.base.units import fmt_duration
from oxconsole.engine.endpoints import Endpoints
from oxconsole.engine.runner import Engine
from oxconsole.journal.journal import Journal
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.knee import next_auto_value
from oxconsole.reports.progress import progress_line
from oxconsole.sweep.plan import AUTO_CAP, AUTO_START, Over, PointPlan, SweepState, check_points

if TYPE_CHECKING:
    from oxconsole.workload import Workload

__all__ = ["SETTLE_POLL_S", "Sweep", "SweepEnd"]

SETTLE_POLL_S = 0.25
"""How often a point's settledness is looked at: the engine's snapshot interval. It is judged once
a second (`metrics/confidence.py`), so a point ends within a quarter second of settling."""


@dataclass
class SweepEnd:
    """How a sweep ended: the points that ended (index -> value, text, summary), in index order."""

    points: dict[int, dict[str, Any]]
    stopped: bool = False
    journal_failure: str | None = None
    warnings: list[str] = field(default_factory=list)


def same_servers(a: Workload, b: Workload) -> bool:
    """Two points can share endpoint clients: the same endpoints, simulator, timeout and seed."""
    return (
        a.endpoints == b.endpoints
        and a.sim == b.sim
        and a.sim_limits == b.sim_limits
        and a.run.timeout == b.run.timeout
        and a.run.seed == b.run.seed
        and {m.endpoint for m in a.models} <= {m.endpoint for m in b.models}
    )


class Sweep:
    """One sweep: `await run()` on the loop that should own it; `stop()` from a signal handler."""

    def __init__(
        self,
        workload_path: str,
        over: Over,
        plans: list[PointPlan],
        state: SweepState,
        *,
        results: Path,
        base_overrides: list[str],
        progress_interval: float,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.path = workload_path
        self.over = over
        self.plans = plans
        self.state = state
        self.results = results
        self.base = base_overrides
        self.interval = progress_interval
        self.say = say
        self.engine: Engine | None = None
        self.stopping = 0
        self.warnings: list[str] = []
        self.failure: str | None = None
        self.clients_opened = 0
        """Sets of endpoint clients opened: 1 when every point shared the first's warm ones."""
        self.point_seconds = state.point_duration
        """How long the last point took (the ETA's unit)."""
        self.current: PointPlan | None = None
        """The point running (or about to), for the sweep gauge."""
        self.held = False
        """Paused (`pause`): no point starts until `resume`."""
        self._spoiled = False
        self._released = asyncio.Event()

    def stop(self, *, cancel: bool = False) -> None:
        """Stop the point running (in-flight requests get `run.grace`, none with cancel) and the sweep."""
        self.stopping += 1
        self._released.set()
        if self.engine is not None:
            self.engine.request_stop(cancel=cancel, interrupted=True)

    def pause(self) -> None:
        """Hold the sweep: no point starts until `resume`. The point running, paused meanwhile
        (by whoever pauses its engine), is spoiled: its figures would include the pause; one
        already draining (its duration over, nothing more to send) is not."""
        self.held = True
        self._released.clear()
        if self.engine is not None and self.engine.state not in ("draining", "done"):
            self._spoiled = True

    def resume(self) -> None:
        """Go on: a point paused is stopped and run again from its start (it is not ended, as
        after `--resume`: its records so far stay in the journal, its ids get `@POINT.N`)."""
        self.held = False
        self._released.set()
        if self.engine is not None and self._spoiled:
            self.engine.request_stop()

    async def run(self) -> SweepEnd:
        journal = Journal(self.results, on_failure=self._journal_failed)
        first = self.plans[0].workload
        shared = Endpoints(first, {}, self.warnings)
        syncing = asyncio.create_task(_sync_every_second(journal))
        if first.run.workers != 1:
            self.warnings.append(
                f"run.workers = {first.run.workers}: a sweep runs every point in this one process"
            )
        if first.run.trials > 1:
            self.warnings.append(
                f"run.trials = {first.run.trials}: a sweep runs each point once (a point is read "
                "once its phase has settled instead)"
            )
        if first.run.cluster != "local":
            self.warnings.append(
                f'run.cluster = "{first.run.cluster}": a sweep runs every point in this one process'
            )
        try:
            await shared.start()
            self.clients_opened = 1
            while self.stopping == 0 and self.failure is None:
                if self.held:
                    await self._released.wait()
                    continue
                plan = self._next()
                if plan is None:
                    break
                self.current = plan
                self._warn_connections(plan.workload)
                same = same_servers(plan.workload, first)
                self.clients_opened += 0 if same else 1
                await self._point(plan, journal, shared if same else None)
        finally:
            syncing.cancel()
            await shared.close()
            journal.close()
        stopped = self.stopping > 0 and self._next() is not None  # a stop after the last point ended is none
        return SweepEnd(dict(sorted(self.state.done.items())), stopped, self.failure, self.warnings)

    def _next(self) -> PointPlan | None:
        """The next point not ended: the next listed one, or the search's next value."""
        done = self.state.done
        if not self.over.auto:
            return next((p for p in self.plans if p.index not in done), None)
        by_value = {int(d["value"]): d["summary"] for d in done.values()}
        value = next_auto_value(by_value, start=AUTO_START, cap=AUTO_CAP)
        if value is None:
            return None
        index = len(done)
        plan = check_points(
            self.path,
            Over(self.over.key, self.over.path, (str(value),)),
            self.base,
            self.state.point_duration,
        )[0]
        plan.index = index
        return plan

    async def _point(self, plan: PointPlan, journal: Journal, shared: Endpoints | None) -> None:
        st = self.state
        st.starts[plan.index] = st.starts.get(plan.index, 0) + 1
        st.save(self.results, plan.workload.name, str(plan.workload.path))
        suffix, index = st.id_suffix(plan.index), plan.index
        self.say(self._heading(plan))
        engine: Engine

        def sink(rec: RequestRecord) -> None:
            rec.id += suffix
            d = rec.to_json_dict()
            d["point"] = index
            journal.write_dict(d)
            rec.text = None
            engine.collector.record(rec)

        engine = Engine(
            plan.workload,
            results_path=self.results,
            total_expected=plan.total,
            on_tick=lambda s: self.say(f"point #{plan.index}: {progress_line(s)}"),
            tick_interval=self.interval,
            record_sink=sink,
            endpoints=shared,
        )
        self.engine = engine
        t0 = time.monotonic()
        watch = asyncio.create_task(self._until_settled(engine, plan))
        try:
            outcome = await engine.run()
        finally:
            watch.cancel()
        self.engine = None
        spoiled, self._spoiled = self._spoiled, False
        self.warnings.extend(w for w in outcome.warnings if w not in self.warnings)
        journal.flush()
        if self.failure is not None or journal.failure is not None:
            return  # not ended: `--resume` runs it again
        if outcome.stopped_early and (outcome.interrupted or self.stopping > 0):
            return  # stopped by the user: not ended, `--resume` runs it again
        if outcome.cancelled:
            # the point ran its time; what was still in flight after run.grace was cut, as at
            # the end of any run: the point ended (running it again would cut them again)
            self.warn(
                f"sweep: point #{plan.index}: {outcome.cancelled} request(s) still in flight "
                f"run.grace after its end were cancelled (raise run.grace to let them finish)"
            )
        if spoiled and self.stopping == 0:
            self.say(f"oxconsole: sweep: point #{plan.index} was paused; it runs again from its start")
            return
        self.point_seconds = time.monotonic() - t0
        run = plan.workload.run
        load = {"concurrency": run.concurrency, "rate": run.rate}
        st.done[index] = {"value": plan.value, "text": plan.text, "load": load, "summary": outcome.summary}
        st.save(self.results, plan.workload.name, str(plan.workload.path))

    async def _until_settled(self, engine: Engine, plan: PointPlan) -> None:
        """End the point once its phase has settled (`metrics/settle.py`): its figures are read
        then, not at `--point-duration`, which stays the limit (a point it ends is "not settled")."""
        while True:
            await asyncio.sleep(SETTLE_POLL_S)
            if engine.state != "running":
                continue
            view = engine.collector.confidence.phase.view
            if view.state == "settled":
                self.say(
                    f"oxconsole: sweep: point {plan.index + 1} {view.label()} after {engine.elapsed():.0f}s"
                )
                engine.end_as_planned()
                return

    def _warn_connections(self, w: Workload) -> None:
        """A point whose concurrency is above an endpoint's connection pool: requests beyond it wait."""
        for name in sorted({m.endpoint for m in w.models}):
            ep = w.endpoints[name]
            if ep.max_connections < w.run.concurrency:
                self.warn(
                    f"endpoints.{name}.max_connections = {ep.max_connections} is below run.concurrency "
                    f"= {w.run.concurrency} (a point): requests beyond it wait for a connection"
                )

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _heading(self, plan: PointPlan) -> str:
        """`sweep: point 3 of 5 (concurrency=4), ETA 1m30s` (a search: `point 3, searching`)."""
        what = f"{self.over.key}={plan.text}"
        if self.over.auto:
            return f"oxconsole: sweep: point #{plan.index} ({what}), searching for the knee"
        n = len(self.plans)
        left = n - len(self.state.done)
        eta = fmt_duration(left * self.point_seconds)
        return f"oxconsole: sweep: point #{plan.index}, {plan.index + 1} of {n} ({what}), ETA {eta}"

    def _journal_failed(self, message: str) -> None:
        if self.failure is None:
            self.failure = message
            if self.engine is not None:
                self.engine.request_stop(cancel=True)


async def _sync_every_second(journal: Journal) -> None:
    while True:
        await asyncio.sleep(1.0)
        await journal.sync_async()
