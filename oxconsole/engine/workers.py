"""Several engine processes sharing one run: `run.workers = N` (or "auto", one per core).

Why this module exists: one Python process tops out at roughly a core's worth of requests; when
the client is the bottleneck, more processes must share the load. The design keeps one source of
truth: worker processes do the expensive part (HTTP, stream parsing) on their share of the prompts,
concurrency, rate and token budget, and send each finished record to this process, which alone
writes the journal, feeds the metrics collector, publishes snapshots and applies commands (split
into shares and forwarded). So a run with workers looks, to the console, `ps`, `attach` and the
summary, exactly like a run without.
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
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from oxconsole.aio import run_loop
from oxconsole.engine.commands import (
    Command,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetWeight,
    Stop,
    command_from_dict,
    command_to_dict,
)
from oxconsole.engine.runner import Engine, RunOutcome, new_collector
from oxconsole.journal.journal import Journal, ok_ids
from oxconsole.journal.manifest import open_journal
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.workload import Workload

FLUSH_S = 0.02
"""How often a worker sends its finished records and gauges to the parent."""


def worker_count(w: Workload) -> int:
    n = w.run.workers
    if n == "auto":
        return max(1, os.cpu_count() or 1)
    return max(1, int(n))


def split(total: int, n: int) -> list[int]:
    """Shares of an integer limit, each at least 1, differing by at most one."""
    base, extra = divmod(max(total, n), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def _share(w: Workload, i: int, n: int) -> Workload:
    run = w.run
    return dataclasses.replace(
        w,
        run=dataclasses.replace(
            run,
            concurrency=split(run.concurrency, n)[i],
            rate=run.rate / n,
            tpm=(run.tpm + n - 1) // n if run.tpm else 0,
            seed=run.seed * 1000 + i,
            workers=1,
        ),
    )


# --- the worker process ---------------------------------------------------------------------------


def _worker_main(
    w: Workload, shard: tuple[int, int], urls: dict[str, str], resume: str | None, conn: Connection
) -> None:
    skip = ok_ids(Path(resume))[0] if resume else set()
    run_loop(_worker(w, shard, urls, skip, conn))
    conn.close()


async def _worker(
    w: Workload, shard: tuple[int, int], urls: dict[str, str], skip: AbstractSet[str], conn: Connection
) -> None:
    loop = asyncio.get_running_loop()
    lines: list[bytes] = []  # journal lines, encoded once here
    batch: list[tuple[Any, ...]] = []  # the same records for the parent's collector, without text
    lock = threading.Lock()  # conn.send_bytes from the loop and the final send
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE

    def sink(rec: RequestRecord) -> None:
        lines.append(dumps(rec.to_json_dict(), option=newline))
        rec.text = None
        batch.append(record_tuple(rec))

    engine = Engine(
        w, results_path=Path(os.devnull), skip_ids=skip, endpoint_urls=urls, shard=shard, record_sink=sink
    )

    def send(msg: dict[str, Any]) -> None:
        with lock:
            conn.send_bytes(orjson.dumps(msg))

    go = asyncio.Event()
    held: list[dict[str, Any]] | None = []  # commands that arrive before the engine runs

    def on_command(d: dict[str, Any]) -> None:
        if d.get("cmd") == "_go":
            go.set()
        elif d.get("cmd") == "stop":
            engine.request_stop(cancel=bool(d.get("cancel")))
        elif held is not None:
            held.append(d)
        else:
            engine.apply(command_from_dict(d))

    def gone() -> None:
        go.set()
        engine.request_stop(cancel=True)

    def reader() -> None:
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                # The parent is gone: stop at once rather than run unobserved.
                loop.call_soon_threadsafe(gone)
                return
            d = orjson.loads(data)
            if d.get("cmd") == "_bye":
                return
            loop.call_soon_threadsafe(on_command, d)

    threading.Thread(target=reader, daemon=True).start()

    async def flusher() -> None:
        while True:
            await asyncio.sleep(FLUSH_S)
            flush()

    def flush() -> None:
        g = engine.gauges() if engine.state != "starting" else None
        if lines:
            with lock:
                conn.send_bytes(JOURNAL_TAG + b"".join(lines))
            lines.clear()
        if batch or g is not None:
            recs = batch[:]
            batch.clear()
            send({"r": recs, "g": _gauges_to_dict(g) if g else None})

    # Imports and start-up done: tell the parent, and start when every worker is ready, so that
    # the run's clock does not count process start-up.
    send({"ready": True})
    await go.wait()
    f = asyncio.create_task(flusher())
    try:
        running = asyncio.create_task(engine.run())
        while engine.state == "starting" and not running.done():
            await asyncio.sleep(0.005)
        early, held = held, None
        for d in early or ():
            on_command(d)
        out = await running
    finally:
        f.cancel()
    flush()
    send(
        {
            "end": {
                "ok": out.ok,
                "error": out.error,
                "warnings": out.warnings,
                "cooldowns": engine.cooldowns,
                "loop_lag_ms": out.summary.get("loop_lag_ms"),
                "gc": out.summary.get("gc"),
            }
        }
    )


JOURNAL_TAG = b"\x00"
"""First byte of a worker message that carries encoded journal lines (others are JSON objects)."""
_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))


def record_tuple(rec: RequestRecord) -> tuple[Any, ...]:
    """A record's fields in declaration order: compact on the wire, `RequestRecord(*t)` rebuilds it."""
    return tuple(getattr(rec, f) for f in _FIELDS)


