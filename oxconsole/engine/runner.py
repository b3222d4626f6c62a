"""The run: prompts -> arrival -> router -> limits -> client -> retry -> journal + metrics.

Why this module exists: this is the one place that owns the event loop of a run. It never imports
the UI: a console (or a test) reads `Engine.latest` snapshots and calls `Engine.submit(command)`,
which is safe from any thread and applied here, on the engine's own loop, with its time logged.
What happens to one request once it is dispatched is `request.py`'s story.

`RunOutcome`, `RunEngine`, `rejected_field` and `backoff_delay` are still importable from here (their
old home) for code written before the split.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from oxconsole.engine.adapt import Bodies
from oxconsole.engine.adapt import rejected_field as rejected_field
from oxconsole.engine.autorun import AutoRun
from oxconsole.engine.client import AttemptResult
from oxconsole.engine.commands import By, Command, Stop
from oxconsole.engine.conversations import Sessions
from oxconsole.engine.dispatch import Dispatcher
from oxconsole.engine.endpoints import Endpoints, open_files_warning
from oxconsole.engine.health import ModelHealth
from oxconsole.engine.limits import Hold
from oxconsole.engine.live import Change, LiveSettings
from oxconsole.engine.outcome import RunEngine as RunEngine
from oxconsole.engine.outcome import RunOutcome as RunOutcome
from oxconsole.engine.outcome import ended
from oxconsole.engine.packing import packer_for
from oxconsole.engine.prometheus import MetricsEndpoint, metrics_endpoint
from oxconsole.engine.request import Sender, Story
from oxconsole.engine.request import backoff_delay as backoff_delay
from oxconsole.engine.router import Router
from oxconsole.engine.saved import run_summary
from oxconsole.engine.stages import StageDriver
from oxconsole.gcpace import PacedGC
from oxconsole.journal.fingerprint import open_journal
from oxconsole.journal.journal import Journal
from oxconsole.journal.records import RequestRecord
from oxconsole.journal.sessions import SessionLog
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.workload import ModelConfig, Prompt, Workload, iter_prompts


def quiet_gc() -> PacedGC:
    """Pace the garbage collector for a run (`PacedGC`); a module-level hook benchmarks replace."""
    return PacedGC()


def new_collector(w: Workload, started_at: float) -> Collector:
    """The metrics collector for a run, with each model's prices for cost projections."""
    c = Collector(
        [m.name for m in w.models],
        started_at=started_at,
        prices={m.name: (m.price_per_request, m.price_per_1m_input, m.price_per_1m_output) for m in w.models},
        plans=w.plans,
        slo_target=None if w.slo is None else w.slo.target,
    )
    c.packing_size = w.packing.size
    return c


