"""The run: one coordinator over shards that dispatch and send.

Why this module exists: this is the one place that owns a run, however many processes send its
requests. `Engine` owns the journal, the metrics collector, the live settings, the commands held
while the run starts, the snapshots it publishes and the summary it ends with; its shards
(`shards.Shards`: one in this loop, worker processes, Ray actors) only dispatch and send. A live
command is admitted and applied once here (`LiveSettings`), logged with its time, and cut into each
shard's part by `shares.shard_commands`. Load shapes (`stages.StageDriver`) and auto concurrency
(`autorun.AutoRun`) are drivers of these settings over time, through the same `apply`. It never
imports the UI: a console (or a test) reads `Engine.latest` snapshots and calls `submit(command)`,
which is safe from any thread and applied here, on the run's own loop.

`RunOutcome`, `RunEngine`, `rejected_field` and `backoff_delay` are still importable from here (their
old home) for code written before the split.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from oxconsole.engine.commands import By, Command, Stop
from oxconsole.engine.drivers.autorun import AutoRun
from oxconsole.engine.drivers.stagedriver import StageDriver
from oxconsole.engine.endpoints import Endpoints
from oxconsole.engine.livesettings import Change, LiveSettings
from oxconsole.engine.outcome import RunEngine as RunEngine
from oxconsole.engine.outcome import RunOutcome as RunOutcome
from oxconsole.engine.outcome import ended
from oxconsole.engine.prometheus import MetricsEndpoint, metrics_endpoint
from oxconsole.engine.saved import run_summary
from oxconsole.engine.send.adapt import rejected_field as rejected_field
from oxconsole.engine.send.conversations import merge_counts
from oxconsole.engine.send.request import backoff_delay as backoff_delay
from oxconsole.engine.serverwatch import ServerWatch
from oxconsole.engine.shard import LocalShard
from oxconsole.engine.workers.shardset import LocalShards, Shards
from oxconsole.engine.workers.split import shard_commands, worker_count
from oxconsole.journal.fingerprint import open_journal
from oxconsole.journal.journal import Journal
from oxconsole.journal.records import RequestRecord
from oxconsole.journal.sessions import SessionLog
from oxconsole.metrics import ratelimit
from oxconsole.metrics.aggregate import CANCELLED
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.due import DueStats
from oxconsole.metrics.server.series import series_path
from oxconsole.metrics.snapshot import Gauges, Snapshot
from oxconsole.workload import Workload
from oxconsole.workload.prompts.traces import TRACE_FORMATS

__all__ = ["Engine", "RunEngine", "RunOutcome", "make_engine", "new_collector"]


def new_collector(w: Workload, started_at: float) -> Collector:
    """The metrics collector for a run, with each model's prices for cost projections."""
    c = Collector(
        [m.name for m in w.models],
        started_at=started_at,
        prices={m.name: (m.price_per_request, m.price_per_1m_input, m.price_per_1m_output) for m in w.models},
        plans=w.plans,
        slo_target=None if w.slo is None else w.slo.target,
        settle_tolerance=w.run.settle_tolerance,
    )
    c.packing_size = w.packing.size
    c.cascade = None if w.quality is None else tuple(w.routing.cascade)
    if w.run.arrival != "closed" or w.prompts.format in TRACE_FORMATS:
        c.due = DueStats()  # an open loop: each request has a due time to measure from
    return c


def make_engine(workload: Workload, **kwargs: Any) -> Engine:
    """The run a workload asks for: its shards in this loop, in `run.workers` processes, or in Ray
    actors (`run.cluster = "ray"`)."""
    urls = kwargs.pop("endpoint_urls", None)
    if workload.run.cluster == "ray":  # N engine actors on a Ray cluster
        from oxconsole.engine.workers.raypool import RayShards

        return Engine(workload, shards=RayShards(workload, kwargs.pop("workers", None)), **kwargs)
    n = kwargs.pop("workers", None) or worker_count(workload)
    if n > 1:
        from oxconsole.engine.workers.pool import ProcessShards

        return Engine(workload, shards=ProcessShards(workload, n), **kwargs)
    return Engine(workload, shards=LocalShards(urls), **kwargs)


