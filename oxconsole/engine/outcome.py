"""What a run looks like from outside: the `RunEngine` surface and the `RunOutcome` it ends with.

Why this module exists: the command line, the host, the control socket and the console drive a
run (`runner.Engine`, whatever its shards) and a sweep served as one run (`sweep/served.py`)
alike; this is the surface they rely on, apart from either implementation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from oxconsole.engine.commands import By, Command
from oxconsole.metrics.goodput import slo_missed
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import Workload

EXIT_OK, EXIT_ERRORS, EXIT_NOT_SAVED, EXIT_STOPPED = 0, 1, 4, 130
"""Every request ok; some ended in error; the journal could not be written; stopped before every
request was sent. (2, bad input, is decided before a run starts: `oxconsole.base.exits`.)"""
EXIT_SLO = 3
"""The run finished but its goodput fell below the `[slo]` target (the summary's `goodput.met`)."""


@dataclass
class RunOutcome:
    summary: dict[str, Any]
    ok: int
    error: int
    interrupted: bool
    """Stopped (a signal, a `Stop` command, `q` in the console) before dispatch reached its end:
    not every prompt was sent and the duration, if any, had not run out."""
    skipped: int = 0
    """Ids already `ok` in the journal (on --resume) that were not sent again."""
    warnings: list[str] = field(default_factory=list)

    crashed: bool = False
    """A worker process died: its requests in flight are not in the journal (--resume sends them)."""
    not_sent: int | None = 0
    """Requests of the run with no record (`requests.not_sent` in the summary); None: unknown (a
    run cycling its prompts until `run.duration`, stopped before it)."""
    journal_failure: str | None = None
    """Why the journal could not be written ("PATH: reason"); the summary counts only its lines."""
    metrics_url: str | None = None
    """Where `/metrics` was served while the run lasted (`[output] prometheus`), for its end lines."""
    html_report: str | None = None
    """The HTML report the run's end wrote (`[output] html`), for its end lines."""

    cancelled: int = 0
    """Requests a stop cancelled before they finished (`requests.cancelled`): not errors."""

    @property
    def stopped_early(self) -> bool:
        """Stopped before every request was sent or finished: some not sent, or some cancelled (a
        stop that only cut the drain, every request in flight finishing, is not)."""
        return (self.interrupted and self.not_sent != 0) or self.cancelled > 0

    @property
    def exit_code(self) -> int:
        """The contract's precedence: 4 (not saved), 130 (stopped early, requests cancelled
        included), 3 (`[slo]` not met), 1 (errors), 0."""
        if self.journal_failure is not None:
            return EXIT_NOT_SAVED
        if self.stopped_early:
            return EXIT_STOPPED
        if slo_missed(self.summary):
            return EXIT_SLO
        return EXIT_ERRORS if self.error or self.crashed else EXIT_OK


def ended(
    summary: dict[str, Any],
    *,
    ok: int,
    error: int,
    stopped: bool,
    dispatch_complete: bool,
    skipped: int,
    warnings: list[str],
    journal_failure: str | None,
    crashed: bool = False,
) -> RunOutcome:
    """The outcome of a run (`runner.Engine`) once its summary is made. When the
    journal failed, the counts are the summary's (only the lines in the file count), not the live
    ones; a stop that came after dispatch reached its end did not interrupt anything."""
    req = summary["requests"]
    saved = journal_failure is None
    return RunOutcome(
        summary=summary,
        ok=ok if saved else req["ok"],
        error=error if saved else req["error"],
        interrupted=stopped and not dispatch_complete,
        skipped=skipped,
        warnings=warnings,
        crashed=crashed,
        not_sent=req["not_sent"],
        journal_failure=journal_failure,
        cancelled=int(req.get("cancelled") or 0),
    )


def count_not_sent(total: int | None, finished: int, complete: bool) -> int | None:
    """Requests of a run with no record: its total less those that ended (a request cancelled at
    stop ended, as `cancelled`; one lost with a crashed worker or a failed journal did not).
    Without a known total: 0 once dispatch reached its end, else unknown (None)."""
    if total is not None:
        return max(0, total - finished)
    return 0 if complete else None


class RunEngine(Protocol):
    """What the CLI, the control socket and the console need of a run: `Engine` or a served sweep."""

    w: Workload
    warnings: list[str]
    publish_interval: float
    total_expected: int | None

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot of the run (None before the first)."""
        ...

    @property
    def state(self) -> str: ...
    def admit(self, cmd: Command) -> Command:
        """The command as it will be applied, or `CommandError`; changes nothing; any thread."""
        ...

    def apply(self, cmd: Command, by: By = "command") -> list[dict[str, Any]]:
        """Apply on the run's loop; the changes made, as `changes` logs them."""
        ...

    def summary_now(self) -> dict[str, Any]:
        """The run so far in the summary's keys, built when asked (the control socket's `summary`)."""
        ...

    def submit(self, cmd: Command, by: By = "command") -> None: ...
    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None: ...
    async def run(self) -> RunOutcome: ...