class Engine:
    """Runs one workload. Create it, then `await run()` on the loop that should own the run."""

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
        shard: tuple[int, int] | None = None,
        record_sink: Callable[[RequestRecord], None] | None = None,
        attempt_sink: Callable[[str, str, str], None] | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.w = workload
        self.shard = shard
        """(index, count): this engine sends every count-th prompt from index (one of several workers)."""
        self.record_sink = record_sink
        """Where finished records go instead of the journal and collector (a worker's parent)."""
        self.attempt_sink = attempt_sink
        """Where failed attempts that go again are told, as (model, error class, detail), instead of
        the collector (a worker's parent)."""
        self.results_path = results_path
        self.skip_ids: AbstractSet[str] = skip_ids or set()
        self.total_expected = total_expected
        self.endpoint_urls = dict(endpoint_urls or {})
        self.publish_interval = publish_interval
        self.on_tick = on_tick
        self.tick_interval = tick_interval
        self.models: dict[str, ModelConfig] = {m.name: m for m in workload.models}
        self._slo = workload.slo
        self.started_at = time.time()
        self.collector = self._new_collector()
        self.latest: Snapshot | None = None
        self.state = "starting"
        self.dispatched = 0
        self.in_flight = 0
        self.loop_lag_ms = 0.0
        self.loop_lag = LogHistogram()
        """How late the engine's 100 ms ticker woke, each tick (ms): the client's own event-loop lag,
        which every timing it takes may include. In the summary as `loop_lag_ms`."""
        self._gc: PacedGC | None = None
        self.ok = 0
        self.errors = 0
        self.warnings: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._journal: Journal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0  # loop time at start
        self._stop_requested = False
        self._cancel_now = False
        self._interrupted = False
        self._deadline_hit = False
        self.journal_failure: str | None = None
        """Why the journal could not be written: the run stopped at once (exit 4)."""
        self._wake = asyncio.Event()  # something the drain loop waits for changed
        self._dispatch_done = False
        self._dispatch_hist: deque[tuple[float, int]] = deque(maxlen=64)
        self.session = SessionLog(results_path, self.warnings)
        """This session's start and running time, in the journal's manifest (`--resume` summaries)."""
        self._held: list[tuple[Command, By]] = []  # commands that came while the run was starting
        self.stage_mark: tuple[int, bool] | None = None
        """With [[stages]]: (stage, warm-up) of the requests sent now, set by `engine/stages.py`."""
        self.stages: StageDriver | None = None
        self.sessions = Sessions.of(workload, self.skip_ids)
        """Multi-turn sessions, when the prompts may have some (`sessions.py`)."""
        self._shared_endpoints = endpoints
        """Endpoints started and closed by the caller (a sweep's points share warm connections)."""
        self._assemble(workload)

    def _assemble(self, workload: Workload) -> None:
        """The parts of the run, wired together: its live settings, the router, the dispatcher
        (with its slots and rate), the models' health, the endpoints and the request sender."""
        self.live = LiveSettings.of(workload)
        self.auto = AutoRun.of(workload)
        """Adaptive concurrency (engine/autorun.py) while `live.auto`; None without [slo]."""
        self.router = Router(workload.models, workload.routing, seed=workload.run.seed)
        self.dispatch = Dispatcher(
            workload, self.router, start=self._start, set_state=self._set_state, warn=self.warnings.append
        )
        self.slots = self.dispatch.slots
        self.health = ModelHealth(
            self.router, self.models, elapsed=self.elapsed, on_warm=self.dispatch.models_changed
        )
        self.endpoints = self._shared_endpoints or Endpoints(workload, self.endpoint_urls, self.warnings)
        self.sender = Sender(
            workload,
            self.router,
            self.health,
            Bodies(workload.models, stream=workload.run.stream, warnings=self.warnings),
            self.endpoints.clients,
            self.warnings,
            stopping=lambda: self._stop_requested,
            attempt_failed=self._attempt_failed,
        )
        prefix = self._pack_prefix()
        self.packer = packer_for(workload, self.sender, self.router, self.dispatch, prefix=prefix)

    @property
    def rate(self) -> float:
        """The run's rate now (requests per second; 0 = unlimited)."""
        return self.live.rate

    @property
    def cooldowns(self) -> list[dict[str, Any]]:
        return self.health.cooldowns

    # --- control, from any thread -------------------------------------------------------------
    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError` (`LiveSettings.admit`). Safe from
        any thread; changes nothing."""
        return self.live.admit(cmd)

    def submit(self, cmd: Command, by: By = "command") -> None:
        """Queue a command for the engine loop. Safe from any thread, also before run() starts.
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
        self._stop_requested = True
        self.live.stopping()
        if cancel:
            self._cancel_now = True
        self.dispatch.stop()  # a paused or waiting dispatcher must see the stop
        self._wake.set()
        if self._dispatcher is not None and not self._dispatcher.done():
            self._dispatcher.cancel()

    _dispatcher: asyncio.Task[None] | None = None
    metrics: MetricsEndpoint | None = None
    """`/metrics` while the run lasts (`[output] prometheus`), fed at each publish."""

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    def apply(self, cmd: Command, by: By = "command") -> None:
        """Apply a command on the engine loop (call only from the loop; `submit` from elsewhere);
        its changes are logged as made `by` a key, a command, a stage or the auto controller.
        Raises `CommandError`, having changed nothing, for a command `LiveSettings` refuses.
        Before dispatch can start (the run's clock and its log of changes start then), a command
        other than `Stop` is held and applied when it does."""
        if self.state == "starting" and not isinstance(cmd, Stop):
            self._held.append((self.live.admit(cmd), by))
            return
        changes = self.live.apply(cmd)
        if isinstance(cmd, Stop):
            self.request_stop(cancel=cmd.cancel, interrupted=True)
        t = round(self.elapsed(), 3)
        for c in changes:
            self._act(c)
            self.collector.change(t, c.what, c.old, c.new, model=c.model, by=by)
        self._publish()

    def _act(self, c: Change) -> None:
        """Make a changed setting so: the slots, the limiter or schedule, the router, the pause."""
        if c.what == "concurrency":
            self.slots.set_limit(c.new)
        elif c.what == "auto":
            if c.new and self.auto is not None:
                self.auto.restart(self.slots.limit, self.elapsed())
        elif c.what == "rate":
            self._set_rate(c.new)
        elif c.what == "tpm":
            self.dispatch.set_tpm(c.new)
        elif c.what == "weight" or c.what == "enabled":
            assert c.model is not None
            if c.what == "weight":
                self.router.set_weight(c.model, c.new)
            else:
                self.router.set_enabled(c.model, c.new)
            self.dispatch.models_changed()
        elif c.new:  # paused
            self.dispatch.pause()
            self.state = "paused"
        else:
            self.dispatch.resume()
            self.state = "running"

    def _set_rate(self, value: float) -> None:
        assert self._loop is not None
        self.dispatch.set_rate(value, self._loop.time())

    def _attempt_failed(self, model: str, res: AttemptResult) -> None:
        """A failed attempt that goes again: counted live now (here, or in a worker's parent)."""
        assert res.error is not None
        if self.attempt_sink is not None:
            self.attempt_sink(model, res.error, res.detail or "")
        else:
            self.collector.record_attempt_error(model, res.error, res.detail or "")

    # --- the run ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        self.started_at = time.time()
        self.collector = self._new_collector()
        self.dispatch.resume()
        self._set_rate(self.rate)
        self.dispatch.set_tpm(self.live.tpm)
        if self.record_sink is None:
            self._journal, notes = open_journal(
                self.w, self.results_path, self.skip_ids, on_failure=self._journal_failed
            )
            self.warnings.extend(notes)
        ticker = None
        self.metrics = metrics_endpoint(self.w, self.warnings) if self.record_sink is None else None
        try:
            note = open_files_warning(self.w)
            if note:
                self.warnings.append(note)
            if self._shared_endpoints is None:
                await self.endpoints.start()
            self._begin(loop)
            ticker = asyncio.create_task(self._ticker())
            if self.w.run.duration > 0:
                loop.call_later(self.w.run.duration, self._deadline)
                self.dispatch.deadline = loop.time() + self.w.run.duration
            # tasks gathered into packs, or a session's next turn once its answer is back (packing
            # and sessions exclude each other: check_prompts refuses both, exit 2)
            prompts: Iterator[Prompt | Awaitable[None]]
            if self.packer is not None:
                prompts = self.packer.packs(self._prompts())
            elif self.sessions is not None:
                prompts = self.sessions.prompts(self._prompts())
            else:
                prompts = self._prompts()
            self._dispatcher = asyncio.create_task(self.dispatch.run(prompts))
            try:
                await self._dispatcher
            except asyncio.CancelledError:
                if not self._stop_requested:
                    raise
            self._dispatch_done = True
            self.state = "draining"
            await self._drain()
        finally:
            await self._shut_down(ticker)
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
        )

    def _begin(self, loop: asyncio.AbstractEventLoop) -> None:
        """The run's clock starts when dispatch can start (after a simulator is up): a fresh
        collector, the session begun, GC paced, the schedule rebased, held commands applied."""
        self._t0 = loop.time()
        self.started_at = time.time()
        self.collector = self._new_collector()
        if self._journal is not None:
            self.session.begin(self.started_at)
        self._gc = self.sender.gc = quiet_gc()
        if self.dispatch.schedule is not None:
            self.dispatch.schedule.rebase(self._t0)
        self.state = "running"
        held, self._held = self._held, []
        for cmd, by in held:
            self.apply(cmd, by)
        if self.w.stages and self.record_sink is None:  # a worker's stages are its parent's
            self.stages = StageDriver.start(self, self._deadline)

    @property
    def dispatch_complete(self) -> bool:
        """Dispatch reached the run's end: every prompt was started, or `run.duration` ran out."""
        return self.dispatch.exhausted or self._deadline_hit

    def _journal_failed(self, message: str) -> None:
        """A journal write or fsync failed: stop at once. What is in flight could not be saved
        either, so it is cancelled rather than given the grace time."""
        if self.journal_failure is None:
            self.journal_failure = message
            self.request_stop(cancel=True)

    async def _shut_down(self, ticker: asyncio.Task[None] | None) -> None:
        """Whatever ended the run: cancel what is left, close the endpoints and the journal."""
        self.state = "done"
        if self.stages is not None:
            self.stages.cancel()
        if self._gc is not None:
            self._gc.restore()
        if ticker is not None:
            ticker.cancel()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._shared_endpoints is None:
            await self.endpoints.close()
        if self._journal is not None:
            self._journal.close()

    def _summary(self, duration: float) -> dict[str, Any]:
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
        if self.sessions is not None and self.sessions.total + self.sessions.skipped:
            summary["conversations"] = self.sessions.counts()
        lag = self.loop_lag.summary()
        summary["loop_lag_ms"] = {"p50": lag["p50"], "p99": lag["p99"], "max": lag["max"]}
        if self._gc is not None:
            summary["gc"] = {"collections": self._gc.collections, "pause_ms": round(self._gc.pause_ms, 3)}
        return summary

    def _new_collector(self) -> Collector:
        return new_collector(self.w, self.started_at)

    def _deadline(self) -> None:
        if not self._stop_requested:
            self._deadline_hit = True
            self.request_stop()

    def _prompts(self) -> Iterator[Prompt]:
        skip = self.skip_ids
        index, count = self.shard or (0, 1)
        for i, p in enumerate(iter_prompts(self.w)):
            if count > 1 and i % count != index:
                continue
            if skip and p.id in skip:
                continue
            yield p

    def _start(self, prompt: Prompt, model: str, t_sched: float, hold: Hold | None) -> None:
        """Send a prompt to a model (the dispatcher took a slot for it, and its tokens' hold in the
        budget when there is one), due at t_sched."""
        self.dispatched += 1
        self.in_flight += 1
        self.router.in_flight[model] += 1
        wall_sched = self.started_at + (t_sched - self._t0)
        task = asyncio.get_running_loop().create_task(
            self._request(prompt, model, wall_sched, t_sched, hold, self.stage_mark)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _set_state(self, state: str) -> None:
        self.state = state

    # --- one request: its story is `Sender.send`; here its slot and its record ---------------
    async def _request(
        self,
        prompt: Prompt,
        model: str,
        t_sched_wall: float,
        t_sched: float,
        hold: Hold | None,
        mark: tuple[int, bool] | None,
    ) -> None:
        story = Story(prompt, model, t_sched_wall, t_sched, hold=hold)
        recs = None
        try:
            rec = await self.sender.send(story)
            if self.live.auto:  # before the slot goes back: a lower limit then holds the next one
                self._auto_step(rec)
            if self.packer is not None:  # a pack's record into its tasks' (re-sent when it did not split)
                recs = await self.packer.finish(story, rec)
        finally:
            self.slots.release()
            self.in_flight -= 1
            self.router.in_flight[story.model] -= 1
            if self.in_flight == 0 and self._dispatch_done:
                self._wake.set()
        if hold is not None:
            self.dispatch.settle(hold, rec)
        for r in (rec,) if recs is None else recs:
            if mark is not None:
                r.stage, r.warmup = mark
            if self.sessions is not None:
                self.sessions.finished(r)
            self._finish(r)

    def _pack_prefix(self) -> str:
        """What makes this engine's pack ids unique in its journal: its worker, and after --resume
        the session's start (pack ids are then "pack-w1.r5f3a.7")."""
        prefix = f"w{self.shard[0]}." if self.shard is not None and self.shard[1] > 1 else ""
        return prefix + (f"r{int(self.started_at):x}." if self.skip_ids else "")

    def _finish(self, rec: RequestRecord) -> None:
        if self._slo is not None:
            rec.slo_ok = self._slo.good(rec)
        if rec.status == "ok":
            self.ok += 1
        else:
            self.errors += 1
        if self.record_sink is not None:
            self.record_sink(rec)
            return
        assert self._journal is not None
        self._journal.write(rec)
        rec.text = None  # the collector does not need it; let it go
        self.collector.record(rec)

    def _auto_step(self, rec: RequestRecord) -> None:
        """Feed a finished request to the auto controller; apply (and log, by "auto") a new limit.
        Called before the request's slot is released: released first, the slot can go straight to
        the waiting dispatcher under the old limit, and that request would judge the new one."""
        if self.auto is None:
            return
        limit = self.auto.observe(rec, self.elapsed(), self.in_flight - 1)
        c = None if limit is None else self.live.auto_limit(limit)
        if c is not None:
            self._act(c)
            self.collector.change(round(self.elapsed(), 3), c.what, c.old, c.new, by="auto")

    async def _drain(self) -> None:
        """Wait for requests in flight: all of them, or `grace` seconds after a stop."""
        loop = asyncio.get_running_loop()
        grace_deadline: float | None = None
        while self.in_flight > 0:
            if self._cancel_now:
                break
            if self._stop_requested and grace_deadline is None:
                grace_deadline = loop.time() + self.w.run.grace
            timeout = None if grace_deadline is None else grace_deadline - loop.time()
            if timeout is not None and timeout <= 0:
                break
            self._wake.clear()
            if self.in_flight == 0:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                break
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- gauges, snapshots, housekeeping ------------------------------------------------------
    def gauges(self) -> Gauges:
        now = self.elapsed()
        budget = self.dispatch.budget
        hist = self._dispatch_hist
        achieved = 0.0
        if len(hist) >= 2:
            t_a, n_a = hist[0]
            t_b, n_b = hist[-1]
            if t_b > t_a:
                achieved = (n_b - n_a) / (t_b - t_a)
        return Gauges(
            state=self.state,
            elapsed_s=now,
            total_expected=self.total_expected,
            dispatched=self.dispatched,
            in_flight=self.in_flight,
            waiting_slot=self.dispatch.waiting_slot,
            waiting_bucket=self.dispatch.waiting_bucket,
            backing_off=self.sender.backing_off,
            concurrency=self.slots.limit,
            rate=self.rate,
            achieved_rate=achieved,
            loop_lag_ms=self.loop_lag_ms,
            warnings=tuple(self.warnings),
            tpm=self.live.tpm,
            tpm_used=0.0 if budget is None else budget.used,
            waiting_tpm=self.dispatch.waiting_tpm,
            auto=self.live.auto,
            models={
                n: ModelGauge(
                    weight=self.router.weights[n],
                    enabled=self.router.enabled[n],
                    in_flight=self.router.in_flight[n],
                    cooled_down=self.router.cooled[n],
                )
                for n in self.router.names
            },
        )

    def _publish(self) -> None:
        self.latest = self.collector.snapshot(self.gauges())
        if self.metrics is not None:
            self.metrics.publish(self.latest, self.collector)

    async def _ticker(self) -> None:
        loop = asyncio.get_running_loop()
        step = 0.1
        last_pub = last_sync = last_tick = loop.time()
        lag_ewma = 0.0
        perf = time.perf_counter
        while True:
            t_before = perf()
            await asyncio.sleep(step)
            now = loop.time()
            lag = max(0.0, (perf() - t_before - step) * 1000.0)  # perf: uvloop's clock is in ms
            self.loop_lag.record(lag)
            if self._gc is not None:
                self._gc.tick()
            lag_ewma = lag if lag > lag_ewma else 0.8 * lag_ewma + 0.2 * lag
            self.loop_lag_ms = lag_ewma
            self._dispatch_hist.append((now, self.dispatched))
            while self._dispatch_hist and now - self._dispatch_hist[0][0] > 5.0:
                self._dispatch_hist.popleft()
            if now - last_pub >= self.publish_interval:
                last_pub = now
                self._publish()
            if now - last_sync >= 1.0 and self._journal is not None:
                last_sync = now
                await self._journal.sync_async()
            if self.on_tick is not None and now - last_tick >= self.tick_interval:
                last_tick = now
                if self.latest is not None:
                    self.on_tick(self.latest)