class Engine:
    """Runs one workload on its shards. Create it, then `await run()` on the loop that should own it."""

    def __init__(
        self,
        workload: Workload,
        *,
        results_path: Path,
        skip_ids: AbstractSet[str] | None = None,
        total_expected: int | None = None,
        endpoint_urls: dict[str, str] | None = None,
        publish_interval: float = 0.25,
        on_tick: Callable[[Snapshot], None] | None = None,
        tick_interval: float = 2.0,
        record_sink: Callable[[RequestRecord], None] | None = None,
        endpoints: Endpoints | None = None,
        shards: Shards | None = None,
    ) -> None:
        self.w = workload
        self.record_sink = record_sink
        """Where finished records go instead of the journal (a sweep's, which tags them)."""
        self.results_path = results_path
        self.skip_ids: AbstractSet[str] = skip_ids or set()
        self.total_expected = total_expected
        self.publish_interval = publish_interval
        self.on_tick = on_tick
        self.tick_interval = tick_interval
        self.started_at = time.time()
        self.collector = new_collector(workload, self.started_at)
        self.latest: Snapshot | None = None
        self._state = "starting"
        self.ok = 0
        self.errors = 0
        self.warnings: list[str] = []
        self._journal: Journal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0  # loop time at start
        self._interrupted = False
        self._planned_end = False  # the stages ran out: the run's own end, as run.duration's
        self.journal_failure: str | None = None
        """Why the journal could not be written: the run stopped at once (exit 4)."""
        self.session = SessionLog(results_path, self.warnings)
        """This session's start and running time, in the journal's manifest (`--resume` summaries)."""
        self._held: list[tuple[Command, By]] = []  # commands that came while the run was starting
        self._stage_mark: tuple[int, bool] | None = None
        self.stages: StageDriver | None = None
        self.metrics: MetricsEndpoint | None = None
        """`/metrics` while the run lasts (`[output] prometheus`), fed at each publish."""
        self.server: ServerWatch | None = None
        """The servers' own metrics, scraped while the run lasts (`serverwatch.py`)."""
        self.live = LiveSettings.of(workload)
        self.auto = AutoRun.of(workload)
        """Adaptive concurrency (engine/drivers/autorun.py) while `live.auto`; None without [slo]."""
        self.shards: Shards = shards or LocalShards(endpoint_urls, endpoints)
        self.shards.bind(self)
        self._drive_auto()

    @property
    def state(self) -> str:
        """starting, running (paused, draining: as the shards are), done."""
        return self.shards.state(self._state)

    @property
    def shard(self) -> LocalShard:
        """The one shard in this loop, of a run without worker processes."""
        if not isinstance(self.shards, LocalShards):
            raise AttributeError("this run's shards are other processes")
        return self.shards.one

    @property
    def rate(self) -> float:
        """The run's rate now (requests per second; 0 = unlimited)."""
        return self.live.rate

    @property
    def cooldowns(self) -> list[dict[str, Any]]:
        return self.shards.cooldowns

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    # --- control, from any thread -------------------------------------------------------------
    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError` (`LiveSettings.admit`). Safe from
        any thread; changes nothing."""
        return self.live.admit(cmd)

    def submit(self, cmd: Command, by: By = "command") -> None:
        """Queue a command for the run's loop. Safe from any thread, also before run() starts.
        A command no run could take raises `CommandError` here, in the caller's thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("engine is not running")
        loop.call_soon_threadsafe(self.apply, self.live.admit(cmd), by)

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        """Stop dispatching; in-flight requests get `run.grace` seconds (or none with cancel).
        `interrupted`: a user's stop (a signal, a `Stop` command), not the run's own end."""
        if interrupted:
            self._interrupted = True
        self.live.stopping()
        self.shards.stop(cancel)

    def apply(self, cmd: Command, by: By = "command") -> list[dict[str, Any]]:
        """Apply a command on the run's loop (call only from the loop; `submit` from elsewhere);
        its changes are logged as made `by` a key, a command, a stage, the auto controller or an
        agent, and returned as logged. Raises `CommandError`, having changed nothing and told no
        shard anything, for a command `LiveSettings` refuses. Before dispatch can start (the run's
        clock and its log of changes start then), a command other than `Stop` is held and applied
        when it does (nothing logged yet: an empty list)."""
        if self._state == "starting" and not isinstance(cmd, Stop):
            self._held.append((self.live.admit(cmd), by))
            return []
        changes = self.live.apply(cmd)
        if isinstance(cmd, Stop):
            self.request_stop(cancel=cmd.cancel, interrupted=True)
        t = round(self.elapsed(), 3)
        logged = len(self.collector.changes)
        for c in changes:
            self._act(c)
            self.collector.change(t, c.what, c.old, c.new, model=c.model, by=by)
        self._publish()
        return [dict(c) for c in self.collector.changes[logged:]]

    def summary_now(self) -> dict[str, Any]:
        """The run so far in the summary's keys (the collector's; the shards' end figures, such as
        their loop lag, come only with the run's end). Built when asked, never per snapshot."""
        return self.collector.summary(self.w.name, self.elapsed())

    def _act(self, c: Change) -> None:
        """Make a changed setting so: each shard's part of it, and auto concurrency's turn."""
        if c.what == "auto" and c.new and self.auto is not None:
            self.auto.restart(self.live.concurrency, self.elapsed())
        cmds = shard_commands(c, self.shards.n)
        if cmds:
            self.shards.send(cmds)
        self._drive_auto()

    def _drive_auto(self) -> None:
        """While `live.auto`, every finished request goes to the auto controller."""
        self.shards.observe(self._auto_step if self.live.auto and self.auto is not None else None)

    def _auto_step(self, rec: RequestRecord, in_flight: int) -> None:
        """Feed a finished request to the auto controller; apply (and log, by "auto") a new limit.
        Called before the request's slot is released: released first, the slot can go straight to
        the waiting dispatcher under the old limit, and that request would judge the new one."""
        assert self.auto is not None
        limit = self.auto.observe(rec, self.elapsed(), in_flight - 1)
        c = None if limit is None else self.live.auto_limit(limit)
        if c is not None:
            self._act(c)
            self.collector.change(round(self.elapsed(), 3), c.what, c.old, c.new, by="auto")

    @property
    def stage_mark(self) -> tuple[int, bool] | None:
        """[[stages]]: (stage, warm-up) of the requests sent from now on, told to every shard."""
        return self._stage_mark

    @stage_mark.setter
    def stage_mark(self, mark: tuple[int, bool] | None) -> None:
        self._stage_mark = mark
        if mark is not None:
            self.shards.mark(mark)

    # --- what the shards hand back --------------------------------------------------------------
    def record(self, rec: RequestRecord) -> None:
        """A finished request (its `slo_ok` judged by its shard): counted, journaled, collected."""
        if rec.status == "ok":
            self.ok += 1
        elif rec.error != CANCELLED:
            self.errors += 1
        if self.record_sink is not None:
            self.record_sink(rec)
            return
        assert self._journal is not None
        self._journal.write(rec)
        rec.text = None  # the collector does not need it; let it go
        self.collector.record(rec)

    def collect(self, rec: RequestRecord) -> None:
        """A finished request whose journal line a worker wrote already (`write_lines`)."""
        if rec.status == "ok":
            self.ok += 1
        elif rec.error != CANCELLED:
            self.errors += 1
        self.collector.record(rec)

    def write_lines(self, data: bytes, n: int) -> None:
        """`n` journal lines a worker encoded (the coordinator's journal is their one writer)."""
        assert self._journal is not None
        self._journal.write_lines(data, n)

    def attempt(self, model: str, error_class: str, detail: str) -> None:
        """A failed attempt that goes again: counted live now."""
        self.collector.record_attempt_error(model, error_class, detail)

    # --- the run ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        await self.shards.connect()
        try:
            return await self._run(self._loop)
        finally:
            await self.shards.release()

    async def _run(self, loop: asyncio.AbstractEventLoop) -> RunOutcome:
        self.started_at = time.time()
        self.collector = new_collector(self.w, self.started_at)
        if self.record_sink is None:
            self._journal, notes = open_journal(
                self.w, self.results_path, self.skip_ids, on_failure=self._journal_failed
            )
            self.warnings.extend(notes)
            self.metrics = metrics_endpoint(self.w, self.warnings)
        ticker = None
        try:
            await self.shards.start()
            self._begin(loop)
            ticker = asyncio.create_task(self._ticker())
            await self.shards.wait()
        finally:
            self._state = "done"
            if self.stages is not None:
                self.stages.cancel()
            if ticker is not None:
                ticker.cancel()
            if self.server is not None:
                await self.server.stop()
            await self.shards.close()
            if self._journal is not None:
                self._journal.close()
            if self.metrics is not None:
                self.metrics.close()
        self._publish()
        running = loop.time() - self._t0
        self.session.end(running, self.collector.stage_log.warmup_s(running))
        return ended(
            self._summary(running),
            ok=self.ok,
            error=self.errors,
            stopped=self._interrupted,
            dispatch_complete=self.dispatch_complete,
            skipped=len(self.skip_ids),
            warnings=self.warnings,
            journal_failure=self.journal_failure,
            crashed=self.shards.crashed,
        )

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        """The run's clock starts when every shard can dispatch (after a simulator is up, after
        worker processes start): a fresh collector, the session begun, the shards told, held
        commands applied, the stages driven."""
        self._t0 = loop.time()
        self.started_at = time.time()
        self.collector = new_collector(self.w, self.started_at)
        if self._journal is not None:
            self.session.begin(self.started_at)
        staged = bool(self.w.stages) and self.record_sink is None
        if staged:  # before the shards go: the first requests are the first stage's
            self.stage_mark = (0, self.w.stages[0].warmup)
        self.shards.begin(self._t0, self.started_at)
        if self.journal_failure is not None:  # failed as it opened: nothing may run
            self.request_stop(cancel=True)
        self._state = "running"
        self._watch_servers()
        held, self._held = self._held, []
        for cmd, by in held:
            self.apply(cmd, by)
        if staged:
            self.stages = StageDriver.start(self, self._stages_done)

    def _watch_servers(self) -> None:
        """Scrape the endpoints' own metrics (and DCGM's) beside the run, from now on: the series
        beside the journal (`<stem>.server.jsonl`, not for a sweep's points, whose journal is the
        sweep's), each round in the phase in force when it was read."""
        series = series_path(self.results_path) if self._journal is not None else None
        watch = ServerWatch(
            self.w,
            self.shards.served_urls(),
            self.warnings,
            series=series,
            phase=lambda: self.collector.phase_index,
            ending=lambda: self.state == "done",
            client=self._in_flight_by_endpoint,
        )
        if watch.active:
            self.server = watch
            watch.start()

    @property
    def dispatch_complete(self) -> bool:
        """Dispatch reached the run's end: every prompt was started, `run.duration` or the stages
        ran out."""
        return self._planned_end or self.shards.dispatch_complete

    def _stages_done(self) -> None:
        """The last stage ended: the run ends as when run.duration runs out (not a user's stop)."""
        self.end_as_planned()

    def end_as_planned(self) -> None:
        """End the run as its own end does (run.duration or the stages running out, a sweep point
        that settled): dispatch stops and what is in flight finishes; not a user's stop."""
        if not self.live.stopped:
            self._planned_end = True
            self.request_stop()

    def _journal_failed(self, message: str) -> None:
        """A journal write or fsync failed: stop at once. What is in flight could not be saved
        either, so it is cancelled rather than given the grace time."""
        if self.journal_failure is None:
            self.journal_failure = message
            self.request_stop(cancel=True)

    def _summary(self, duration: float) -> dict[str, Any]:
        """The collector's summary, with the shards' cool-downs, loop lag (the worst) and GC (summed)."""
        summary = run_summary(
            self.w.name,
            duration,
            self.collector,
            self._journal,
            total_expected=self.total_expected,
            dispatch_complete=self.dispatch_complete,
            skipped=len(self.skip_ids),
            cooldowns=self.cooldowns,
        )
        if self.shards.remote:
            summary["workers"] = self.shards.n
        ends = self.shards.ends()
        summed = merge_counts(e.get("conversations") for e in ends)
        if summed:
            summary["conversations"] = summed
        lags = [e["loop_lag_ms"] for e in ends if e.get("loop_lag_ms")]
        if lags:  # the worst shard's: every timing may include up to that much
            summary["loop_lag_ms"] = {k: max(lag[k] for lag in lags) for k in ("p50", "p99", "max")}
        rl = ratelimit.summary(e.get("ratelimit") for e in ends)
        if rl:
            summary["ratelimit"] = rl
        if self.server is not None:
            self.server.into(summary)
        gcs = [e["gc"] for e in ends if e.get("gc")]
        if gcs:
            summary["gc"] = {
                "collections": sum(g["collections"] for g in gcs),
                "pause_ms": round(sum(g["pause_ms"] for g in gcs), 3),
            }
        return summary

    # --- snapshots ----------------------------------------------------------------------------
    def gauges(self) -> Gauges:
        g = self.shards.gauges(self)
        if self.server is None:
            return g
        return dataclasses.replace(g, server=self.server.gauges(), gpus=self.server.gpus())

    def _in_flight_by_endpoint(self) -> dict[str, int]:
        """What this run has out to each endpoint now (a server round keeps it beside the
        engine's running + waiting)."""
        g = self.shards.gauges(self)
        out: dict[str, int] = {}
        for m in self.w.models:
            mg = g.models.get(m.name)
            if mg is not None:
                out[m.endpoint] = out.get(m.endpoint, 0) + mg.in_flight
        return out

    def _publish(self) -> None:
        self.latest = self.collector.snapshot(self.gauges())
        if self.metrics is not None:
            self.metrics.publish(self.latest, self.collector)

    async def _ticker(self) -> None:
        loop = asyncio.get_running_loop()
        last_sync = last_tick = loop.time()
        while True:
            await asyncio.sleep(self.publish_interval)
            now = loop.time()
            self._publish()
            if now - last_sync >= 1.0 and self._journal is not None:
                last_sync = now
                await self._journal.sync_async()
            if self.on_tick is not None and now - last_tick >= self.tick_interval and self.latest is not None:
                last_tick = now
                self.on_tick(self.latest)
