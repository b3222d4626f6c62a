"""What the console's keys set next, and what the console says it is doing: pure decisions.

Why this module exists: a key press turns the live figures into a new setting (`+` raises the
concurrency by 10%, `]` the rate, `space` pauses or resumes), and the header's status line says
what the console is doing (draining, finished, disconnected). Both are decisions on a snapshot and
a few flags, testable without a terminal; the app only sends and shows what they return. Textual
is not imported here.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.reports.tuned import TunedFile
from oxconsole.ui.numbers import round_sig

__all__ = [
    "PENDING_S",
    "Pending",
    "concurrency_step",
    "console_status",
    "failed_mostly",
    "filtered",
    "paused_by_user",
    "rate_step",
    "run_duration",
    "saved_words",
    "short_path",
    "sweep_refusal",
    "tokens_per_minute",
    "tpm_step",
]

PENDING_S = 2.0
"""A value just sent is the base for the next +/- for this long, even before a snapshot shows it."""


class Pending:
    """Values just sent, by setting: two quick presses of + step from the value the first one
    sent, not from the snapshot that does not show it yet."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._sent: dict[str, tuple[float, float]] = {}

    def remember(self, key: str, value: float) -> None:
        self._sent[key] = (value, self._clock())

    def get(self, key: str) -> float | None:
        """The value sent for ``key`` less than PENDING_S ago, else None."""
        pend = self._sent.get(key)
        if pend is not None and self._clock() - pend[1] < PENDING_S:
            return pend[0]
        return None

    def forget(self) -> None:
        """The run refused a command: what was just sent is not what it runs; the snapshot is."""
        self._sent.clear()

    def base(self, key: str, live: float) -> float:
        """What the next step starts from: the value just sent, else the ``live`` one."""
        pend = self.get(key)
        return live if pend is None else pend


def concurrency_step(cur: int, direction: int) -> int:
    """Concurrency up or down by 10%, at least by 1, never below 1."""
    if direction > 0:
        return max(cur + 1, round(cur * 1.1))
    return max(1, min(cur - 1, round(cur * 0.9)))


def rate_step(cur: float, achieved: float, direction: int) -> float:
    """Rate up or down by 10%; from unlimited (``cur`` 0), 10% around the ``achieved`` rate (or
    1/s when nothing was sent yet). Never below 0.1/s; ``cur`` again when it cannot go lower."""
    factor = 1.1 if direction > 0 else 0.9
    if cur <= 0:
        base = achieved if achieved > 0 else 1.0
        return max(0.1, round_sig(base * factor))
    new = max(0.1, round_sig(cur * factor))
    if new == cur:
        new = round_sig(cur + (0.1 if direction > 0 else -0.1)) if cur > 0.1 or direction > 0 else cur
    return new


def tpm_step(cur: float, snap: Snapshot, direction: int) -> float:
    """The token budget up or down by 10%, in whole tokens; from off (``cur`` 0), 10% around the
    tokens sent a minute (`tokens_per_minute`; 1,000 when nothing was sent yet). Never below 1."""
    factor = 1.1 if direction > 0 else 0.9
    achieved = tokens_per_minute(snap) if cur <= 0 else 0.0
    base = cur if cur > 0 else (achieved if achieved > 0 else 1000.0)
    new = float(max(1, round(round_sig(base * factor))))
    if cur > 0 and new == cur:
        new = max(1.0, cur + (1 if direction > 0 else -1))
    return new


def tokens_per_minute(snap: Snapshot) -> float:
    """Tokens (input + output) a minute: the budget's last minute when it has one, else the whole
    run's pace."""
    g = snap.gauges
    if g.tpm_used > 0:
        return g.tpm_used
    if snap.elapsed_s <= 0:
        return 0.0
    return (snap.input_tokens + snap.output_tokens) * 60.0 / snap.elapsed_s


def paused_by_user(snap: Snapshot) -> bool:
    """Whether the last pause change logged was a pause (not a resume): the run is paused because
    someone asked, not because no model is available. A sweep says so itself (`held`): a pause
    that lands as its point ends changes nothing in that point's log."""
    if snap.sweep is not None:
        return bool(snap.sweep.get("held"))
    for c in reversed(snap.changes):
        if c.get("what") == "paused":
            return bool(c.get("to"))
    return False


