"""The console's knobs: the keys that turn concurrency, auto concurrency, rate and the token
budget up and down, as `ConsoleApp` actions.

Why this module exists: each knob reads the live value (or the one just sent, `Pending`), steps
it (`steps.py`), sends the command and says what it did in one line; five of them together made
the app too long to read. They need only the few app methods `_Console` names.
"""

from __future__ import annotations

from typing import Protocol

from oxconsole.engine.commands import Command, SetAuto, SetConcurrency, SetRate, SetTpm
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.numbers import round_sig
from oxconsole.ui.steps import Pending, concurrency_step, rate_step, tpm_step
from oxconsole.units import fmt_count, fmt_rate

__all__ = ["KnobActions"]


class _Console(Protocol):
    """What a knob needs of the app."""

    _pending: Pending
    _prev_rate: float

    def _need_live(self, setting: str = "") -> Snapshot | None: ...
    def _need_snapshot(self) -> Snapshot | None: ...
    def _refused(self, snap: Snapshot | None, setting: str) -> bool: ...
    def send(self, cmd: Command) -> bool: ...
    def tell(self, text: str, level: str = "info") -> None: ...


class KnobActions:
    """`action_concurrency`, `action_auto`, `action_rate`, `action_tpm`, `action_unlimited`: mixed
    into `ConsoleApp`, whose bindings name them."""

    def action_concurrency(self: _Console, direction: int) -> None:
        """Concurrency up or down by 10%, at least by 1, never below 1."""
        snap = self._need_live("concurrency")
        if snap is None:
            return
        cur = int(self._pending.base("concurrency", snap.gauges.concurrency))
        new = concurrency_step(cur, direction)
        if new == cur:
            self.tell(f"concurrency is already {cur}", "warn")
            return
        if self.send(SetConcurrency(new)):
            self._pending.remember("concurrency", new)
            auto = self._pending.get("auto")
            if bool(auto) if auto is not None else snap.gauges.auto:  # a hand on it takes it over
                self._pending.remember("auto", 0.0)
                self.tell(f"concurrency {cur} → {new} (auto off)")
            else:
                self.tell(f"concurrency {cur} → {new}")

    def action_auto(self: _Console) -> None:
        """Auto concurrency on or off (on: the run holds the highest concurrency meeting [slo]; a
        `+` or `-` meanwhile turns it off and sets the limit by hand)."""
        snap = self._need_live("auto")
        if snap is None:
            return
        pend = self._pending.get("auto")
        on = not (bool(pend) if pend is not None else snap.gauges.auto)
        if self.send(SetAuto(on)):
            self._pending.remember("auto", 1.0 if on else 0.0)
            if on:
                self.tell("auto concurrency on: the highest concurrency meeting [slo] (+/- takes over)")
            else:
                self.tell(f"auto concurrency off: concurrency stays {snap.gauges.concurrency}")

    def action_rate(self: _Console, direction: int) -> None:
        """Rate up or down by 10%; from unlimited, 10% around the achieved rate."""
        snap = self._need_live("rate")
        if snap is None:
            return
        cur = self._pending.base("rate", snap.gauges.rate)
        new = rate_step(cur, snap.gauges.achieved_rate or snap.req_per_s_10s, direction)
        was = "unlimited" if cur <= 0 else fmt_rate(cur)
        if new == cur:
            self.tell(f"rate is already {fmt_rate(cur)}", "warn")
            return
        if self.send(SetRate(new)):
            self._pending.remember("rate", new)
            self.tell(f"rate {was} → {fmt_rate(new)}")

    def action_tpm(self: _Console, direction: int) -> None:
        """Token budget up or down by 10%; from off, 10% around the tokens sent a minute."""
        snap = self._need_snapshot()
        if snap is None or self._refused(snap, "tpm"):
            return
        cur = self._pending.base("tpm", snap.gauges.tpm)
        new = tpm_step(cur, snap, direction)
        if new == cur:
            self.tell(f"tpm is already {fmt_count(cur)}", "warn")
            return
        if self.send(SetTpm(new)):
            self._pending.remember("tpm", new)
            self.tell(f"tpm {'off' if cur <= 0 else fmt_count(cur)} → {fmt_count(new)}")

    def action_unlimited(self: _Console) -> None:
        """Toggle an unlimited rate, remembering the rate it replaced."""
        snap = self._need_live("rate")
        if snap is None:
            return
        cur = self._pending.base("rate", snap.gauges.rate)
        if cur > 0:
            self._prev_rate = cur
            self._pending.remember("rate", 0.0)
            self.send(SetRate(0.0))
            self.tell(f"rate {fmt_rate(cur)} → unlimited (0 restores it)")
            return
        prev = self._prev_rate
        if prev <= 0:
            achieved = snap.gauges.achieved_rate or snap.req_per_s_10s
            if achieved <= 0:
                self.tell("no previous rate to restore, and nothing sent yet to start from", "warn")
                return
            prev = max(0.1, round_sig(achieved))
        self._pending.remember("rate", prev)
        self.send(SetRate(prev))
        self.tell(f"rate unlimited → {fmt_rate(prev)}")
