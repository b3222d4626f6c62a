"""Where the console gets a run from: the `RunSource` interface, and `LocalSource` (same process).

Why this module exists: the console must not care whether the engine runs in another process
(reached over the control socket, `control.client.SocketSource`) or in a thread of its own
process (`LocalSource`, for tests and as a fallback). Both give it the newest snapshot without
blocking, take commands fire-and-forget, and say whether the run has finished. Nothing here
imports Textual.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from oxconsole.base.aio import new_event_loop
from oxconsole.control.registry import RunInfo
from oxconsole.control.server import serve_run
from oxconsole.engine.commands import By, Command
from oxconsole.metrics.snapshot import Snapshot

if TYPE_CHECKING:
    from oxconsole.engine.runner import RunEngine, RunOutcome

__all__ = ["LocalSource", "RunSource"]


@runtime_checkable
class RunSource(Protocol):
    """What the console reads a run through. `start`/`close` run on the console's event loop."""

    name: str
    """The run's name (the workload's `name`, or its file stem)."""
    workload_path: str | None
    """Absolute path of the workload file, for saving a tuned copy beside it."""
    overrides: tuple[str, ...]
    """The `--set` overrides the run was started with."""

    def latest(self) -> Snapshot | None:
        """The newest snapshot received; None before the first. Never blocks."""
        ...

    def send(self, cmd: Command) -> None:
        """Send a command to the engine; fire and forget, never blocks. A command no run could
        take may raise `CommandError` here (in process); over a socket the run answers an error."""
        ...

    async def start(self) -> None:
        """Connect and begin receiving snapshots, on the caller's loop."""
        ...

    async def close(self) -> None:
        """Disconnect; the run goes on."""
        ...

    @property
    def finished(self) -> bool:
        """The run has ended (its final snapshot's state is "done")."""
        ...

    @property
    def connected(self) -> bool: ...


class LocalSource:
    """Runs an engine on its own event loop in a background thread of this process.

    `engine_factory` is called once, in `start`, on the caller's thread (so bad input raises
    there). With `serve` set, the run also gets a control socket and a registry entry (as a
    headless run does), so `oxconsole attach` and `ps` see it.
    """

    def __init__(
        self,
        engine_factory: Callable[[], RunEngine],
        *,
        overrides: tuple[str, ...] = (),
        serve: RunInfo | None = None,
        serve_folder: Path | None = None,
    ) -> None:
        self._factory = engine_factory
        self.by: By = "key"
        """Whose commands these are, as `changes` log them: the console's keys."""
        self.engine: RunEngine | None = None
        self.name = ""
        self.workload_path: str | None = None
        self.overrides = tuple(overrides)
        self._serve = serve
        self._serve_folder = serve_folder
        self.server_socket: Path | None = None
        """The control socket's path once the served run is listening (with `serve`)."""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._outcome: RunOutcome | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._done = threading.Event()
        self._connected = False

    # --- RunSource ----------------------------------------------------------------------------
    def latest(self) -> Snapshot | None:
        return None if self.engine is None else self.engine.latest

    def send(self, cmd: Command) -> None:
        """Fire and forget; a command no run could take raises `CommandError` here."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._done.is_set():
            return
        assert self.engine is not None
        cmd = self.engine.admit(cmd)
        try:
            loop.call_soon_threadsafe(self._deliver, cmd)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    async def start(self) -> None:
        self.start_thread()
        await asyncio.to_thread(self._started.wait, 10.0)
        self._connected = True

    async def close(self) -> None:
        self._connected = False

    @property
    def finished(self) -> bool:
        if self._done.is_set():
            return True
        s = self.latest()
        return s is not None and s.gauges.state == "done"

    @property
    def connected(self) -> bool:
        return self._connected and not self._done.is_set()

    # --- local extras -------------------------------------------------------------------------
    def start_thread(self) -> None:
        """Create the engine and start its thread (idempotent). Usable without an event loop."""
        if self._thread is not None:
            return
        engine = self._factory()
        self.engine = engine
        self.name = engine.w.name
        self.workload_path = str(Path(engine.w.path).resolve())
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._main, name=f"oxconsole-engine-{self.name}", daemon=True)
        self._thread.start()

    def wait_done(self, timeout: float | None = None) -> RunOutcome | None:
        """Block until the run ends; its outcome, or None on timeout. Re-raises an engine crash."""
        if not self._done.wait(timeout):
            return None
        if self._error is not None:
            raise self._error
        return self._outcome

    @property
    def outcome(self) -> RunOutcome | None:
        return self._outcome

    def _main(self) -> None:
        loop = self._loop
        assert loop is not None and self.engine is not None
        asyncio.set_event_loop(loop)
        try:
            self._outcome = loop.run_until_complete(self._go())
        except BaseException as e:  # handed to wait_done's caller
            self._error = e
        finally:
            self._started.set()
            self._done.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _go(self) -> RunOutcome:
        assert self.engine is not None
        if self._serve is None:
            task = asyncio.ensure_future(self.engine.run())
            await asyncio.sleep(0)  # run() has taken the loop: commands can be applied
            self._started.set()
            return await task

        def listening(path: Path | None) -> None:
            self.server_socket = path
            self._started.set()

        return await serve_run(self.engine, self._serve, folder=self._serve_folder, on_listening=listening)

    def _deliver(self, cmd: Command) -> None:
        """On the engine loop: apply now if the run has begun, else retry shortly."""
        engine = self.engine
        assert engine is not None and self._loop is not None
        if self._started.is_set():
            engine.apply(cmd, self.by)
        else:
            self._loop.call_later(0.02, self._deliver, cmd)
