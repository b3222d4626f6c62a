"""One shard of a run: prompts -> arrival -> router -> limits -> client -> retry -> its records.

Why this module exists: a run is one coordinator (`runner.Engine`: journal, collector, live
settings, summary) over shards that only dispatch and send. This is the shard, the same code in
the coordinator's own loop (one process), in a worker process (`worker.py`) and in a Ray actor
(`raychannel.py`). It owns its part of the run's limits (slots, rate, token budget), its router,
the models' health, the endpoints and the requests in flight; it takes per-shard commands
(`act`, already cut by `shares.shard_commands`: it never admits or logs one) and hands each
finished record to `record_sink` by a direct call. What happens to one request once it is
dispatched is `request.py`'s story.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from oxconsole.base.gcpace import PacedGC
from oxconsole.engine.commands import (
    Command,
    EnableModel,
    Pause,
    Resume,
    SetCascade,
    SetConcurrency,
    SetRate,
    SetTpm,
    SetWeight,
)
from oxconsole.engine.dispatch import Dispatcher
from oxconsole.engine.endpoints import CONNECT_WITHIN_S, Endpoints, connections_ahead, first_wave
from oxconsole.engine.headroom import Headroom
from oxconsole.engine.limits import Hold
from oxconsole.engine.readahead import ReadAhead
from oxconsole.engine.router import Router
from oxconsole.engine.send.adapt import Bodies
from oxconsole.engine.send.client import AttemptResult
from oxconsole.engine.send.conversations import Sessions
from oxconsole.engine.send.health import ModelHealth
from oxconsole.engine.send.packing import packer_for
from oxconsole.engine.send.request import Sender, Story
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import Gauges, ModelGauge
from oxconsole.workload import Prompt, Workload, iter_prompts

TICK_S = 0.1
"""How often the shard's ticker wakes: its loop lag is how late it woke."""


def quiet_gc() -> PacedGC:
    """Pace the garbage collector for a run (`PacedGC`); a module-level hook benchmarks replace."""
    return PacedGC()


RecordSink = Callable[[RequestRecord], None]
AttemptSink = Callable[[str, str, str], None]
Observe = Callable[[RequestRecord, int], None]


