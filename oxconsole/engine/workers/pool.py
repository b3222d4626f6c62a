"""A run's shards in worker processes: `run.workers = N` (or "auto", one per core).

Why this module exists: one Python process tops out at roughly a core's worth of requests; when
the client is the bottleneck, more processes must share the load. Worker processes (`worker.py`)
do the expensive part (HTTP, stream parsing) on their share of the prompts, concurrency, rate and
token budget, and send each finished record here; the run's one coordinator (`runner.Engine`)
alone writes the journal, feeds the metrics collector, publishes snapshots and applies commands.
`ProcessShards` is what stands between the two: it starts the processes, reads their pipes, hands
the coordinator their records and the shards their commands, and notices a worker lost. So a run
with workers looks, to the console, `ps`, `attach` and the summary, exactly like a run without.
`messages.py` says what goes between them; `raypool.py` puts the same workers in Ray actors.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import signal
import threading
from collections.abc import Mapping
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.engine.commands import Command, command_to_dict
from oxconsole.engine.endpoints import start_sim
from oxconsole.engine.shard import Observe
from oxconsole.engine.workers import messages
from oxconsole.engine.workers.lost import lost_share
from oxconsole.engine.workers.shardset import Host
from oxconsole.engine.workers.split import share
from oxconsole.engine.workers.worker import worker_main
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import ratelimit
from oxconsole.metrics.snapshot import Gauges, ModelGauge
from oxconsole.workload import Workload, WorkloadError

if TYPE_CHECKING:
    from oxconsole.sim.process import SimProcess

__all__ = ["ProcessShards", "WorkerHandle", "exit_text", "stop_fork_server", "worker_context"]

GONE_S = 5.0
"""How long a worker whose pipe closed may take to be seen gone (its exit code known)."""


def exit_text(code: int | None) -> str:
    """A process's end as a person reads it: `killed by SIGKILL`, `exit code 3`."""
    if code is None:
        return "still running, not answering"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def worker_context() -> ForkServerContext | SpawnContext:
    """How worker processes start: forked from multiprocessing's fork server, which imported the
    engine once (`spawn` imported it again in every worker: about 1.5 s of CPU each, the bulk of a
    short run's start with several workers), or spawned where there is no fork server (Windows).
    A fork server's children start from its state, not this process's: `worker_main` takes this
    process's environment and folder (`here`)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["oxconsole.engine.workers.worker"])
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


@dataclasses.dataclass
class WorkerHandle:
    """One worker as the coordinator's shards see it: its process (or Ray actor:
    `raychannel.ActorProc`), the channel to it, its last gauges, its end message, and how many of
    its records came back (what a lost worker's share is short of)."""

    proc: Any
    conn: messages.Channel
    gauges: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    finished: int = 0
    ready: bool = False


class ProcessShards:
    """N worker processes, each a `LocalShard` on its share, behind pipes."""

    remote = True

    def __init__(self, workload: Workload, workers: int) -> None:
        self.w = workload
        self.n = workers
        self.workers: list[WorkerHandle] = []
        self.crashed = False
        self.cooldowns: list[dict[str, Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._all_ended = asyncio.Event()
        self._ready = 0
        self._all_ready = asyncio.Event()
        self._sim: SimProcess | None = None
        self.urls: dict[str, str] = {}
        """The simulator's URL for each `base_url = "sim"` endpoint, once it started."""

    def bind(self, host: Host) -> None:
        self.host = host

    # --- the shards' lives ------------------------------------------------------------------------
    async def connect(self) -> None:
        pass

    async def release(self) -> None:
        pass

    async def start(self) -> None:
        """Start the workers, then wait until every one is ready (or every one has ended)."""
        self._loop = asyncio.get_running_loop()
        await self._start_workers()
        if not self.workers:  # stopped while they were starting (a Ray cluster's join)
            self._all_ended.set()
        ready = asyncio.create_task(self._all_ready.wait())
        ended = asyncio.create_task(self._all_ended.wait())
        await asyncio.wait({ready, ended}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        ended.cancel()
        bad = [wk.end["bad_input"] for wk in self.workers if wk.end and wk.end.get("bad_input")]
        if bad:  # a worker found bad input in its set-up (a refused endpoint): none may start
            for i in range(len(self.workers)):
                self._send(i, {"cmd": messages.STOP, "cancel": True})
                self._send(i, {"cmd": messages.GO})
            raise WorkloadError(*dict.fromkeys(line for b in bad for line in b.split("\n")))

    async def _start_workers(self) -> None:
        """The simulator (one for every worker, in this process) and the worker processes."""
        sims = [e.name for e in self.w.endpoints.values() if e.base_url == "sim"]
        self._sim, urls = await start_sim(self.w, sims)
        self.urls = dict(urls)
        self._spawn(worker_context(), urls)

    def _spawn(self, ctx: ForkServerContext | SpawnContext, urls: dict[str, str]) -> None:
        """Start the worker processes, each with its share, and a thread reading each one's pipe."""
        resume = str(self.host.results_path) if self.host.skip_ids else None
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
            self.workers.append(WorkerHandle(proc, parent))
            threading.Thread(target=self._reader, args=(i,), daemon=True).start()

    def begin(self, t0: float, started_at: float) -> None:
        for i in range(len(self.workers)):
            self._send(i, {"cmd": messages.GO, "at": started_at})

    async def wait(self) -> None:
        await self._all_ended.wait()

    async def close(self) -> None:
        for wk in self.workers:
            await asyncio.to_thread(wk.proc.join, 30)
            if wk.proc.is_alive():
                wk.proc.kill()
        await asyncio.to_thread(stop_fork_server)
        if self._sim is not None:
            await asyncio.to_thread(self._sim.stop)

    # --- to the shards ----------------------------------------------------------------------------
    def _send(self, i: int, d: dict[str, Any]) -> None:
        try:
            self.workers[i].conn.send_bytes(orjson.dumps(d))
        except (OSError, ValueError):
            pass  # a worker that already ended takes no commands

    def send(self, cmds: list[Command]) -> None:
        for i in range(len(self.workers)):
            self._send(i, command_to_dict(cmds[i]))

    def mark(self, mark: tuple[int, bool]) -> None:
        for i in range(len(self.workers)):
            self._send(i, {"cmd": messages.STAGE, "mark": list(mark)})

    def stop(self, cancel: bool) -> None:
        for i in range(len(self.workers)):
            self._send(i, {"cmd": messages.STOP, "cancel": cancel})

    def observe(self, fn: Observe | None) -> None:
        """Auto concurrency needs one engine judging every request: refused with workers."""

    # --- from the shards --------------------------------------------------------------------------
    def _reader(self, i: int) -> None:
        conn = self.workers[i].conn
        loop = self._loop
        assert loop is not None
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                self._gone(i)
                loop.call_soon_threadsafe(self._on_end, i, None)
                return
            if data[:1] == messages.JOURNAL_TAG:
                loop.call_soon_threadsafe(self.host.write_lines, data[1:], data.count(b"\n"))
                continue
            msg = orjson.loads(data)
            loop.call_soon_threadsafe(self._on_message, i, msg)
            if messages.END in msg:
                return

    def _on_message(self, i: int, msg: dict[str, Any]) -> None:
        if msg.get(messages.READY):
            self._set_ready(i)
            return
        host, wk = self.host, self.workers[i]
        # Attempt errors first: a record in this message may carry them (see messages.py).
        for model, error_class, n, detail in msg.get(messages.ATTEMPTS) or ():
            for _ in range(n):
                host.attempt(model, error_class, detail)
        for t in msg.get(messages.RECORDS) or ():
            wk.finished += 1
            host.collect(RequestRecord(*t))
        if msg.get(messages.GAUGES) is not None:
            g = msg[messages.GAUGES]
            wk.gauges = g
            for w in g.get("warnings") or ():  # found mid-run (a field a server rejected): shown now
                if w not in host.warnings:
                    host.warnings.append(w)
        if messages.END in msg:
            self._on_end(i, msg[messages.END])

    def _on_end(self, i: int, end: dict[str, Any] | None) -> None:
        wk = self.workers[i]
        if wk.end is not None:
            return
        if end is None:
            self.crashed = True
            end = {"warnings": [lost_share(self._lost(i), self._share_of(i), wk.finished, wk.gauges)]}
        wk.end = end
        self._set_ready(i)  # one that ended before READY (its set-up failed): the others still go
        for w in wk.end.get("warnings", []):
            if w not in self.host.warnings:
                self.host.warnings.append(w)
        self.cooldowns.extend(wk.end.get("cooldowns", []))
        wk.gauges = None
        if all(x.end is not None for x in self.workers):
            self._all_ended.set()

    def _set_ready(self, i: int) -> None:
        """Worker i is set up and waits for GO (or ended without it): once all are, GO."""
        wk = self.workers[i]
        if not wk.ready:
            wk.ready = True
            self._ready += 1
            if self._ready == self.n:
                self._all_ready.set()

    def _gone(self, i: int) -> None:
        """Worker i's pipe closed (in its reader thread): wait a moment for the process, so that
        how it ended (its exit code, the signal that killed it) can be said."""
        self.workers[i].proc.join(GONE_S)

    def _share_of(self, i: int) -> int | None:
        """How many requests worker i was to send, when that is known: the run's total cut as its
        prompts are (every n-th from i), in a run that skips none (not a --resume)."""
        total = self.host.total_expected
        if total is None or self.host.skip_ids:
            return None
        return total // self.n + (1 if i < total % self.n else 0)

    def _lost(self, i: int) -> str:
        """What to say of worker i, which ended without its END message."""
        return f"worker {i} ended unexpectedly ({exit_text(self.workers[i].proc.exitcode)})"

    # --- what the run shows -----------------------------------------------------------------------
    def state(self, state: str) -> str:
        return state

    def ends(self) -> list[dict[str, Any]]:
        return [wk.end for wk in self.workers if wk.end]

    def served_urls(self) -> Mapping[str, str]:
        return self.urls

    @property
    def dispatch_complete(self) -> bool:
        """Every worker's dispatch reached its end (its share all started, or the duration ran out)."""
        return bool(self.workers) and all(bool((wk.end or {}).get("complete")) for wk in self.workers)

    def gauges(self, host: Host) -> Gauges:
        gs = [wk.gauges for wk in self.workers if wk.gauges is not None]

        def total(key: str) -> int:
            return sum(int(g[key]) for g in gs)

        states = {g["state"] for g in gs}
        state = host.state
        live = host.live
        if state == "running":
            if "draining" in states:
                state = "draining"
            elif live.paused:
                state = "paused"
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
            elapsed_s=host.elapsed(),
            total_expected=host.total_expected,
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
            warnings=tuple(host.warnings),
            tpm=live.tpm,
            tpm_used=sum(float(g.get("tpm_used", 0.0)) for g in gs),
            waiting_tpm=sum(int(g.get("waiting_tpm", 0)) for g in gs),
            ratelimit=ratelimit.merge(g.get("ratelimit") for g in gs) or None,
        )
