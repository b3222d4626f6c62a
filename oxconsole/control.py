"""The control socket between a running engine and its consoles, the run registry, `attach` and `ps`.

Why this module exists: the engine runs in its own process so that rendering never steals CPU
from dispatch or distorts timings, and so that a long run survives its console. This module is
the wire between the two: a Unix domain socket per run in an owner-only folder, newline-delimited
orjson messages, and a small JSON registry entry per run that `oxconsole ps` lists.

Protocol (one JSON object a line):

    client -> server   {"op": "hello", "hz": 4}
                       {"op": "cmd", "cmd": "set_concurrency", "value": 200}   (command_to_dict)
                       {"op": "bye"}
    server -> client   {"op": "hello", "name", "workload_path", "overrides", "results_path", "pid",
                        "started_at"}
                       {"op": "snap", "s": Snapshot.to_dict()}     at the client's hz, newest only
                       {"op": "end", "summary": {...}, "exit_code": n, "warnings": [...]}
                       {"op": "error", "message": "..."}           a message it could not use

The engine side never waits for a console: a frame is skipped while a client's write buffer is
above a small limit, a client stuck that way for a minute is dropped, and with no client attached
the server does nothing at all. Nothing here imports Textual; the console is imported when one
is opened.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import math
import os
import re
import socket
import stat
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import platformdirs

from oxconsole.engine.commands import Command, Stop, command_from_dict, command_to_dict
from oxconsole.metrics.snapshot import Snapshot

if TYPE_CHECKING:
    from oxconsole.engine.runner import RunEngine, RunOutcome

__all__ = [
    "ControlServer",
    "RunEntry",
    "RunInfo",
    "SocketSource",
    "attach_main",
    "list_runs",
    "ps_main",
    "runs_dir",
    "serve_run",
]

APP = "oxconsole"
MAX_BUFFER = 64 * 1024
"""Bytes queued to one client above which snapshot frames are skipped for it."""
SOCKET_SNDBUF = 64 * 1024
"""Kernel send buffer asked for each client connection (Linux doubles it)."""
STUCK_DROP_S = 60.0
"""A client whose buffer stays above MAX_BUFFER this long is dropped."""
MAX_LINE = 32 * 1024 * 1024
"""Longest line a client accepts (a snapshot)."""
SERVER_MAX_LINE = 64 * 1024
"""Longest line the server accepts (commands are small)."""
REGISTRY_INTERVAL = 2.0
MIN_HZ, MAX_HZ = 0.2, 30.0
END_DRAIN_S = 1.0
"""How long the server waits for clients to take the end message before it closes."""
EXIT_BAD_INPUT = 2
NO_RUN = "no run is going; start one with oxconsole WORKLOAD.toml"


def _encode(msg: dict[str, Any]) -> bytes:
    return orjson.dumps(msg) + b"\n"


# --- the run folder and the registry ------------------------------------------------------------
def _candidate_dirs() -> list[Path]:
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        runtime = Path(platformdirs.user_runtime_dir(APP)) / "runs"
    state = Path(platformdirs.user_state_dir(APP)) / "runs"
    return [runtime] if runtime == state else [runtime, state]


def _usable(d: Path) -> bool:
    """Create `d` owner-only, or accept it if it is ours, a real folder, and private."""
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o077:
            os.chmod(d, 0o700)
        return os.access(d, os.W_OK | os.X_OK)
    except OSError:
        return False


def runs_dir() -> Path:
    """The folder for run sockets and registry entries (created 0700).

    `platformdirs.user_runtime_dir("oxconsole")/runs`, or the state folder when the runtime
    folder cannot be used.
    """
    tried = _candidate_dirs()
    for d in tried:
        if _usable(d):
            return d
    raise OSError(f"no usable folder for run sockets (tried {', '.join(map(str, tried))})")


def _stem(name: str, pid: int) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
    return f"{safe[:40]}-{pid}"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not a run
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


@dataclass(frozen=True)
class RunInfo:
    """What a run tells about itself: sent on hello and kept in its registry entry."""

    name: str
    workload_path: str | None
    overrides: tuple[str, ...]
    results_path: str | None
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunEntry:
    """One registry entry, as `ps` lists it."""

    name: str
    pid: int
    socket: str
    workload_path: str | None = None
    overrides: tuple[str, ...] = ()
    results_path: str | None = None
    started_at: float = 0.0
    state: str = "starting"
    done: int = 0
    total: int | None = None
    req_per_s: float = 0.0
    errors: int = 0
    updated_at: float = 0.0

    @property
    def key(self) -> str:
        """`NAME-PID`, unique among live runs."""
        return f"{self.name}-{self.pid}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["overrides"] = list(self.overrides)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunEntry:
        total = d.get("total")
        return cls(
            name=str(d["name"]),
            pid=int(d["pid"]),
            socket=str(d["socket"]),
            workload_path=d.get("workload_path"),
            overrides=tuple(str(o) for o in d.get("overrides") or ()),
            results_path=d.get("results_path"),
            started_at=float(d.get("started_at") or 0.0),
            state=str(d.get("state") or "starting"),
            done=int(d.get("done") or 0),
            total=None if total is None else int(total),
            req_per_s=float(d.get("req_per_s") or 0.0),
            errors=int(d.get("errors") or 0),
            updated_at=float(d.get("updated_at") or 0.0),
        )


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, mode 0600."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _unlink(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _answers(sock_path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect(sock_path)
    except OSError as e:
        return e.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        s.close()
    return True


def list_runs(*, clean: bool = True) -> list[RunEntry]:
    """The runs going for this user, oldest first. With `clean`, stale entries are removed."""
    out: list[RunEntry] = []
    now = time.time()
    for d in _candidate_dirs():
        if not d.is_dir():
            continue
        for p in d.glob("*.json"):
            try:
                entry = RunEntry.from_dict(orjson.loads(p.read_bytes()))
            except (OSError, ValueError, KeyError, TypeError):
                m = re.search(r"-(\d+)$", p.stem)
                if clean and m and not pid_alive(int(m.group(1))):
                    _unlink(p, p.with_suffix(".sock"))
                continue
            alive = pid_alive(entry.pid)
            if alive and now - entry.updated_at > 30 * REGISTRY_INTERVAL:
                alive = _answers(entry.socket)  # silent for a minute: the pid may be another process
            if not alive:
                if clean:
                    _unlink(p, Path(entry.socket))
                continue
            if Path(entry.socket).exists():
                out.append(entry)
        if clean:
            for s in d.glob("*.sock"):
                m = re.search(r"-(\d+)$", s.stem)
                if m and not s.with_suffix(".json").exists() and not pid_alive(int(m.group(1))):
                    _unlink(s)
    out.sort(key=lambda e: (e.started_at, e.pid))
    return out


# --- engine side ------------------------------------------------------------------------------
@dataclass(eq=False)
class _Client:
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
        stem = _stem(self.info.name, self.info.pid)
        self.socket_path = folder / f"{stem}.sock"
        self.registry_path = folder / f"{stem}.json"
        _unlink(self.socket_path)
        self._server = await asyncio.start_unix_server(
            self._handle, path=str(self.socket_path), limit=SERVER_MAX_LINE
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
            _write_private(self.registry_path, orjson.dumps(self.registry_entry().to_dict()))
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
                line = await reader.readline()
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
        if self._ended:
            self._reply(client, {"op": "error", "message": "the run has ended"})
            return
        try:
            cmd = command_from_dict({k: v for k, v in msg.items() if k != "op"})
            self.engine.apply(cmd)
        except Exception as e:  # a bad command is the client's problem, never the run's
            self._reply(client, {"op": "error", "message": f"command not applied: {e!r}"})

    def _reply(self, client: _Client, msg: dict[str, Any]) -> None:
        if not client.writer.is_closing():
            client.writer.write(_encode(msg))

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
            self._enc = _encode({"op": "snap", "s": snap.to_dict()})
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
            end = _encode(
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
                _unlink(p)


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
    if task.done():  # refused at once (e.g. a --resume against a changed workload)
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


# --- client side ------------------------------------------------------------------------------
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
        hz: float = 4.0,
    ) -> None:
        self.path = os.fspath(path)
        self.name = name
        self.workload_path = workload_path
        self.overrides = tuple(overrides)
        self.results_path = results_path
        self.pid = pid
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

    @classmethod
    def from_entry(cls, entry: RunEntry, *, hz: float = 4.0) -> SocketSource:
        return cls(
            entry.socket,
            name=entry.name,
            workload_path=entry.workload_path,
            overrides=entry.overrides,
            results_path=entry.results_path,
            pid=entry.pid,
            hz=hz,
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

    def send(self, cmd: Command) -> None:
        data = _encode({"op": "cmd", **command_to_dict(cmd)})
        w = self._writer
        if w is None:
            if not self._closed:
                self._pending.append(data)
            return
        if not w.is_closing():
            w.write(data)

    async def start(self, timeout: float = 5.0) -> None:
        """Connect and say hello. Raises OSError when the run is not there (any more)."""
        if self._writer is not None:
            return
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(self.path, limit=MAX_LINE), timeout
        )
        self._reader, self._writer = reader, writer
        writer.write(_encode({"op": "hello", "hz": self.hz}))
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
                w.write(_encode({"op": "bye"}))
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
        s = self._snap if self._raw is None else self.latest()
        return s is not None and s.gauges.state == "done"

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

    def _on_message(self, line: bytes) -> None:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        if not isinstance(msg, dict):
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
        elif op == "error":
            self.last_error = str(msg.get("message"))


# --- opening a console on a run -----------------------------------------------------------------
ConsoleFn = Callable[..., str]


def load_console() -> tuple[ConsoleFn | None, str]:
    """`oxconsole.ui.app.run_console`, or None and why it cannot be loaded."""
    try:
        from oxconsole.ui.app import run_console  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        return None, f"the live console is not available in this build ({e})"
    fn: ConsoleFn = run_console
    return fn, ""


def _run_async(coro: Any) -> Any:
    from oxconsole.aio import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


def console_session(
    source: SocketSource,
    run_console: ConsoleFn,
    *,
    theme: str | None,
    refresh: float,
    wait_exit: Callable[[float], object] | None = None,
) -> int:
    """Open the console on a run; after `q` print its summary, after `d` how to come back."""
    if not _answers(source.path):
        print(
            f"oxconsole: run {source.name} (pid {source.pid}) does not answer on {source.path}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        result = run_console(source, theme=theme, refresh=refresh)
    except Exception:
        import traceback

        traceback.print_exc()
        print(f"oxconsole: the console failed; {_goes_on(source)}", file=sys.stderr)
        return 1
    if result == "detach" and not source.ended:
        print(_goes_on(source))
        return 0
    code = finish_run(source)
    if wait_exit is not None:
        with contextlib.suppress(Exception):
            wait_exit(10.0)
    return code


def _goes_on(source: SocketSource) -> str:
    key = source.name
    if sum(1 for e in list_runs(clean=False) if e.name == source.name) > 1:
        key = f"{source.name}-{source.pid}"
    return f"run {source.name} goes on (pid {source.pid}); re-attach with: oxconsole attach {key}"


def finish_run(source: SocketSource) -> int:
    """Make sure the run stops, wait for its end message, print the summary; its exit code."""
    from oxconsole.report import render_summary

    if not source.ended:
        cancel = False
        while True:
            try:
                _run_async(_stop_and_wait(source, cancel))
                break
            except KeyboardInterrupt:
                if cancel:
                    raise
                cancel = True
                print("\noxconsole: cancelling the requests in flight", file=sys.stderr, flush=True)
    summary = source.final_summary
    code = source.exit_code
    if summary is None:
        summary = _summary_file(source)
        if summary is None:
            print(
                f"oxconsole: run {source.name} (pid {source.pid}) ended without a summary; see "
                f"{_log_path(source) or 'its engine.log'}",
                file=sys.stderr,
            )
            return 1
        errors = (summary.get("requests") or {}).get("error") or 0
        code = 1 if errors else 0
    for w in source.warnings:
        print(f"oxconsole: warning: {w}", file=sys.stderr)
    print(render_summary(summary))
    return 0 if code is None else code


async def _stop_and_wait(source: SocketSource, cancel: bool) -> None:
    """A fresh connection (the console's loop is gone): send stop, wait for the end message."""
    fresh = SocketSource(source.path, name=source.name, pid=source.pid, hz=1.0)
    try:
        await fresh.start()
    except (OSError, TimeoutError):
        if source.pid is not None:  # it already ended: give it time to write summary.json
            deadline = time.monotonic() + 15.0
            while pid_alive(source.pid) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
        return
    try:
        fresh.send(Stop(cancel=cancel))
        await fresh.wait_end()
    finally:
        await fresh.close()
    if fresh.ended:
        source.final_summary = fresh.final_summary
        source.exit_code = fresh.exit_code
        source.warnings = fresh.warnings
        source.results_path = fresh.results_path or source.results_path


def _summary_file(source: SocketSource) -> dict[str, Any] | None:
    if not source.results_path:
        return None
    p = Path(source.results_path).parent / "summary.json"
    try:
        d = orjson.loads(p.read_bytes())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _log_path(source: SocketSource) -> str | None:
    return str(Path(source.results_path).parent / "engine.log") if source.results_path else None


# --- attach and ps ------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _fmt_elapsed(s: float) -> str:
    from oxconsole.metrics.format import fmt_duration

    return fmt_duration(s)


def _progress(e: RunEntry) -> str:
    if e.total:
        return f"{e.done}/{e.total} {100.0 * e.done / e.total:.0f}%"
    return f"{e.done}"


def render_ps(entries: list[RunEntry], now: float | None = None) -> str:
    now = time.time() if now is None else now
    head = ("NAME", "PID", "STATE", "PROGRESS", "REQ/S", "ERR", "ELAPSED")
    rows = [
        (
            e.name,
            str(e.pid),
            e.state,
            _progress(e),
            f"{e.req_per_s:.1f}",
            str(e.errors),
            _fmt_elapsed(now - e.started_at),
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    right = {1, 3, 4, 5, 6}

    def line(r: tuple[str, ...]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return "\n".join(line(r) for r in [head, *rows])


def ps_main(argv: list[str]) -> int:
    p = _Parser(prog="oxconsole ps", description="List the runs going on this machine for this user.")
    p.add_argument("--json", action="store_true", help="print a JSON array of registry entries")
    ns = p.parse_args(argv)
    entries = list_runs()
    if ns.json:
        print(orjson.dumps([e.to_dict() for e in entries], option=orjson.OPT_INDENT_2).decode())
        return 0
    if not entries:
        print(NO_RUN)
        return 0
    print(render_ps(entries))
    return 0


def _match(entries: list[RunEntry], name: str) -> Iterator[RunEntry]:
    exact = [e for e in entries if e.key == name]
    yield from exact or [e for e in entries if e.name == name]


def attach_main(argv: list[str]) -> int:
    p = _Parser(
        prog="oxconsole attach",
        description="Open the console on a run already going (started headless, or detached with d).",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the run's name, or NAME-PID (see oxconsole ps)")
    p.add_argument("--theme", metavar="NAME", help="console theme")
    p.add_argument(
        "--refresh", type=float, default=4.0, metavar="HZ", help="console refresh rate (default 4)"
    )
    ns = p.parse_args(argv)
    if ns.refresh <= 0 or not math.isfinite(ns.refresh):
        print(
            f"oxconsole attach: --refresh: expected a number of updates per second > 0, got {ns.refresh}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    entries = list_runs()
    if not entries:
        print(f"oxconsole attach: {NO_RUN}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if ns.name is None:
        if len(entries) > 1:
            print(
                "oxconsole attach: several runs are going; name one (NAME or NAME-PID):\n"
                + render_ps(entries),
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        entry = entries[0]
    else:
        found = list(_match(entries, ns.name))
        if not found:
            print(
                f"oxconsole attach: no run named {ns.name!r} is going; the runs going are:\n"
                + render_ps(entries),
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        if len(found) > 1:
            print(
                f"oxconsole attach: several runs are named {ns.name!r}; name one as NAME-PID:\n"
                + render_ps(found),
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        entry = found[0]
    run_console, why = load_console()
    if run_console is None:
        print(f"oxconsole attach: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    source = SocketSource.from_entry(entry, hz=ns.refresh)
    return console_session(source, run_console, theme=ns.theme, refresh=ns.refresh)