def _gauges_to_dict(g: Gauges) -> dict[str, Any]:
    d = dataclasses.asdict(g)
    return d


# --- the parent -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Worker:
    proc: Any
    conn: Connection
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
        self.state = "starting"
        self.concurrency = workload.run.concurrency
        self.rate = float(workload.run.rate)
        self.weights = {m.name: float(m.weight) for m in workload.models}
        self.enabled = {m.name: True for m in workload.models}
        self.paused = False
        self.warnings: list[str] = []
        self.cooldowns: list[dict[str, Any]] = []
        self.started_at = time.time()
        self.collector = self._new_collector()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0
        self._workers: list[_Worker] = []
        self._journal: Journal | None = None
        self._interrupted = False
        self._crashed = False
        self._ok = 0
        self._errors = 0
        self._all_ended = asyncio.Event()
        self._ready = 0
        self._all_ready = asyncio.Event()
        self._sim: Any = None

    def _new_collector(self) -> Collector:
        return new_collector(self.w, self.started_at)

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    # --- control ------------------------------------------------------------------------------
    def submit(self, cmd: Command) -> None:
        if self._loop is None:
            raise RuntimeError("engine is not running")
        self._loop.call_soon_threadsafe(self.apply, cmd)

    def _send(self, i: int, d: dict[str, Any]) -> None:
        try:
            self._workers[i].conn.send_bytes(orjson.dumps(d))
        except (OSError, ValueError):
            pass  # a worker that already ended takes no commands

    def _broadcast(self, cmd: Command) -> None:
        for i in range(len(self._workers)):
            self._send(i, command_to_dict(cmd))

    def apply(self, cmd: Command) -> None:
        t = round(self.elapsed(), 3)
        if isinstance(cmd, SetConcurrency):
            value = max(1, int(cmd.value))
            if value != self.concurrency:
                for i, share in enumerate(split(value, self.n)):
                    self._send(i, command_to_dict(SetConcurrency(share)))
                self.collector.change(t, "concurrency", self.concurrency, value)
                self.concurrency = value
        elif isinstance(cmd, SetRate):
            rate = max(0.0, float(cmd.value))
            if rate != self.rate:
                self._broadcast(SetRate(rate / self.n))
                self.collector.change(t, "rate", self.rate, rate)
                self.rate = rate
        elif isinstance(cmd, SetWeight):
            if cmd.model in self.weights and cmd.value >= 0 and cmd.value != self.weights[cmd.model]:
                self._broadcast(cmd)
                self.collector.change(t, "weight", self.weights[cmd.model], float(cmd.value), model=cmd.model)
                self.weights[cmd.model] = float(cmd.value)
        elif isinstance(cmd, EnableModel):
            if cmd.model in self.enabled and cmd.enabled != self.enabled[cmd.model]:
                self._broadcast(cmd)
                self.collector.change(t, "enabled", self.enabled[cmd.model], cmd.enabled, model=cmd.model)
                self.enabled[cmd.model] = cmd.enabled
        elif isinstance(cmd, Pause):
            if not self.paused:
                self._broadcast(cmd)
                self.paused = True
                self.collector.change(t, "paused", False, True)
        elif isinstance(cmd, Resume):
            if self.paused:
                self._broadcast(cmd)
                self.paused = False
                self.collector.change(t, "paused", True, False)
        elif isinstance(cmd, Stop):
            self.request_stop(cancel=cmd.cancel)
        self._publish()

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        if interrupted:
            self._interrupted = True
        for i in range(len(self._workers)):
            self._send(i, {"cmd": "stop", "cancel": cancel})

    # --- the run ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._journal, notes = open_journal(self.w, self.results_path, self.skip_ids)
        self.warnings.extend(notes)
        ctx = multiprocessing.get_context("spawn")
        ticker = None
        try:
            urls = await self._start_sim()
            resume = str(self.results_path) if self.skip_ids else None
            for i in range(self.n):
                parent, child = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=_worker_main,
                    args=(_share(self.w, i, self.n), (i, self.n), urls, resume, child),
                    name=f"oxconsole-worker-{i}",
                    daemon=True,
                )
                proc.start()
                child.close()
                self._workers.append(_Worker(proc, parent))
                threading.Thread(target=self._reader, args=(i,), daemon=True).start()
            ready = asyncio.create_task(self._all_ready.wait())
            ended = asyncio.create_task(self._all_ended.wait())
            await asyncio.wait({ready, ended}, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            # The run's clock starts when every worker can dispatch.
            self._t0 = loop.time()
            self.started_at = time.time()
            self.collector = self._new_collector()
            for i in range(self.n):
                self._send(i, {"cmd": "_go"})
            self.state = "running"
            ticker = asyncio.create_task(self._ticker())
            await ended
        finally:
            self.state = "done"
            if ticker is not None:
                ticker.cancel()
            for wk in self._workers:
                await asyncio.to_thread(wk.proc.join, 30)
                if wk.proc.is_alive():
                    wk.proc.kill()
            if self._sim is not None:
                await asyncio.to_thread(self._sim.stop)
            self._journal.close()
        self._publish()
        summary = self.collector.summary(self.w.name, loop.time() - self._t0)
        if self.skip_ids:
            summary["resumed_skipped"] = len(self.skip_ids)
        summary["cooldowns"] = self.cooldowns
        summary["workers"] = self.n
        ends = [wk.end for wk in self._workers if wk.end]
        lags = [e["loop_lag_ms"] for e in ends if e.get("loop_lag_ms")]
        if lags:  # the worst worker's: every timing may include up to that much
            summary["loop_lag_ms"] = {k: max(lag[k] for lag in lags) for k in ("p50", "p99", "max")}
        gcs = [e["gc"] for e in ends if e.get("gc")]
        if gcs:
            summary["gc"] = {
                "collections": sum(g["collections"] for g in gcs),
                "pause_ms": round(sum(g["pause_ms"] for g in gcs), 3),
            }
        return RunOutcome(
            summary=summary,
            ok=self._ok,
            error=self._errors,
            interrupted=self._interrupted,
            skipped=len(self.skip_ids),
            warnings=self.warnings,
            crashed=self._crashed,
        )

    async def _start_sim(self) -> dict[str, str]:
        urls: dict[str, str] = {}
        sims = [e.name for e in self.w.endpoints.values() if e.base_url == "sim"]
        if sims:
            from oxconsole.sim.process import SimProcess

            self._sim = SimProcess(profiles=self.w.sim, seed=self.w.run.seed)
            await asyncio.to_thread(self._sim.start)
            urls = {name: self._sim.url for name in sims}
        return urls

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
            if "end" in msg:
                return

    def _on_lines(self, data: bytes) -> None:
        assert self._journal is not None
        self._journal.write_lines(data[1:], data.count(b"\n"))

    def _on_message(self, i: int, msg: dict[str, Any]) -> None:
        if msg.get("ready"):
            self._ready += 1
            if self._ready == self.n:
                self._all_ready.set()
            return
        for t in msg.get("r") or ():
            rec = RequestRecord(*t)
            if rec.status == "ok":
                self._ok += 1
            else:
                self._errors += 1
            self.collector.record(rec)
        if msg.get("g") is not None:
            g = msg["g"]
            self._workers[i].gauges = g
            for w in g.get("warnings") or ():  # found mid-run (a field a server rejected): shown now
                if w not in self.warnings:
                    self.warnings.append(w)
        if "end" in msg:
            self._on_end(i, msg["end"])

    def _on_end(self, i: int, end: dict[str, Any] | None) -> None:
        wk = self._workers[i]
        if wk.end is not None:
            return
        if end is None:
            self._crashed = True
            code = wk.proc.exitcode
            end = {
                "warnings": [
                    f"worker {i} ended unexpectedly (exit code {code}); its requests in flight are not "
                    "in the journal: --resume sends them"
                ],
            }
        wk.end = end
        for w in wk.end.get("warnings", []):
            if w not in self.warnings:
                self.warnings.append(w)
        self.cooldowns.extend(wk.end.get("cooldowns", []))
        wk.gauges = None
        if all(x.end is not None for x in self._workers):
            self._all_ended.set()

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
            elif self.paused:
                state = "paused"
        models = {}
        for name in self.weights:
            models[name] = ModelGauge(
                weight=self.weights[name],
                enabled=self.enabled[name],
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
            concurrency=self.concurrency,
            rate=self.rate,
            achieved_rate=sum(float(g["achieved_rate"]) for g in gs),
            loop_lag_ms=max((float(g["loop_lag_ms"]) for g in gs), default=0.0),
            models=models,
            warnings=tuple(self.warnings),
        )

    def _publish(self) -> None:
        self.latest = self.collector.snapshot(self.gauges())

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


def make_engine(workload: Workload, **kwargs: Any) -> Engine | WorkerPool:
    """An Engine, or a WorkerPool when `run.workers` asks for more than one process."""
    if worker_count(workload) > 1:
        kwargs.pop("endpoint_urls", None)
        return WorkerPool(workload, **kwargs)
    return Engine(workload, **kwargs)
