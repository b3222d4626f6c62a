"""Several engine processes sharing one run: `run.workers = N` (or "auto", one per core).

Why this module exists: one Python process tops out at roughly a core's worth of requests; when
the client is the bottleneck, more processes must share the load. The design keeps one source of
truth: worker processes (`worker.py`) do the expensive part (HTTP, stream parsing) on their share
of the prompts, concurrency, rate and token budget, and send each finished record to this process,
which alone writes the journal, feeds the metrics collector, publishes snapshots and applies
commands (split into shares and forwarded). So a run with workers looks, to the console, `ps`,
`attach` and the summary, exactly like a run without. `wire.py` says what goes between them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.engine.commands import By, Command, SetConcurrency, SetRate, SetTpm, Stop, command_to_dict
from oxconsole.engine.conversations import merge_counts
from oxconsole.engine.endpoints import start_sim
from oxconsole.engine.live import Change, LiveSettings
from oxconsole.engine.messages import (
    ATTEMPTS,
    END,
    GAUGES,
    GO,
    JOURNAL_TAG,
    READY,
    RECORDS,
    STAGE,
    STOP,
    Channel,
)
from oxconsole.engine.outcome import RunOutcome
from oxconsole.engine.outcome import ended as outcome_of
from oxconsole.engine.prometheus import MetricsEndpoint, metrics_endpoint
from oxconsole.engine.runner import Engine, new_collector
from oxconsole.engine.saved import run_summary
from oxconsole.engine.stages import StageDriver
from oxconsole.engine.worker import worker_main
from oxconsole.journal.fingerprint import open_journal
from oxconsole.journal.journal import Journal
from oxconsole.journal.records import RequestRecord
from oxconsole.journal.sessions import SessionLog
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.workload import Workload

if TYPE_CHECKING:
    from oxconsole.sim.process import SimProcess


def worker_context() -> ForkServerContext | SpawnContext:
    """How worker processes start: forked from multiprocessing's fork server, which imported the
    engine once (`spawn` imported it again in every worker: about 1.5 s of CPU each, the bulk of a
    short run's start with several workers), or spawned where there is no fork server (Windows).
    A fork server's children start from its state, not this process's: `worker_main` takes this
    process's environment and folder (`here`)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["oxconsole.engine.worker"])
    return ctx


def stop_fork_server() -> None:
    """Stop multiprocessing's fork server once a run's workers have ended, and wait for it.

    The fork server reaped the workers, so their CPU is in its own children's usage; waited for,
    it counts in this process's (`resource.RUSAGE_CHILDREN`, what `time` and the benchmarks read),
    as a spawned worker's did. Left running, it would outlive the figures and be reaped by init.
    The next run starts it again: one import per run, not one per worker. Nothing to do where it
    never started (spawn, Ray)."""
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)  # CPython's own, private: guarded
    if callable(stop):
        stop()


def worker_count(w: Workload) -> int:
    n = w.run.workers
    if n == "auto":
        return max(1, os.cpu_count() or 1)
    return max(1, int(n))


