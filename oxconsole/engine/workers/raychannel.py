"""The pool's pipe, over Ray: an engine actor, and the two ends of the channel to it.

Why this module exists: `worker.Worker` talks to its parent through something with `send_bytes`
and `recv_bytes` (a `multiprocessing` pipe in a local pool). Here that something is an actor's
mailboxes: the actor runs the worker's loop in a thread of its own; what the worker sends waits in
an outbox the driver takes with `poll` (a long poll: one call returns everything sent since the
last, no sooner than GATHER_S after it, or waits up to POLL_S for something); what the driver
sends arrives through `send`, numbered, so that commands are applied in the order given even though
a threaded actor may run two calls at once. Every wait on Ray here has a timeout: an actor or node
that is lost, or stops answering for SILENT_S, reads as the pipe closing (EOFError), which the pool
reports; the run never hangs on it.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from oxconsole.base.aio import run_loop
from oxconsole.base.idset import IdSet
from oxconsole.engine.endpoints import start_sim
from oxconsole.engine.workers.rayfiles import localized
from oxconsole.engine.workers.split import run_seeded
from oxconsole.engine.workers.worker import Worker
from oxconsole.workload import Workload, WorkloadError
from oxconsole.workload.cluster import INSTALL_HINT

POLL_S = 0.25
"""The longest one `poll` waits in the actor for something to send."""
GATHER_S = 0.1
"""The least time between two polls' answers: what the worker sends meanwhile (every 20 ms) goes
in one answer, so that Ray's cost (a task on the actor, a reply to the driver) is paid a few times
a second, not 50."""
SILENT_S = 60.0
"""An actor that answers no poll for this long is taken as lost."""
START_S = 120.0
"""How long starting the actors (imports, a simulator each) may take."""


def import_ray() -> ModuleType:
    """`ray`, or bad input saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise WorkloadError(f'run.cluster: "ray" needs Ray installed: {INSTALL_HINT}') from e
    module: ModuleType = ray  # typed as a module whether or not Ray's own types are installed
    return module


