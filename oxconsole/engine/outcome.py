"""What a run looks like from outside: the `RunEngine` surface and the `RunOutcome` it ends with.

Why this module exists: the command line, the host, the control socket and the console drive a
run in one process (`Engine`) and a run on worker processes (`WorkerPool`) alike; this is the
surface they rely on, apart from either implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from oxconsole.engine.commands import Command
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import Workload


@dataclass
class RunOutcome:
    summary: dict[str, Any]
    ok: int
    error: int
    interrupted: bool
    skipped: int = 0
    """Ids already `ok` in the journal (on --resume) that were not sent again."""
    warnings: list[str] = field(default_factory=list)

    crashed: bool = False
    """A worker process died: its requests in flight are not in the journal (--resume sends them)."""

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.error or self.crashed else 0


class RunEngine(Protocol):
    """What the CLI, the control socket and the console need of a run: `Engine` or `WorkerPool`."""

    w: Workload
    state: str
    latest: Snapshot | None
    warnings: list[str]
    publish_interval: float
    total_expected: int | None

    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError`; changes nothing; any thread."""
        ...

    def apply(self, cmd: Command) -> None: ...
    def submit(self, cmd: Command) -> None: ...
    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None: ...
    async def run(self) -> RunOutcome: ...
