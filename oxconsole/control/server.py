"""The engine's side of the control socket: snapshots out to each console, commands in, and the
run's registry entry kept fresh.

Why this module exists: the engine runs in its own process so that rendering never steals CPU
from dispatch or distorts timings, and so that a long run survives its console. The engine side
never waits for a console: a frame is skipped while a client's write buffer is above a small
limit, a client stuck that way for a minute is dropped, and with no client attached the server
does nothing at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.base.jsonfile import write_json
from oxconsole.control.protocol import MAX_HZ, MIN_HZ, SERVER_MAX_LINE, encode
from oxconsole.control.registry import (
    REGISTRY_INTERVAL,
    RunEntry,
    RunInfo,
    run_dirs,
    run_stem,
    runs_dir,
    unlink,
)
from oxconsole.engine.commands import CommandError, command_from_dict, command_name, origin
from oxconsole.metrics.snapshot import Snapshot

if TYPE_CHECKING:
    from oxconsole.engine.runner import RunEngine, RunOutcome

__all__ = ["ControlServer", "serve_run"]

MAX_BUFFER = 64 * 1024
"""Bytes queued to one client above which snapshot frames are skipped for it."""
SOCKET_SNDBUF = 64 * 1024
"""Kernel send buffer asked for each client connection (Linux doubles it)."""
STUCK_DROP_S = 60.0
"""A client whose buffer stays above MAX_BUFFER this long is dropped."""
END_DRAIN_S = 1.0
"""How long the server waits for clients to take the end message before it closes."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues before the loop accepts them (asyncio's default, 100, refused
part of a burst of 200 connects made while the loop was busy; Linux caps it at
net.core.somaxconn, 4096 by default since 5.4)."""
CLIENT_BY = ("key", "command", "agent")
"""The origins a client may give its command: a console key, a script's command or an agent
(`oxconsole mcp`). A stage boundary and the adaptive controller are the engine's own, never
claimed over the socket."""
MAX_BATCH = 64
"""Commands one "cmds" message may carry (an agent's `set` sends a handful)."""
DISCARD_MAX = 64 * 1024 * 1024
"""Bytes of an over-long line read and dropped after its error reply, so that the sender sees the
reply and a clean close rather than a reset; past this (or `DISCARD_S`) the connection is closed."""
DISCARD_S = 5.0


@dataclass(eq=False)
class _Client:
    """One console connected: its rate, when its next frame is due, the last snapshot it got,
    and since when it has been behind."""

    writer: asyncio.StreamWriter
    hz: float = 4.0
    next_due: float = 0.0
    last: Snapshot | None = None
    stuck_since: float | None = None
    skipped: int = 0


class ControlServer:
    """A Unix socket server on the engine's loop: snapshots out, commands in, a registry entry.

    Start it once `engine.run()` has begun (see `serve_run`), on the same loop.
    """

    def __init__(
        self,
        engine: RunEngine,
        info: RunInfo,
        *,
        folder: Path | None = None,
        max_buffer: int = MAX_BUFFER,
        registry_interval: float = REGISTRY_INTERVAL,
    ) -> None:
        self.engine = engine
        self.info = info
        self._folder = folder
        self.max_buffer = max_buffer
        self.registry_interval = registry_interval
        self.socket_path: Path | None = None
        self.registry_path: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[_Client] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._kick = asyncio.Event()
        self._ended = False
        self._closed = False
        self._base_interval = engine.publish_interval
        self._enc_snap: Snapshot | None = None
        self._enc: bytes = b""
        self.frames_skipped = 0
        """Snapshot frames not sent because a client was behind (all clients, whole run)."""

    @property
    def clients(self) -> int:
        return len(self._clients)

    async def start(self) -> None:
        folder = self._folder if self._folder is not None else runs_dir()
        if self._folder is not None:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        stem = run_stem(self.info.name, self.info.pid)
        self.socket_path = folder / f"{stem}.sock"
        self.registry_path = folder / f"{stem}.json"
        unlink(self.socket_path)
        self._server = await asyncio.start_unix_server(
            self._handle, path=str(self.socket_path), limit=SERVER_MAX_LINE, backlog=LISTEN_BACKLOG
        )
        os.chmod(self.socket_path, 0o600)
        self.write_registry()
        self._tasks = [
            asyncio.create_task(self._pump(), name="oxconsole-control-pump"),
            asyncio.create_task(self._registry_loop(), name="oxconsole-control-registry"),
        ]

    # registry
    def registry_entry(self) -> RunEntry:
        s = self.engine.latest
        i = self.info
        return RunEntry(
            name=i.name,
            pid=i.pid,
            socket=str(self.socket_path),
            workload_path=i.workload_path,
            overrides=i.overrides,
            results_path=i.results_path,
            started_at=i.started_at,
            state=self.engine.state,
            done=s.counts.total if s is not None else 0,
            total=s.gauges.total_expected if s is not None else self.engine.total_expected,
            req_per_s=round(s.req_per_s_10s, 3) if s is not None else 0.0,
            errors=s.counts.error if s is not None else 0,
            updated_at=time.time(),
        )

    def write_registry(self) -> None:
        if self.registry_path is None or self._closed:
            return
        try:
            write_json(self.registry_path, self.registry_entry().to_dict(), private=True)
        except OSError:  # a full disk must not stop the run
            pass

    async def _registry_loop(self) -> None:
        """Rewrite the entry every `registry_interval`, and soon after the run's state changes."""
        loop = asyncio.get_running_loop()
        last_t, last_state = loop.time(), self.engine.state
        while True:
            await asyncio.sleep(min(0.5, self.registry_interval))
            state = self.engine.state
            if state != last_state or loop.time() - last_t >= self.registry_interval:
                self.write_registry()
                last_t, last_state = loop.time(), state

    # clients
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        client = _Client(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None:  # keep the kernel's share of a slow client's backlog small too
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SNDBUF)
        try:
            while not self._closed:
                try:
                    line = await reader.readline()
                except ValueError:  # over SERVER_MAX_LINE without a newline
                    await self._too_long(client, reader)
                    break
                if not line:
                    break
                try:
                    msg = orjson.loads(line)
                    op = msg.get("op") if isinstance(msg, dict) else None
                except orjson.JSONDecodeError:
                    self._reply(client, {"op": "error", "message": "not a JSON object"})
                    continue
                if op == "hello":
                    self._hello(client, msg)
                elif op == "cmd":
                    self._command(client, msg)
                elif op == "cmds":
                    self._commands(client, msg)
                elif op == "summary":
                    self._summary(client, msg)
                elif op == "bye":
                    break
                else:
                    self._reply(client, {"op": "error", "message": f"unknown op {op!r}"})
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:  # only close() cancels a handler; asyncio would log it
            pass
        finally:
            self._drop(client)
            if task is not None:
                self._handlers.discard(task)

    async def _too_long(self, client: _Client, reader: asyncio.StreamReader) -> None:
        """Answer an over-long line with an error, then read and drop the rest of it (at most
        DISCARD_MAX bytes, DISCARD_S seconds) so that the connection closes cleanly after it."""
        self._reply(
            client,
            {
                "op": "error",
                "message": f"line too long (over {SERVER_MAX_LINE} bytes; commands are small): "
                "closing the connection",
            },
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISCARD_S
        dropped = 0
        with contextlib.suppress(TimeoutError):
            while dropped < DISCARD_MAX:
                chunk = await asyncio.wait_for(reader.read(SERVER_MAX_LINE), max(0.0, deadline - loop.time()))
                if not chunk or b"\n" in chunk:
                    break
                dropped += len(chunk)
        with contextlib.suppress(ConnectionError):
            await client.writer.drain()

    def _hello(self, client: _Client, msg: dict[str, Any]) -> None:
        try:
            hz = float(msg.get("hz", 4.0))
        except (TypeError, ValueError):
            hz = 4.0
        client.hz = min(MAX_HZ, max(MIN_HZ, hz if math.isfinite(hz) else 4.0))
        i = self.info
        self._reply(
            client,
            {
                "op": "hello",
                "name": i.name,
                "workload_path": i.workload_path,
                "overrides": list(i.overrides),
                "results_path": i.results_path,
                "pid": i.pid,
                "started_at": i.started_at,
            },
        )
        if not self._ended:
            client.next_due = 0.0
            self._clients.add(client)
            self._retune()
            self._kick.set()

    def _command(self, client: _Client, msg: dict[str, Any]) -> None:
        self._apply(client, msg.get("id"), [{k: v for k, v in msg.items() if k not in ("op", "id")}], msg)

    def _commands(self, client: _Client, msg: dict[str, Any]) -> None:
        cmds = msg.get("cmds")
        if not isinstance(cmds, list) or not cmds or len(cmds) > MAX_BATCH:
            self._error(client, msg.get("id"), f"cmds: expected a list of 1 to {MAX_BATCH} commands")
            return
        self._apply(client, msg.get("id"), cmds, msg)

    def _apply(self, client: _Client, rid: Any, raw: list[Any], msg: dict[str, Any]) -> None:
        """Admit every command, then apply them in order: one refused changes nothing. With an `id`
        the client is told the changes made (`done`); a refusal is always answered."""
        if self._ended:
            self._error(client, rid, "the run has ended")
            return
        try:
            by = msg.get("by", "command")
            admitted = []
            for d in raw:
                if not isinstance(d, dict):
                    raise CommandError(f"expected a command object, got {type(d).__name__}")
                cmd = command_from_dict(d)  # a `by` in it is checked as an origin there
                if by not in CLIENT_BY:  # a stage boundary or the controller is the engine's own word
                    raise CommandError(f"{command_name(cmd)}: by: expected key, command or agent, got {by!r}")
                admitted.append(self.engine.admit(cmd))
            changes: list[dict[str, Any]] = []
            for cmd in admitted:
                changes += self.engine.apply(cmd, origin(by))
        except CommandError as e:  # refused before anything changed: say why, in its own words
            self._error(client, rid, str(e))
            return
        except Exception as e:  # a bad command is the client's problem, never the run's
            self._error(client, rid, f"command not applied: {e!r}")
            return
        if rid is not None:  # held: the run's clock has not started; applied (and logged) when it does
            held = self.engine.state == "starting"
            self._reply(client, {"op": "done", "id": rid, "changes": changes, "held": held})

    def _summary(self, client: _Client, msg: dict[str, Any]) -> None:
        """The run so far in the summary's keys and its live settings, built now (never per frame)."""
        rid = msg.get("id")
        try:
            summary = self.engine.summary_now()
        except Exception as e:  # a summary the run cannot make is the asker's answer, not a crash
            self._error(client, rid, f"summary not available: {e!r}")
            return
        self._reply(client, {"op": "summary", "id": rid, "summary": summary, "live": live_view(self.engine)})

    def _error(self, client: _Client, rid: Any, message: str) -> None:
        reply: dict[str, Any] = {"op": "error", "message": message}
        if rid is not None:
            reply["id"] = rid
        self._reply(client, reply)

    def _reply(self, client: _Client, msg: dict[str, Any]) -> None:
        if not client.writer.is_closing():
            client.writer.write(encode(msg))

    def _drop(self, client: _Client) -> None:
        if client in self._clients:
            self._clients.discard(client)
            self._retune()
        client.writer.close()

    def _retune(self) -> None:
        """Publish snapshots often enough for the fastest client (the engine ticks every 0.1 s)."""
        if self._ended:
            return
        if self._clients:
            fastest = max(c.hz for c in self._clients)
            self.engine.publish_interval = max(0.1, min(self._base_interval, 1.0 / fastest - 0.05))
        else:
            self.engine.publish_interval = self._base_interval

    def _frame(self, snap: Snapshot) -> bytes:
        if snap is not self._enc_snap:
            self._enc = encode({"op": "snap", "s": snap.to_dict()})
            self._enc_snap = snap
        return self._enc

    def _offer(self, client: _Client, data: bytes, now: float) -> bool:
        """Queue `data` unless the client is behind; never waits. False if it was dropped."""
        w = client.writer
        if w.is_closing():
            self._drop(client)
            return False
        if w.transport.get_write_buffer_size() > self.max_buffer:
            client.skipped += 1
            self.frames_skipped += 1
            if client.stuck_since is None:
                client.stuck_since = now
            elif now - client.stuck_since > STUCK_DROP_S:
                w.transport.abort()
                self._drop(client)
                return False
            return True
        client.stuck_since = None
        w.write(data)
        return True

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._kick.clear()
            if not self._clients:
                await self._kick.wait()
                continue
            now = loop.time()
            snap = self.engine.latest
            next_due = math.inf
            for c in list(self._clients):
                if c.next_due <= now:
                    if snap is not None and snap is not c.last:
                        if not self._offer(c, self._frame(snap), now):
                            continue
                        c.last = snap
                    c.next_due = max(c.next_due + 1.0 / c.hz, now + 0.5 / c.hz)
                next_due = min(next_due, c.next_due)
            if next_due == math.inf:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), max(0.0, next_due - loop.time()))

    async def finish(self, outcome: RunOutcome | None) -> None:
        """Send the final snapshot and the end message to every client, then close."""
        if self._closed:
            return
        self._ended = True
        for t in self._tasks:
            t.cancel()
        loop = asyncio.get_running_loop()
        if outcome is not None and self._clients:
            snap = self.engine.latest
            end = encode(
                {
                    "op": "end",
                    "summary": outcome.summary,
                    "exit_code": outcome.exit_code,
                    "warnings": list(outcome.warnings),
                }
            )
            drains = []
            for c in list(self._clients):
                if c.writer.is_closing():
                    continue
                if c.writer.transport.get_write_buffer_size() > self.max_buffer:
                    c.writer.transport.abort()  # far behind: it would not take the end in time
                    continue
                if snap is not None and snap is not c.last:
                    c.writer.write(self._frame(snap))
                c.writer.write(end)
                drains.append(loop.create_task(c.writer.drain()))
            if drains:
                await asyncio.wait(drains, timeout=END_DRAIN_S)
                for d in drains:
                    d.cancel()
        await self.close()

    async def close(self) -> None:
        """Disconnect every client, stop listening, remove the socket and the registry entry."""
        if self._closed:
            return
        self._ended = True
        self._closed = True
        for t in self._tasks:
            t.cancel()
        for c in list(self._clients):
            self._clients.discard(c)
            c.writer.close()
        self.engine.publish_interval = self._base_interval
        if self._server is not None:
            self._server.close()
        handlers = list(self._handlers)
        if handlers:  # their readers see the connections close and return
            await asyncio.wait(handlers, timeout=0.5)
            for h in handlers:
                h.cancel()
        if self._tasks or handlers:
            await asyncio.gather(*self._tasks, *handlers, return_exceptions=True)
        for p in (self.socket_path, self.registry_path):
            if p is not None:
                unlink(p)