class ActorChannel:
    """The actor's end: what `Worker` sends goes to the outbox; what the driver sent, in order."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._out: list[bytes] = []
        self._closed = False
        self._in: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._in_lock = threading.Lock()
        self._next = 0
        self._early: dict[int, bytes] = {}
        self._last = 0.0  # when the last take returned

    def send_bytes(self, data: bytes) -> None:
        with self._cv:
            self._out.append(data)
            self._cv.notify()

    def recv_bytes(self) -> bytes:
        return self._in.get()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()

    def deliver(self, seq: int, data: bytes) -> None:
        """A message from the driver, numbered: handed on once every earlier one has been."""
        with self._in_lock:
            self._early[seq] = data
            while self._next in self._early:
                self._in.put(self._early.pop(self._next))
                self._next += 1

    def take(self, wait: float) -> tuple[list[bytes], bool]:
        """Everything sent since the last take (waiting up to `wait` for something), and whether
        the worker has ended (nothing will follow). At least GATHER_S after the last take."""
        gather = self._last + GATHER_S - time.monotonic()
        if gather > 0 and not self._closed:
            time.sleep(gather)
        with self._cv:
            if not self._out and not self._closed:
                self._cv.wait(wait)
            out, self._out = self._out, []
            self._last = time.monotonic()
            return out, self._closed


class EngineActor:
    """One engine of the pool, as a Ray actor (made remote by the pool: `ray.remote(...)(EngineActor)`)."""

    def __init__(self) -> None:
        self._channel = ActorChannel()
        self._thread: threading.Thread | None = None
        self._failure: str | None = None
        self._folder: Path | None = None
        """Where the workload's shipped files were written (removed when the run ends)."""

    def start(
        self,
        w: Workload,
        shard: tuple[int, int],
        sims: Sequence[str],
        skip: list[str] | None,
        files: dict[str, Any] | None = None,
    ) -> tuple[str, str]:
        """Start the worker's loop in a thread; the node's address and Ray node id, for messages.
        `files`: the workload's files in Ray's object store (`rayfiles.to_ship`), run from copies
        written here (the driver's paths need not exist on this node)."""
        ids = IdSet(skip or ())
        ray = import_ray()
        if files:
            self._folder = Path(tempfile.mkdtemp(prefix="oxconsole-ray-"))
            data = dict(zip(files, ray.get(list(files.values())), strict=True))
            w = localized(w, data, self._folder)
        self._thread = threading.Thread(target=self._main, args=(w, shard, sims, ids), daemon=True)
        self._thread.start()
        return str(ray.util.get_node_ip_address()), str(ray.get_runtime_context().get_node_id())

    def _main(self, w: Workload, shard: tuple[int, int], sims: Sequence[str], skip: IdSet) -> None:
        try:
            run_loop(self._run(w, shard, sims, skip))
        except BaseException as e:  # the driver hears of it as the channel closing without END
            self._failure = f"{type(e).__name__}: {e}"
        finally:
            self._channel.close()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)

    async def _run(self, w: Workload, shard: tuple[int, int], sims: Sequence[str], skip: IdSet) -> None:
        """A simulator beside this actor for `base_url = "sim"` endpoints, then the worker's run."""
        sim, urls = await start_sim(run_seeded(w, shard[0]), sims)
        try:
            await Worker(w, shard, urls, skip, self._channel).run()
        finally:
            if sim is not None:
                await asyncio.to_thread(sim.stop)

    def send(self, seq: int, data: bytes) -> None:
        self._channel.deliver(seq, data)

    def poll(self, wait: float) -> tuple[list[bytes], bool, str | None]:
        out, closed = self._channel.take(wait)
        return out, closed, self._failure

    def join(self, timeout: float) -> bool:
        """Wait for the worker's loop to end; whether it has."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True


class DriverChannel:
    """The driver's end of an actor's channel: a pipe's `send_bytes` / `recv_bytes` for the pool."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.why = "it stopped answering"
        """Why the channel closed without the worker's END (for the pool's message)."""
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._buf: deque[bytes] = deque()
        self._closed = False
        self._pending: Any = None

    def send_bytes(self, data: bytes) -> None:
        with self._lock:  # numbered in the order sent
            self.actor.send.remote(next(self._seq), data)

    def recv_bytes(self) -> bytes:
        """The next message from the worker; EOFError once it has ended or is lost."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        silent = 0.0
        while not self._buf:
            if self._closed:
                raise EOFError
            if self._pending is None:
                self._pending = self.actor.poll.remote(POLL_S)
            try:  # a poll that times out is waited for again, not dropped: it may carry records
                out, closed, failure = ray.get(self._pending, timeout=POLL_S + 5.0)
            except GetTimeoutError:
                silent += POLL_S + 5.0
                if silent >= SILENT_S:
                    self.why = f"it answered nothing for {SILENT_S:.0f} s"
                    raise EOFError from None
                continue
            except RayError as e:
                self.why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise EOFError from e
            self._pending = None
            silent = 0.0
            self._buf.extend(out)
            self._closed = closed
            if failure:
                self.why = f"its engine failed: {failure}"
        return self._buf.popleft()

    def close(self) -> None:
        self._closed = True


class ActorProc:
    """What the pool asks of a worker process (`join`, `is_alive`, `kill`, `exitcode`), for an actor."""

    exitcode = None

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._gone = False

    def join(self, timeout: float) -> None:
        import ray

        if self._gone:
            return
        try:
            ray.get(self.actor.join.remote(timeout), timeout=timeout + 5.0)
        except Exception:  # lost or not answering: killed below
            pass

    def is_alive(self) -> bool:
        return not self._gone

    def kill(self) -> None:
        """End the actor (its run is over, or it is lost): frees its CPU in the placement group."""
        import ray

        if not self._gone:
            self._gone = True
            try:
                ray.kill(self.actor)
            except Exception:
                pass