class LocalShard:
    """Dispatches and sends its part of a run: `prepare`, `begin(t0)`, then `await run()`."""

    def __init__(
        self,
        workload: Workload,
        *,
        record_sink: RecordSink,
        attempt_sink: AttemptSink,
        warnings: list[str],
        skip_ids: AbstractSet[str] | None = None,
        endpoint_urls: dict[str, str] | None = None,
        shard: tuple[int, int] | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.w = workload
        self.shard = shard
        """(index, count): this shard sends every count-th prompt from index (one of several)."""
        self.record_sink = record_sink
        """Where each finished record goes: the coordinator's journal and collector, or a pipe."""
        self.attempt_sink = attempt_sink
        """Where a failed attempt that goes again is told, as (model, error class, detail)."""
        self.warnings = warnings
        self.skip_ids: AbstractSet[str] = skip_ids or set()
        self.observe: Observe | None = None
        """Called with each finished request and the requests in flight, before its slot goes back
        (auto concurrency: a lower limit then holds the next request)."""
        self.on_deadline: Callable[[], None] = self.stop
        """What `run.duration` running out does: stop this shard, or (one process) the whole run."""
        self.rate = float(workload.run.rate)
        self.tpm = float(workload.run.tpm)
        self.state = "starting"
        self.dispatched = 0
        self.in_flight = 0
        self.loop_lag_ms = 0.0
        self.loop_lag = LogHistogram()
        """How late the shard's ticker woke, each tick (ms): the client's own event-loop lag, which
        every timing it takes may include. In the summary as `loop_lag_ms`."""
        self.gc: PacedGC | None = None
        self.started_at = time.time()
        self.stopping = False
        self.deadline_hit = False
        self._cancel_now = False
        self._t0 = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()  # something the drain loop waits for changed
        self._dispatch_done = False
        self._shut = False
        self._dispatcher: asyncio.Task[None] | None = None
        self._dispatch_hist: deque[tuple[float, int]] = deque(maxlen=64)
        self._ahead: ReadAhead | None = None
        self.stage_mark: tuple[int, bool] | None = None
        """With [[stages]]: (stage, warm-up) of the requests sent now, set by the coordinator."""
        self.sessions = Sessions.of(workload, self.skip_ids)
        """Multi-turn sessions, when the prompts may have some (`conversations.py`)."""
        self._shared_endpoints = endpoints
        """Endpoints started and closed by the caller (a sweep's points share warm connections)."""
        self._assemble(workload, {} if endpoint_urls is None else endpoint_urls)

    def _assemble(self, workload: Workload, urls: dict[str, str]) -> None:
        """The parts of the shard, wired together: the router, the dispatcher (with its slots and
        rate), the models' health, the endpoints and the request sender."""
        self.router = Router(workload.models, workload.routing, seed=workload.run.seed)
        self.dispatch = Dispatcher(
            workload, self.router, start=self._start, set_state=self._set_state, warn=self.warnings.append
        )
        self.slots = self.dispatch.slots
        share = 1.0 / (self.shard[1] if self.shard is not None else 1)
        self.headroom = {name: Headroom(name, share) for name in workload.endpoints}
        """Endpoint -> its rate-limit figures as this shard hears them (`headroom.py`)."""
        eps = workload.endpoints
        self.dispatch.paced = {
            m.name: self.headroom[m.endpoint] for m in workload.models if eps[m.endpoint].pace_by_headers
        }
        models = {m.name: m for m in workload.models}
        self.health = ModelHealth(
            self.router, models, elapsed=self.elapsed, on_warm=self.dispatch.models_changed
        )
        self.endpoints = self._shared_endpoints or Endpoints(workload, urls, self.warnings)
        self.sender = Sender(
            workload,
            self.router,
            self.health,
            Bodies(workload.models, stream=workload.run.stream, warnings=self.warnings),
            self.endpoints.clients,
            self.warnings,
            stopping=lambda: self.stopping,
            attempt_failed=self._attempt_failed,
        )
        if workload.quality is not None:  # only then: RE2 and the schema validator (3 MB, 15 ms)
            from oxconsole.engine.send.cascade import cascade_for

            self.sender.cascade = cascade_for(workload, self.sender)
        self.packer = packer_for(
            workload, self.sender, self.router, self.dispatch, prefix=self._pack_prefix()
        )

    @property
    def cooldowns(self) -> list[dict[str, Any]]:
        return self.health.cooldowns

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    # --- per-shard commands, on the shard's loop ------------------------------------------------
    def act(self, cmd: Command) -> None:
        """Make this shard's part of a setting so (`shares.shard_commands` cut it)."""
        if isinstance(cmd, SetConcurrency):
            self.slots.set_limit(cmd.value)
        elif isinstance(cmd, SetRate):
            self.rate = cmd.value
            assert self._loop is not None
            self.dispatch.set_rate(cmd.value, self._loop.time())
        elif isinstance(cmd, SetTpm):
            self.tpm = cmd.value
            self.dispatch.set_tpm(cmd.value)
        elif isinstance(cmd, SetWeight):
            self.router.set_weight(cmd.model, cmd.value)
            self.dispatch.models_changed()
        elif isinstance(cmd, EnableModel):
            self.router.set_enabled(cmd.model, cmd.enabled)
            self.dispatch.models_changed()
        elif isinstance(cmd, SetCascade):
            self.router.set_cascade(cmd.steps)
            self.dispatch.models_changed()
        elif isinstance(cmd, Pause):
            self.dispatch.pause()
            self.state = "paused"
        elif isinstance(cmd, Resume):
            self.dispatch.resume()
            self.state = "running"

    def stop(self, *, cancel: bool = False) -> None:
        """Stop dispatching; in-flight requests get `run.grace` seconds (or none with cancel)."""
        self.stopping = True
        if cancel:
            self._cancel_now = True
        self.dispatch.stop()  # a paused or waiting dispatcher must see the stop
        self._wake.set()
        if self._dispatcher is not None and not self._dispatcher.done():
            self._dispatcher.cancel()

    def _attempt_failed(self, model: str, res: AttemptResult) -> None:
        """A failed attempt that goes again: counted live now (by the coordinator, or a parent)."""
        assert res.error is not None
        self.attempt_sink(model, res.error, res.detail or "")

    # --- the shard's run ------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Up to where dispatch can start: the limits set, the endpoints started."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        self.started_at = time.time()
        self.dispatch.resume()
        self.dispatch.set_rate(self.rate, loop.time())
        self.dispatch.set_tpm(self.tpm)
        if self._shared_endpoints is None:
            await self.endpoints.start()
        wave = first_wave(self.slots.limit, self.rate)
        ahead = connections_ahead(self.w, self.router.shares(), wave)
        await self.endpoints.connect(ahead, min(CONNECT_WITHIN_S, self.w.run.timeout))
        self._ahead = ReadAhead(self._shard_prompts())
        self._ahead.fill(wave)
        media = self.sender.bodies.media
        for p in self._ahead.held():  # a synthetic size's first image (3-40 ms), files' data URLs
            media.warm(p.media)
        for name, client in self.endpoints.clients.items():
            client.headroom = self.headroom.get(name)

    def begin(self, t0: float, started_at: float) -> None:
        """The run's clock starts (loop time `t0`): GC paced, the schedule rebased, running."""
        self._t0 = t0
        self.started_at = started_at
        self.gc = self.sender.gc = quiet_gc()
        if self.dispatch.schedule is not None:
            self.dispatch.schedule.rebase(t0)
        self.dispatch.trace.begin(t0, resumed=bool(self.skip_ids))
        self.state = "running"

    async def run(self) -> None:
        """Dispatch every prompt of the shard (or until a stop or `run.duration`), then drain."""
        loop = asyncio.get_running_loop()
        ticker = asyncio.create_task(self._ticker())
        try:
            if self.w.run.duration > 0:
                loop.call_later(self.w.run.duration, self._deadline)
                self.dispatch.deadline = loop.time() + self.w.run.duration
            self._dispatcher = asyncio.create_task(self.dispatch.run(self._work()))
            try:
                await self._dispatcher
            except asyncio.CancelledError:
                if not self.stopping:
                    raise
            self._dispatch_done = True
            self.state = "draining"
            await self._drain()
        finally:
            ticker.cancel()
            await self.shut_down()

    def _work(self) -> Iterator[Prompt | Awaitable[None]]:
        """Tasks gathered into packs, or a session's next turn once its answer is back (packing
        and sessions exclude each other: check_prompts refuses both, exit 2)."""
        if self.packer is not None:
            return self.packer.packs(self._prompts())
        if self.sessions is not None:
            return self.sessions.prompts(self._prompts())
        return self._prompts()

    async def shut_down(self) -> None:
        """Whatever ended the run: cancel what is left, restore GC, close the endpoints (once)."""
        self.state = "done"
        if self._shut:
            return
        self._shut = True
        if self.gc is not None:
            self.gc.restore()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.sender.cascade is not None:
            self.sender.cascade.close()
        if self._shared_endpoints is None:
            await self.endpoints.close()

    @property
    def dispatch_complete(self) -> bool:
        """Dispatch reached the run's end: every prompt was started, or `run.duration` ran out."""
        return self.dispatch.exhausted or self.deadline_hit

    def _deadline(self) -> None:
        if not self.stopping:
            self.deadline_hit = True
            self.on_deadline()

    def _prompts(self) -> Iterator[Prompt]:
        """The shard's prompts: those read ahead before the clock (`prepare`), then the rest."""
        return iter(self._ahead if self._ahead is not None else self._shard_prompts())

    def _shard_prompts(self) -> Iterator[Prompt]:
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
            if self.observe is not None:  # before the slot goes back: a lower limit then holds the next
                self.observe(rec, self.in_flight)
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
        slo, sink = self.w.slo, self.record_sink
        for r in (rec,) if recs is None else recs:
            if mark is not None:
                r.stage, r.warmup = mark
            if self.sessions is not None:
                self.sessions.finished(r)
            if slo is not None:  # with [quality] a good answer is also a valid one
                r.slo_ok = slo.good(r) and r.valid is not False
            sink(r)

    def _pack_prefix(self) -> str:
        """What makes this shard's pack ids unique in its journal: its worker, and after --resume
        the session's start (pack ids are then "pack-w1.r5f3a.7")."""
        prefix = f"w{self.shard[0]}." if self.shard is not None and self.shard[1] > 1 else ""
        return prefix + (f"r{int(self.started_at):x}." if self.skip_ids else "")

    async def _drain(self) -> None:
        """Wait for requests in flight: all of them, or `grace` seconds after a stop."""
        loop = asyncio.get_running_loop()
        grace_deadline: float | None = None
        while self.in_flight > 0:
            if self._cancel_now:
                break
            if self.stopping and grace_deadline is None:
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

    # --- gauges and the end -----------------------------------------------------------------------
    def gauges(
        self,
        *,
        total_expected: int | None = None,
        auto: bool = False,
        state: str | None = None,
        rate: float | None = None,
        tpm: float | None = None,
    ) -> Gauges:
        """What this shard is doing now; the coordinator gives the run's own state and settings."""
        budget = self.dispatch.budget
        hist = self._dispatch_hist
        achieved = 0.0
        if len(hist) >= 2:
            t_a, n_a = hist[0]
            t_b, n_b = hist[-1]
            if t_b > t_a:
                achieved = (n_b - n_a) / (t_b - t_a)
        router = self.router
        return Gauges(
            state=self.state if state is None else state,
            elapsed_s=self.elapsed(),
            total_expected=total_expected,
            dispatched=self.dispatched,
            in_flight=self.in_flight,
            waiting_slot=self.dispatch.waiting_slot,
            waiting_bucket=self.dispatch.waiting_bucket,
            backing_off=self.sender.backing_off,
            concurrency=self.slots.limit,
            rate=self.rate if rate is None else rate,
            achieved_rate=achieved,
            loop_lag_ms=self.loop_lag_ms,
            warnings=tuple(self.warnings),
            tpm=self.tpm if tpm is None else tpm,
            tpm_used=0.0 if budget is None else budget.used,
            waiting_tpm=self.dispatch.waiting_tpm,
            auto=auto,
            ratelimit=self.ratelimit(),
            models={
                n: ModelGauge(
                    weight=router.weights[n],
                    enabled=router.enabled[n],
                    in_flight=router.in_flight[n],
                    cooled_down=router.cooled[n],
                )
                for n in router.names
            },
        )

    def end(self) -> dict[str, Any]:
        """What the shard's run leaves for the run's summary (`messages.py`'s END, less counts)."""
        lag = self.loop_lag.summary()
        sessions = self.sessions
        return {
            "warnings": list(self.warnings),
            "cooldowns": self.cooldowns,
            "loop_lag_ms": {"p50": lag["p50"], "p99": lag["p99"], "max": lag["max"]},
            "gc": None
            if self.gc is None
            else {"collections": self.gc.collections, "pause_ms": round(self.gc.pause_ms, 3)},
            "conversations": sessions.counts()
            if sessions is not None and sessions.total + sessions.skipped
            else None,
            "complete": self.dispatch_complete,
            "ratelimit": self.ratelimit(),
        }

    def ratelimit(self) -> dict[str, dict[str, Any]] | None:
        """Each endpoint's rate-limit figures (`Headroom.state`), for those that sent any."""
        out = {name: st for name, room in self.headroom.items() if (st := room.state()) is not None}
        return out or None

    async def _ticker(self) -> None:
        loop = asyncio.get_running_loop()
        lag_ewma = 0.0
        perf = time.perf_counter
        while True:
            t_before = perf()
            await asyncio.sleep(TICK_S)
            now = loop.time()
            lag = max(0.0, (perf() - t_before - TICK_S) * 1000.0)  # perf: uvloop's clock is in ms
            self.loop_lag.record(lag)
            if self.gc is not None:
                self.gc.tick()
            lag_ewma = lag if lag > lag_ewma else 0.8 * lag_ewma + 0.2 * lag
            self.loop_lag_ms = lag_ewma
            self._dispatch_hist.append((now, self.dispatched))
            while self._dispatch_hist and now - self._dispatch_hist[0][0] > 5.0:
                self._dispatch_hist.popleft()