SETUP_WAIT_S = 10.0
"""How long the control socket waits for the run's set-up (its endpoints started, connections
opened before the clock): bad input found there (an endpoint that refuses every connection) ends
the run before a console can attach, so the console that started it says why (the end of the
engine's log) rather than showing a run that stopped answering. A longer set-up (joining a Ray
cluster) is attachable once this has passed."""


async def serve_run(
    engine: RunEngine,
    info: RunInfo,
    *,
    folder: Path | None = None,
    before_end: Callable[[RunOutcome], None] | None = None,
    on_listening: Callable[[Path | None], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Run `engine` with a control socket and registry entry; the engine's own timings unchanged.

    `before_end(outcome)` runs after the engine has finished and before clients get the end
    message (write summary files there). If the socket cannot be created the run goes on
    unattachable, with a warning.
    """
    task = asyncio.ensure_future(engine.run())
    await asyncio.sleep(0)  # run() has taken the loop: commands from clients can be applied
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETUP_WAIT_S
    while engine.state == "starting" and not task.done() and loop.time() < deadline:
        await asyncio.sleep(0.02)
    if task.done():  # refused (a --resume against a changed workload, an endpoint refusing)
        if on_listening is not None:
            on_listening(None)
        return await task
    server: ControlServer | None = ControlServer(engine, info, folder=folder)
    assert server is not None
    try:
        await server.start()
    except (OSError, NotImplementedError, AttributeError) as e:  # no Unix sockets here
        await server.close()
        server = None
        (warn or _stderr)(f"the run cannot be attached to (control socket: {e})")
    if server is not None and folder is None:
        for note in run_dirs()[1]:  # the runtime folder was passed over: say where the socket is
            (warn or _stderr)(f"{note}; the run's control socket is in {server.socket_path}")
    if on_listening is not None:
        on_listening(None if server is None else server.socket_path)
    try:
        outcome = await task
        if before_end is not None:
            before_end(outcome)
    except BaseException:
        if server is not None:
            await server.close()
        raise
    if server is not None:
        await server.finish(outcome)
    return outcome


def _stderr(msg: str) -> None:
    print(f"oxconsole: warning: {msg}", file=sys.stderr, flush=True)


def live_view(engine: RunEngine) -> dict[str, Any]:
    """What a run is doing now beside its figures: its state, requests in flight, the limits in
    force, paused, auto, and the phase it is in (since when, and the changes that began it)."""
    snap = engine.latest
    out: dict[str, Any] = {"state": engine.state}
    if snap is None:
        return out
    g = snap.gauges
    out.update(
        in_flight=g.in_flight,
        concurrency=g.concurrency,
        rate=g.rate,
        tpm=g.tpm,
        paused=g.state == "paused",
        auto=g.auto,
        phase={
            "index": snap.phase_index,
            "since_s": round(snap.phase_t_start, 3),
            "settings": [dict(c) for c in snap.phase_settings],
        },
    )
    return out