def split(total: int, n: int) -> list[int]:
    """Shares of an integer limit, each at least 1, differing by at most one."""
    base, extra = divmod(max(total, n), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def share(w: Workload, i: int, n: int) -> Workload:
    """Worker i's part of the run: its concurrency, rate, token budget and seed. The token budget's
    shares are whole tokens rounded down (at least 1), so that together they never exceed it."""
    run = w.run
    return dataclasses.replace(
        w,
        run=dataclasses.replace(
            run,
            concurrency=split(run.concurrency, n)[i],
            rate=run.rate / n,
            tpm=max(1, run.tpm // n) if run.tpm else 0,
            seed=run.seed * 1000 + i,
            workers=1,
        ),
    )


def make_engine(workload: Workload, **kwargs: Any) -> Engine | WorkerPool:
    """An Engine, or a WorkerPool when `run.workers` asks for more than one process."""
    if workload.run.cluster == "ray":  # N engine actors on a Ray cluster
        from oxconsole.engine.raypool import RayPool

        kwargs.pop("endpoint_urls", None)
        return RayPool(workload, **kwargs)
    if worker_count(workload) > 1:
        kwargs.pop("endpoint_urls", None)
        return WorkerPool(workload, **kwargs)
    return Engine(workload, **kwargs)


@dataclasses.dataclass
class WorkerHandle:
    """One worker as the pool sees it: its process (or Ray actor: `raypool.ActorProc`), the
    channel to it, its last gauges and its end message."""

    proc: Any
    conn: Channel
    gauges: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


class WorkerPool:
    """Runs a workload on N worker processes; the same surface as `Engine` for the CLI and console."""

    def __init__(
        self,
        workload: Workload,
        *,
        results_path: Path,
        skip_ids: AbstractSet[str] | None = None,
        total_expected: int | None = None,
        publish_interval: float = 0.25,
        on_tick: Callable[[Snapshot], None] | None = None,
        tick_interval: float = 2.0,
        workers: int | None = None,
    ) -> None:
        self.w = workload
        self.n = workers or worker_count(workload)
        self.results_path = results_path
        self.skip_ids: AbstractSet[str] = skip_ids or set()
        self.total_expected = total_expected
        self.publish_interval = publish_interval
        self.on_tick = on_tick
        self.tick_interval = tick_interval
        self.latest: Snapshot | None = None
        self.metrics: MetricsEndpoint | None = None
        self.state = "starting"
        self.live = LiveSettings.of(workload)
        self.warnings: list[str] = []
        self.cooldowns: list[dict[str, Any]] = []
        self.started_at = time.time()
        self.collector = self._new_collector()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0
        self._workers: list[WorkerHandle] = []
        self._journal: Journal | None = None
        self._interrupted = False
        self.journal_failure: str | None = None
        """Why the journal could not be written: the run stopped at once (exit 4)."""
        self._crashed = False
        self._ok = 0
        self._errors = 0
        self._all_ended = asyncio.Event()
        self._ready = 0
        self._all_ready = asyncio.Event()
        self._sim: SimProcess | None = None
        self.session = SessionLog(results_path, self.warnings)
        self._held: list[tuple[Command, By]] = []  # commands that came while the workers were starting
        self.stages: StageDriver | None = None
        self._stage_mark: tuple[int, bool] | None = None
        self._planned_end = False  # the stages ran out: the run's own end, as run.duration's

    def _new_collector(self) -> Collector:
        return new_collector(self.w, self.started_at)

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    # --- control ------------------------------------------------------------------------------
    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError`; changes nothing (`Engine.admit`)."""
        return self.live.admit(cmd)

    def submit(self, cmd: Command, by: By = "command") -> None:
        """Queue a command for the pool's loop; a command no run could take raises `CommandError`
        here, in the caller's thread."""
        if self._loop is None:
            raise RuntimeError("engine is not running")
        self._loop.call_soon_threadsafe(self.apply, self.live.admit(cmd), by)

    def _send(self, i: int, d: dict[str, Any]) -> None:
        try:
            self._workers[i].conn.send_bytes(orjson.dumps(d))
        except (OSError, ValueError):
            pass  # a worker that already ended takes no commands

    def _broadcast(self, cmd: Command) -> None:
        for i in range(len(self._workers)):
            self._send(i, command_to_dict(cmd))

    def apply(self, cmd: Command, by: By = "command") -> None:
        """Apply a command (on the pool's loop): raises `CommandError`, having changed nothing and
        sent no worker anything, for a command `LiveSettings` refuses. Until every worker starts
        (the run's clock and its log of changes start then), a command other than `Stop` is held."""
        if self.state == "starting" and not isinstance(cmd, Stop):
            self._held.append((self.live.admit(cmd), by))
            return
        changes = self.live.apply(cmd)
        if isinstance(cmd, Stop):
            self.request_stop(cancel=cmd.cancel, interrupted=True)
        t = round(self.elapsed(), 3)
        for c in changes:
            self._forward(c)
            self.collector.change(t, c.what, c.old, c.new, model=c.model, by=by)
        self._publish()

    def _forward(self, c: Change) -> None:
        """Each worker's share of a changed setting: its part of the concurrency, rate / n, tpm / n,
        and weights, switches and pause as they are."""
        if c.what == "concurrency":
            for i, part in enumerate(split(c.new, self.n)):
                self._send(i, command_to_dict(SetConcurrency(part)))
        elif c.what == "rate":
            self._broadcast(SetRate(c.new / self.n))
        elif c.what == "tpm":
            self._broadcast(SetTpm(c.new / self.n))
        else:
            self._broadcast(c.command())

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        if interrupted:
            self._interrupted = True
        self.live.stopping()
        for i in range(len(self._workers)):
            self._send(i, {"cmd": STOP, "cancel": cancel})

    # --- the run ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._journal, notes = open_journal(
            self.w, self.results_path, self.skip_ids, on_failure=self._journal_failed
        )
        self.warnings.extend(notes)
        ticker = None
        self.metrics = metrics_endpoint(self.w, self.warnings)
        try:
            await self._start_workers()
            if not self._workers:  # stopped while they were starting (a Ray cluster's join)
                self._all_ended.set()
            ready = asyncio.create_task(self._all_ready.wait())
            ended = asyncio.create_task(self._all_ended.wait())
            await asyncio.wait({ready, ended}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            # The run's clock starts when every worker can dispatch.
            self._t0 = loop.time()
            self.started_at = time.time()
            self.collector = self._new_collector()
            self.session.begin(self.started_at)
            if self.w.stages:  # before GO: the first requests are the first stage's
                self.stage_mark = (0, self.w.stages[0].warmup)
            for i in range(len(self._workers)):
                self._send(i, {"cmd": GO})
            if self.journal_failure is not None:  # failed as it opened: nothing may run
                self.request_stop(cancel=True)
            self.state = "running"
            held, self._held = self._held, []
            for cmd, by in held:
                self.apply(cmd, by)
            if self.w.stages:
                self.stages = StageDriver.start(self, self._stages_done)
            ticker = asyncio.create_task(self._ticker())
            await ended
        finally:
            self.state = "done"
            if self.stages is not None:
                self.stages.cancel()
            if ticker is not None:
                ticker.cancel()
            for wk in self._workers:
                await asyncio.to_thread(wk.proc.join, 30)
                if wk.proc.is_alive():
                    wk.proc.kill()
            await asyncio.to_thread(stop_fork_server)
            if self._sim is not None:
                await asyncio.to_thread(self._sim.stop)
            self._journal.close()
            if self.metrics is not None:
                self.metrics.close()
        self._publish()
        running = loop.time() - self._t0
        self.session.end(running, self.collector.stage_log.warmup_s(running))
        return outcome_of(
            self._summary(running),
            ok=self._ok,
            error=self._errors,
            stopped=self._interrupted,
            dispatch_complete=self.dispatch_complete,
            skipped=len(self.skip_ids),
            warnings=self.warnings,
            journal_failure=self.journal_failure,
            crashed=self._crashed,
        )

    @property
    def dispatch_complete(self) -> bool:
        """Every worker's dispatch reached its end (its share all started, or the duration ran out)."""
        if self._planned_end:
            return True
        return bool(self._workers) and all(bool((wk.end or {}).get("complete")) for wk in self._workers)

    @property
    def stage_mark(self) -> tuple[int, bool] | None:
        """[[stages]]: (stage, warm-up) of the requests sent from now on, told to every worker."""
        return self._stage_mark

    @stage_mark.setter
    def stage_mark(self, mark: tuple[int, bool] | None) -> None:
        self._stage_mark = mark
        if mark is not None:
            for i in range(len(self._workers)):
                self._send(i, {"cmd": STAGE, "mark": list(mark)})

    def _stages_done(self) -> None:
        """The last stage ended: the run ends as when run.duration runs out (not a user's stop)."""
        self._planned_end = True
        self.request_stop()

    def _journal_failed(self, message: str) -> None:
        """A journal write or fsync failed: stop every worker at once, cancelling what is in flight
        (its records could not be saved either)."""
        if self.journal_failure is None:
            self.journal_failure = message
            self.request_stop(cancel=True)

    async def _start_workers(self) -> None:
        """The simulator (one for every worker, in this process) and the worker processes."""
        sims = [e.name for e in self.w.endpoints.values() if e.base_url == "sim"]
        self._sim, urls = await start_sim(self.w, sims)
        self._spawn(worker_context(), urls)

    def _spawn(self, ctx: ForkServerContext | SpawnContext, urls: dict[str, str]) -> None:
        """Start the worker processes, each with its share, and a thread reading each one's pipe."""
        resume = str(self.results_path) if self.skip_ids else None
        here = (dict(os.environ), os.getcwd())
        for i in range(self.n):
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_main,
                args=(share(self.w, i, self.n), (i, self.n), urls, resume, child, here),
                name=f"oxconsole-worker-{i}",
                daemon=True,
            )
            proc.start()
            child.close()
            self._workers.append(WorkerHandle(proc, parent))
            threading.Thread(target=self._reader, args=(i,), daemon=True).start()

    def _summary(self, duration: float) -> dict[str, Any]:
        """The collector's summary, with the workers' cool-downs, loop lag (the worst) and GC (summed)."""
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
        summary["workers"] = self.n
        ends = [wk.end for wk in self._workers if wk.end]
        summed = merge_counts(e.get("conversations") for e in ends)
        if summed:
            summary["conversations"] = summed
        lags = [e["loop_lag_ms"] for e in ends if e.get("loop_lag_ms")]
        if lags:  # the worst worker's: every timing may include up to that much
            summary["loop_lag_ms"] = {k: max(lag[k] for lag in lags) for k in ("p50", "p99", "max")}
        gcs = [e["gc"] for e in ends if e.get("gc")]
        if gcs:
            summary["gc"] = {
                "collections": sum(g["collections"] for g in gcs),
                "pause_ms": round(sum(g["pause_ms"] for g in gcs), 3),
            }
        return summary

    # --- from the workers ---------------------------------------------------------------------
    def _reader(self, i: int) -> None:
        conn = self._workers[i].conn
        loop = self._loop
        assert loop is not None
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                loop.call_soon_threadsafe(self._on_end, i, None)
                return
            if data[:1] == JOURNAL_TAG:
                loop.call_soon_threadsafe(self._on_lines, data)
                continue
            msg = orjson.loads(data)
            loop.call_soon_threadsafe(self._on_message, i, msg)
            if END in msg:
                return

    def _on_lines(self, data: bytes) -> None:
        assert self._journal is not None
        self._journal.write_lines(data[1:], data.count(b"\n"))

    def _on_message(self, i: int, msg: dict[str, Any]) -> None:
        if msg.get(READY):
            self._ready += 1
            if self._ready == self.n:
                self._all_ready.set()
            return
        collector = self.collector
        # Attempt errors first: a record in this message may carry them (see wire.py).
        for model, error_class, n, detail in msg.get(ATTEMPTS) or ():
            for _ in range(n):
                collector.record_attempt_error(model, error_class, detail)
        for t in msg.get(RECORDS) or ():
            rec = RequestRecord(*t)
            if rec.status == "ok":
                self._ok += 1
            else:
                self._errors += 1
            collector.record(rec)
        if msg.get(GAUGES) is not None:
            g = msg[GAUGES]
            self._workers[i].gauges = g
            for w in g.get("warnings") or ():  # found mid-run (a field a server rejected): shown now
                if w not in self.warnings:
                    self.warnings.append(w)
        if END in msg:
            self._on_end(i, msg[END])

    def _on_end(self, i: int, end: dict[str, Any] | None) -> None:
        wk = self._workers[i]
        if wk.end is not None:
            return
        if end is None:
            self._crashed = True
            end = {
                "warnings": [
                    self._lost(i) + "; its requests in flight are not in the journal: --resume sends them"
                ]
            }
        wk.end = end
        for w in wk.end.get("warnings", []):
            if w not in self.warnings:
                self.warnings.append(w)
        self.cooldowns.extend(wk.end.get("cooldowns", []))
        wk.gauges = None
        if all(x.end is not None for x in self._workers):
            self._all_ended.set()

    def _lost(self, i: int) -> str:
        """What to say of worker i, which ended without its END message."""
        return f"worker {i} ended unexpectedly (exit code {self._workers[i].proc.exitcode})"

    # --- snapshots ----------------------------------------------------------------------------
    def gauges(self) -> Gauges:
        gs = [wk.gauges for wk in self._workers if wk.gauges is not None]

        def total(key: str) -> int:
            return sum(int(g[key]) for g in gs)

        states = {g["state"] for g in gs}
        state = self.state
        if state == "running":
            if "draining" in states:
                state = "draining"
            elif self.live.paused:
                state = "paused"
        live = self.live
        models = {}
        for name in live.weights:
            models[name] = ModelGauge(
                weight=live.weights[name],
                enabled=live.enabled[name],
                in_flight=sum(int(g["models"][name]["in_flight"]) for g in gs if name in g["models"]),
                cooled_down=any(bool(g["models"][name]["cooled_down"]) for g in gs if name in g["models"]),
            )
        return Gauges(
            state=state,
            elapsed_s=self.elapsed(),
            total_expected=self.total_expected,
            dispatched=total("dispatched"),
            in_flight=total("in_flight"),
            waiting_slot=total("waiting_slot"),
            waiting_bucket=total("waiting_bucket"),
            backing_off=total("backing_off"),
            concurrency=live.concurrency,
            rate=live.rate,
            achieved_rate=sum(float(g["achieved_rate"]) for g in gs),
            loop_lag_ms=max((float(g["loop_lag_ms"]) for g in gs), default=0.0),
            models=models,
            warnings=tuple(self.warnings),
            tpm=live.tpm,
            tpm_used=sum(float(g.get("tpm_used", 0.0)) for g in gs),
            waiting_tpm=sum(int(g.get("waiting_tpm", 0)) for g in gs),
        )

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