def filtered(snap: Snapshot, text: str) -> Snapshot:
    """`snap` with only the models and error classes whose name holds ``text`` (any case): what
    the models and errors tables show while `/` filters them. The rest of the run is untouched."""
    part = text.casefold()
    if not part:
        return snap
    return dataclasses.replace(
        snap,
        models=tuple(m for m in snap.models if part in m.name.casefold()),
        errors={k: v for k, v in snap.errors.items() if part in k.casefold()},
        attempt_errors={k: v for k, v in snap.attempt_errors.items() if part in k.casefold()},
        error_details={k: v for k, v in snap.error_details.items() if part in k.casefold()},
    )


def failed_mostly(snap: Snapshot) -> bool:
    """At least half the finished requests failed: at the end, the errors are what to show."""
    c = snap.counts
    return c.error > 0 and 2 * c.error >= c.total


def console_status(
    snap: Snapshot,
    *,
    finished: bool,
    connected: bool,
    stopping: bool,
    cancelling: bool,
    attached: bool = False,
) -> tuple[str, str, str]:
    """(state shown, note line, note level) from the run and what the console is doing
    (`attached`: opened by `oxconsole attach`, where Q, not q, stops and cancels)."""
    g = snap.gauges
    if finished or g.state == "done":
        if stopping:
            return "done", "stopped: leaving…", "info"
        if failed_mostly(snap):
            c = snap.counts
            failed = (
                "every request failed" if c.error == c.total else f"{c.error} of {c.total} requests failed"
            )
            return (
                "done",
                f"run ended: {failed}, see errors · q exits and prints the summary",
                "error",
            )
        return "done", "run finished: q exits and prints the summary · s saves the tuned workload", "info"
    if not connected:
        return "disconnected", "lost the connection to the run: q or d leaves the console", "error"
    if stopping:
        if cancelling:
            return "draining", f"cancelling {g.in_flight} in flight…", "warn"
        again = "Q" if attached else "q"
        return "draining", f"draining… {g.in_flight} in flight finishing ({again} again cancels them)", "warn"
    if g.state == "paused":
        if paused_by_user(snap):
            if snap.sweep is not None:  # held by a key (`sweep/served.py`)
                return "paused", "sweep held: space resumes (a point paused midway runs again)", "warn"
            return "paused", "paused: space resumes (requests in flight finish)", "warn"
        return "paused", "no model available: w opens the routing editor", "warn"
    return g.state, "", ""


def sweep_refusal(snap: Snapshot | None, setting: str) -> str | None:
    """Why a key must not change `setting` now: the sweep sets it at each point (a change would
    measure the point at another value than its own); None when it may."""
    g = snap.sweep if snap is not None else None
    if g is None or setting not in (g.get("locked") or ()):
        return None
    return f"refused: the sweep sets {g.get('key')} at each point (a change would spoil it)"


def saved_words(saved: TunedFile) -> tuple[str, str]:
    """What `s` says once it saved: a few words for the status line (after ``saved PATH``), and
    each key it changed and each --set override it baked in, one a line, for a notification."""
    n = len(saved.changes)
    flash = ": no change" if not n else f": {saved.changes[0]}" if n == 1 else f": {n} changes"
    lines = list(saved.changes) or ["no change: the live settings are the workload's"]
    if saved.overrides:
        flash += f" · --set baked in ({len(saved.overrides)})"
        lines += [f"baked in: --set {o}" for o in saved.overrides]
    return flash, "\n".join(lines)


def short_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (it is beside the workload)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_duration(workload_path: str | None, overrides: Sequence[str]) -> float:
    """The run's ``run.duration`` (0: none), read from its workload file for the header's time
    bar (snapshots do not carry it); 0 when the file cannot be read here."""
    from oxconsole.workload import WorkloadError, load_workload

    if not workload_path:
        return 0.0
    try:
        return float(load_workload(workload_path, overrides).run.duration)
    except (OSError, WorkloadError):
        return 0.0
