"""One worker process of a run: a `LocalShard` on its share, reporting to the coordinator.

Why this module exists: this is the code that runs in the child process (`worker_main` is the
process target) or in a Ray actor's thread. It does the expensive part of its share (HTTP, stream
parsing) and sends the coordinator everything it needs to be the run's one source of truth:
journal lines, records for the collector, live attempt errors, gauges, and the end of its run
(`messages.py` says what goes over the pipe). It applies the commands it is sent as they are:
they are its share already (`shares.shard_commands`), admitted and logged by the coordinator.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Set as AbstractSet
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.aio import run_loop
from oxconsole.engine.commands import command_from_dict
from oxconsole.engine.shard import LocalShard
from oxconsole.engine.workers import messages
from oxconsole.journal.journal import ok_ids
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Workload, WorkloadError


def worker_main(
    w: Workload,
    shard: tuple[int, int],
    urls: dict[str, str],
    resume: str | None,
    conn: Connection,
    here: tuple[dict[str, str], str] | None = None,
) -> None:
    """The worker process: run its share of `w` (every shard[1]-th prompt from shard[0]).
    `here`: the parent's environment (API keys, header values) and folder, for a worker forked
    from a fork server that started before they were what they are now."""
    # Ctrl-C in a terminal (and a SIGTERM to the process group) reaches every process of the
    # group: the parent alone stops the run (`run.grace`, then a cancel) and tells the workers;
    # a worker stopped by the signal itself would lose its requests in flight. A parent that
    # dies is noticed on the pipe (`_parent_gone`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if here is not None:
        env, cwd = here
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
    skip = ok_ids(Path(resume), w.run.trial)[0] if resume else set()  # a trial's own, with trials
    run_loop(Worker(w, shard, urls, skip, conn).run())
    conn.close()


class Worker:
    """A worker's shard, the pipe to its coordinator, and what waits to be sent on it."""

    def __init__(
        self,
        w: Workload,
        shard: tuple[int, int],
        urls: dict[str, str],
        skip: AbstractSet[str],
        conn: messages.Channel,
    ) -> None:
        self.conn = conn
        self._lock = threading.Lock()  # conn.send_bytes from the loop and the final send
        self._lines: list[bytes] = []  # journal lines, encoded once here
        self._batch: list[tuple[Any, ...]] = []  # the same records for the coordinator's collector
        self._attempts: dict[tuple[str, str], list[Any]] = {}  # (model, class) -> [count, detail]
        self._held: list[dict[str, Any]] | None = []  # commands that arrive before the shard runs
        self._go = asyncio.Event()
        self._go_at: float | None = None
        """The coordinator's start (GO's `at`, unix time)."""
        self.ok = 0
        self.errors = 0
        self.shard = LocalShard(
            w,
            record_sink=self._on_record,
            attempt_sink=self._on_attempt,
            warnings=[],
            skip_ids=skip,
            endpoint_urls=urls,
            shard=shard,
        )

    # --- what the shard hands over --------------------------------------------------------------
    def _on_record(self, rec: RequestRecord) -> None:
        if rec.status == "ok":
            self.ok += 1
        else:
            self.errors += 1
        self._lines.append(orjson.dumps(rec.to_json_dict(), option=orjson.OPT_APPEND_NEWLINE))
        rec.text = None
        self._batch.append(messages.record_tuple(rec))

    def _on_attempt(self, model: str, error_class: str, detail: str) -> None:
        tally = self._attempts.get((model, error_class))
        if tally is None:
            self._attempts[(model, error_class)] = [1, detail]
        else:
            tally[0] += 1
            tally[1] = detail

    # --- the pipe -------------------------------------------------------------------------------
    def send(self, msg: dict[str, Any]) -> None:
        with self._lock:
            self.conn.send_bytes(orjson.dumps(msg))

    def flush(self) -> None:
        """Send the journal lines, records, attempt errors and gauges gathered since the last flush."""
        shard = self.shard
        g = shard.gauges() if shard.state != "starting" else None
        if self._lines:
            with self._lock:
                self.conn.send_bytes(messages.JOURNAL_TAG + b"".join(self._lines))
            self._lines.clear()
        if self._batch or g is not None or self._attempts:
            msg: dict[str, Any] = {
                messages.RECORDS: self._batch[:],
                messages.GAUGES: messages.gauges_to_dict(g) if g else None,
            }
            self._batch.clear()
            if self._attempts:
                msg[messages.ATTEMPTS] = [[m, c, n, d] for (m, c), (n, d) in self._attempts.items()]
                self._attempts.clear()
            self.send(msg)

    def _reader(self, loop: asyncio.AbstractEventLoop) -> None:
        """The thread that takes the coordinator's messages and hands them to the loop."""
        while True:
            try:
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                # The coordinator is gone: stop at once rather than run unobserved.
                loop.call_soon_threadsafe(self._parent_gone)
                return
            loop.call_soon_threadsafe(self._on_command, orjson.loads(data))

    def _on_command(self, d: dict[str, Any]) -> None:
        cmd = d.get("cmd")
        if cmd == messages.GO:
            at = d.get("at")
            self._go_at = float(at) if isinstance(at, int | float) else None
            self._go.set()
        elif cmd == messages.STOP:
            self.shard.stop(cancel=bool(d.get("cancel")))
        elif cmd == messages.STAGE:
            self.shard.stage_mark = (int(d["mark"][0]), bool(d["mark"][1]))
        elif self._held is not None:
            self._held.append(d)
        else:
            self.shard.act(command_from_dict(d))

    def _parent_gone(self) -> None:
        self._go.set()
        self.shard.stop(cancel=True)

    # --- the run --------------------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._reader, args=(loop,), daemon=True).start()
        # Imports, start-up and the endpoints' set-up done: tell the coordinator, and start when
        # every worker is ready, so that the run's clock counts none of it.
        try:
            await self.shard.prepare()
        except WorkloadError as e:  # bad input found in set-up (a refused endpoint): nothing sent
            await self.shard.shut_down()
            self.send({messages.END: {"ok": 0, "error": 0, "bad_input": str(e)}})
            return
        except BaseException:
            await self.shard.shut_down()
            raise
        self.send({messages.READY: True})
        await self._go.wait()
        flusher = asyncio.create_task(self._flusher())
        try:
            self.shard.begin(*self._start(loop.time(), time.time()))
            early, self._held = self._held, None
            for d in early or ():
                self._on_command(d)
            await self.shard.run()
        finally:
            flusher.cancel()
        self.flush()
        self.send({messages.END: {"ok": self.ok, "error": self.errors, **self.shard.end()}})

    def _start(self, now: float, wall: float) -> tuple[float, float]:
        """(loop time, unix time) of the run's start: the coordinator's (`at`), so that the
        workers' schedules start together, not each at its own GO and set-up; this worker's now
        when there is no `at` or the clocks disagree (`GO_SKEW_S`)."""
        at = self._go_at
        if at is None or not 0.0 <= wall - at <= messages.GO_SKEW_S:
            return now, wall
        return now - (wall - at), at

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(messages.FLUSH_S)
            self.flush()
