"""The console's side of the control socket: `SocketSource`, a `RunSource` over a run's socket.

Why this module exists: a console (the one that started the run, or `oxconsole attach`) reads
the run through the same interface whether it runs here or in another process; this is the
other-process half. It connects, keeps only the newest snapshot, sends commands without waiting,
and holds the run's result once the end message arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

from oxconsole.control.protocol import MAX_LINE, encode, parse
from oxconsole.control.registry import RunEntry
from oxconsole.engine.commands import By, Command, command_to_dict
from oxconsole.metrics.snapshot import Snapshot

__all__ = ["SocketSource"]


class SocketSource:
    """A `RunSource` over a run's control socket, on the caller's event loop.

    After the end message, `finished` is True and `final_summary`, `exit_code` and
    `warnings` hold the run's result. No reconnect: once the connection drops, `connected`
    is False for good.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str = "",
        workload_path: str | None = None,
        overrides: tuple[str, ...] = (),
        results_path: str | None = None,
        pid: int | None = None,
        started_at: float = 0.0,
        hz: float = 4.0,
        by: By = "key",
    ) -> None:
        self.path = os.fspath(path)
        self.by: By = by
        """Whose commands these are, as `changes` log them: the console's keys unless told."""
        self.name = name
        self.workload_path = workload_path
        self.overrides = tuple(overrides)
        self.results_path = results_path
        self.pid = pid
        self.started_at = started_at
        """When the run started (epoch seconds; 0 until known): files older than this are not its."""
        self.hz = hz
        self.final_summary: dict[str, Any] | None = None
        self.exit_code: int | None = None
        self.warnings: list[str] = []
        self.last_error: str | None = None
        """The last error message the server sent (e.g. a command it could not apply)."""
        self.snapshots_received = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._pending: list[bytes] = []
        self._raw: dict[str, Any] | None = None
        self._snap: Snapshot | None = None
        self._ended = False
        self._connected = False
        self._closed = False
        self._asked: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_id = 0

    @classmethod
    def from_entry(cls, entry: RunEntry, *, hz: float = 4.0, by: By = "key") -> SocketSource:
        return cls(
            entry.socket,
            name=entry.name,
            workload_path=entry.workload_path,
            overrides=entry.overrides,
            results_path=entry.results_path,
            pid=entry.pid,
            started_at=entry.started_at,
            hz=hz,
            by=by,
        )

    # RunSource
    def latest(self) -> Snapshot | None:
        raw = self._raw
        if raw is not None:
            self._raw = None
            try:
                self._snap = Snapshot.from_dict(raw)
            except (KeyError, TypeError, ValueError) as e:
                self.last_error = f"unreadable snapshot: {e!r}"
        return self._snap

    def take_error(self) -> str | None:
        """The error the run answered since the last call (a command it refused, and why), once."""
        err, self.last_error = self.last_error, None
        return err

    def send(self, cmd: Command) -> None:
        data = encode({"op": "cmd", **command_to_dict(cmd), "by": self.by})
        w = self._writer
        if w is None:
            if not self._closed:
                self._pending.append(data)
            return
        if not w.is_closing():
            w.write(data)

    async def ask(self, msg: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        """Send `msg` with an id of its own and wait for the run's answer to it (`done`, `summary`
        or `error`, whose `message` is the run's own words). Raises ConnectionError when the run is
        gone before it answers, TimeoutError past `timeout`."""
        w = self._writer
        if w is None or w.is_closing() or not self._connected:
            raise ConnectionError(f"{self.path}: not connected to the run")
        self._next_id += 1
        rid = self._next_id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[rid] = fut
        try:
            w.write(encode({**msg, "id": rid}))
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._asked.pop(rid, None)

    async def start(self, timeout: float = 5.0) -> None:
        """Connect and say hello. Raises OSError when the run is not there (any more)."""
        if self._writer is not None:
            return
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(self.path, limit=MAX_LINE), timeout
        )
        self._reader, self._writer = reader, writer
        writer.write(encode({"op": "hello", "hz": self.hz}))
        try:
            line = await asyncio.wait_for(reader.readline(), timeout)
        except (TimeoutError, ConnectionError, ValueError) as e:
            writer.close()
            raise ConnectionError(f"{self.path}: no hello from the run ({e!r})") from None
        if not line:
            writer.close()
            raise ConnectionError(f"{self.path}: the run closed the connection")
        self._on_message(line)
        for data in self._pending:
            writer.write(data)
        self._pending.clear()
        self._connected = True
        self._task = asyncio.create_task(self._receive(), name="oxconsole-socket-source")

    async def close(self) -> None:
        self._closed = True
        w = self._writer
        if w is not None and not w.is_closing():
            with contextlib.suppress(Exception):
                w.write(encode({"op": "bye"}))
            w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait_closed(), 1.0)
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._connected = False

    @property
    def finished(self) -> bool:
        if self._ended:
            return True
        # The end message follows the final ("done") snapshot at once; a console that left on the
        # snapshot alone lost the exit code (a stopped run then ended 0). Without the end message
        # the run is over only once the connection is gone too.
        s = self._snap if self._raw is None else self.latest()
        return s is not None and s.gauges.state == "done" and not self._connected

    @property
    def connected(self) -> bool:
        return self._connected

    # extras
    @property
    def ended(self) -> bool:
        """The end message arrived (so `final_summary` and `exit_code` are set)."""
        return self._ended

    async def wait_end(self, timeout: float | None = None) -> bool:
        """Wait until the end message arrives or the connection drops; True if it ended."""
        if self._task is not None and not self._ended:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
        return self._ended

    async def _receive(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                self._on_message(line)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._connected = False
            if self._writer is not None:
                self._writer.close()
            for fut in self._asked.values():  # nobody will answer them now
                if not fut.done():
                    fut.set_exception(ConnectionError(f"{self.path}: the run closed the connection"))

    def _on_message(self, line: bytes) -> None:
        msg = parse(line)
        if msg is None:
            return
        op = msg.get("op")
        if op == "snap":
            self._raw = msg.get("s")
            self.snapshots_received += 1
        elif op == "end":
            self.final_summary = msg.get("summary") or {}
            self.exit_code = int(msg.get("exit_code", 0))
            self.warnings = [str(w) for w in msg.get("warnings") or ()]
            self._ended = True
        elif op == "hello":
            self.name = str(msg.get("name") or self.name)
            self.workload_path = msg.get("workload_path", self.workload_path)
            self.overrides = tuple(msg.get("overrides") or self.overrides)
            self.results_path = msg.get("results_path", self.results_path)
            pid = msg.get("pid")
            self.pid = int(pid) if pid is not None else self.pid
            started = msg.get("started_at")
            self.started_at = float(started) if isinstance(started, int | float) else self.started_at
        elif op == "error":
            self.last_error = str(msg.get("message"))
        rid = msg.get("id")
        if isinstance(rid, int) and op in ("done", "summary", "error"):  # the answer to `ask`
            fut = self._asked.get(rid)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            if op == "error":
                self.last_error = None  # answered to its asker, not a console's refusal
