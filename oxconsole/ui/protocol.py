"""The one thing the console needs from a run: the `RunSource` protocol.

Why this module exists: the console must not care whether the run is an engine on a thread in this
process or a process on the other end of a socket (`oxconsole attach`). Both implement this
structural protocol (`oxconsole.source` provides them); tests provide their own. The console only
reads snapshots and sends commands through it.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from oxconsole.engine.commands import Command
from oxconsole.metrics.snapshot import Snapshot

__all__ = ["RunSource"]


@runtime_checkable
class RunSource(Protocol):
    """A run as the console sees it."""

    name: str
    """The run's name (the workload's `name`)."""
    workload_path: str | None
    """The workload file, for saving a tuned copy; None when unknown."""
    overrides: tuple[str, ...]
    """The `--set` overrides the run started with."""

    def latest(self) -> Snapshot | None:
        """The newest snapshot; never blocks."""
        ...

    def send(self, cmd: Command) -> None:
        """Fire and forget: the run applies it on its own loop."""
        ...

    async def start(self) -> None:
        """Called once when the console mounts."""
        ...

    async def close(self) -> None:
        """Called once when the console leaves (quit or detach)."""
        ...

    @property
    def finished(self) -> bool:
        """The run is over (its summary is ready)."""
        ...

    @property
    def connected(self) -> bool:
        """The run can be reached (always true in-process)."""
        ...
