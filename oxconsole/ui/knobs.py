"""The console's knobs: the keys that turn concurrency, auto concurrency, rate and the token
budget up and down, and `s` that saves them as a tuned workload, as `ConsoleApp` actions.

Why this module exists: each knob reads the live value (or the one just sent, `Pending`), steps
it (`keysteps.py`), sends the command and says what it did in one line; five of them together made
the app too long to read. They need only the few app members `Console` names.
"""

from __future__ import annotations

from typing import Protocol

from textual.notifications import SeverityLevel

from oxconsole.base.units import fmt_count, fmt_rate
from oxconsole.control import RunSource
from oxconsole.engine.commands import Command, SetAuto, SetConcurrency, SetRate, SetTpm
from oxconsole.engine.livesettings import NO_SLO
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.keysteps import Pending, concurrency_step, rate_step, saved_words, short_path, tpm_step
from oxconsole.ui.numbers import round_sig

__all__ = ["Console", "KnobActions"]


class Console(Protocol):
    """What a knob needs of the app: its public interface for key actions (the live values just
    sent, the last rate before "unlimited", the checks before a change, sending and telling)."""

    pending: Pending
    prev_rate: float

    def need_live(self, setting: str = "") -> Snapshot | None: ...
    def need_snapshot(self) -> Snapshot | None: ...
    def refused(self, snap: Snapshot | None, setting: str) -> bool: ...
    def send(self, cmd: Command) -> bool: ...
    def tell(self, text: str, level: str = "info") -> None: ...
    def toast(
        self,
        message: str,
        *,
        kind: str = "",
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float = 4.0,
        keep: bool = False,
    ) -> None: ...

    @property
    def source(self) -> RunSource: ...


class KnobActions:
    """`action_concurrency`, `action_auto`, `action_rate`, `action_tpm`, `action_unlimited`: mixed
    into `ConsoleApp`, whose bindings name them."""

    def action_concurrency(self: Console, direction: int) -> None:
        """Concurrency up or down by 10%, at least by 1, never below 1."""
        snap = self.need_live("concurrency")
        if snap is None:
            return
        cur = int(self.pending.base("concurrency", snap.gauges.concurrency))
        new = concurrency_step(cur, direction)
        if new == cur:
            self.tell(f"concurrency is already {cur}", "warn")
            return
        if self.send(SetConcurrency(new)):
            self.pending.remember("concurrency", new)
            auto = self.pending.get("auto")
            if bool(auto) if auto is not None else snap.gauges.auto:  # a hand on it takes it over
                self.pending.remember("auto", 0.0)
                self.tell(f"concurrency {cur} → {new} (auto off)")
            else:
                self.tell(f"concurrency {cur} → {new}")

    def action_auto(self: Console) -> None:
        """Auto concurrency on or off (on: the run holds the highest concurrency meeting [slo]; a
        `+` or `-` meanwhile turns it off and sets the limit by hand)."""
        snap = self.need_live("auto")
        if snap is None:
            return
        pend = self.pending.get("auto")
        on = not (bool(pend) if pend is not None else snap.gauges.auto)
        if on and snap.goodput is None:  # a run without [slo] refuses it: said now, never "on"
            why = f"refused: set_auto: {NO_SLO}"
            self.toast(
                why.removeprefix("refused: "), kind="command", title="refused", severity="error", timeout=8
            )
            self.tell(why, "warn")
            return
        if self.send(SetAuto(on)):
            self.pending.remember("auto", 1.0 if on else 0.0)
            if on:
                self.tell("auto concurrency on: the highest concurrency meeting [slo] (+/- takes over)")
            else:
                self.tell(f"auto concurrency off: concurrency stays {snap.gauges.concurrency}")

    def action_rate(self: Console, direction: int) -> None:
        """Rate up or down by 10%; from unlimited, 10% around the achieved rate."""
        snap = self.need_live("rate")
        if snap is None:
            return
        cur = self.pending.base("rate", snap.gauges.rate)
        new = rate_step(cur, snap.gauges.achieved_rate or snap.req_per_s_10s, direction)
        was = "unlimited" if cur <= 0 else fmt_rate(cur)
        if new == cur:
            self.tell(f"rate is already {fmt_rate(cur)}", "warn")
            return
        if self.send(SetRate(new)):
            self.pending.remember("rate", new)
            self.tell(f"rate {was} → {fmt_rate(new)}")

    def action_tpm(self: Console, direction: int) -> None:
        """Token budget up or down by 10%; from off, 10% around the tokens sent a minute."""
        snap = self.need_snapshot()
        if snap is None or self.refused(snap, "tpm"):
            return
        cur = self.pending.base("tpm", snap.gauges.tpm)
        new = tpm_step(cur, snap, direction)
        if new == cur:
            self.tell(f"tpm is already {fmt_count(cur)}", "warn")
            return
        if self.send(SetTpm(new)):
            self.pending.remember("tpm", new)
            self.tell(f"tpm {'off' if cur <= 0 else fmt_count(cur)} → {fmt_count(new)}")

    def action_unlimited(self: Console) -> None:
        """Toggle an unlimited rate, remembering the rate it replaced."""
        snap = self.need_live("rate")
        if snap is None:
            return
        cur = self.pending.base("rate", snap.gauges.rate)
        if cur > 0:
            self.prev_rate = cur
            self.pending.remember("rate", 0.0)
            self.send(SetRate(0.0))
            self.tell(f"rate {fmt_rate(cur)} → unlimited (0 restores it)")
            return
        prev = self.prev_rate
        if prev <= 0:
            achieved = snap.gauges.achieved_rate or snap.req_per_s_10s
            if achieved <= 0:
                self.tell("no previous rate to restore, and nothing sent yet to start from", "warn")
                return
            prev = max(0.1, round_sig(achieved))
        self.pending.remember("rate", prev)
        self.send(SetRate(prev))
        self.tell(f"rate unlimited → {fmt_rate(prev)}")

    def action_save(self: Console) -> None:
        """Save NAME.tuned.toml beside the workload with the live settings; say what it changed
        in the status line, and each change and baked-in --set in a notification."""
        from oxconsole.reports.tuned import write_tuned
        from oxconsole.workload import WorkloadError

        snap = self.need_snapshot()
        if snap is None:
            return
        path = self.source.workload_path
        why = "" if path else "this run's workload file is not known here"
        if snap.gauges.concurrency <= 0:  # a snapshot rebuilt from a summary
            why = "the run's live settings never reached this console"
        if why or not path:
            self.toast(f"{why}; nothing saved", kind="save", severity="error")
            return
        try:
            saved = write_tuned(path, self.source.overrides, snap)
        except (OSError, WorkloadError) as e:
            self.toast(f"not saved: {e}", kind="save", severity="error", timeout=10)
            return
        short = short_path(saved.path)
        flash, details = saved_words(saved)
        self.tell(f"saved {short}{flash}")
        self.toast(details, kind="save", title=f"saved {short}", timeout=12)
