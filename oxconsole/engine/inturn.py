"""What a run made of runs in turn (`Trials`, a served sweep's points) does the same whatever its
runs are: it looks like one run (`RunEngine`) to the control server and the console, and hands
the live settings and commands to the run of the moment.

Why this module exists: trials and a sweep's points both start an `Engine` after another; what
passes from the outer run to the inner one (the publish interval, a command checked, a command
sent from another thread) is the same in both and is written once here.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from oxconsole.engine.commands import By, Command
from oxconsole.engine.livesettings import check

if TYPE_CHECKING:
    from oxconsole.engine.runner import Engine

__all__ = ["RunsInTurn"]


class RunsInTurn:
    """The base of a run of runs: subclasses call `__init__`, say which engine runs now (`inner`),
    define `apply` and set `_loop` when they run; `submit` raises `RuntimeError(not_running)`
    until then, and once the loop is closed."""

    not_running = "not running"
    """What `submit` says before the run has its loop, or after it ended."""

    def __init__(self) -> None:
        self._interval = 0.25
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def inner(self) -> Engine | None:  # pragma: no cover - an interface
        """The engine running now (None between two runs)."""
        raise NotImplementedError

    @property
    def publish_interval(self) -> float:
        return self._interval

    @publish_interval.setter
    def publish_interval(self, value: float) -> None:
        self._interval = value
        e = self.inner
        if e is not None:
            e.publish_interval = value

    def admit(self, cmd: Command) -> Command:
        e = self.inner
        return e.admit(cmd) if e is not None else check(cmd)

    def apply(self, cmd: Command, by: By = "command") -> list[dict[str, object]]:  # pragma: no cover
        raise NotImplementedError

    def submit(self, cmd: Command, by: By = "command") -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError(self.not_running)
        loop.call_soon_threadsafe(self.apply, self.admit(cmd), by)
