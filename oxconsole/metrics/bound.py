"""What bounds a run's throughput right now, from a snapshot: the console's "bound by" row and
the headless progress line's `bound:` part.

Why this module exists: a load generator must say when it is itself the limit (event-loop lag, a
rate it cannot reach with free slots) and which of its own limits holds requests back (pause,
token budget, a provider's rate limit it paces by, concurrency, rate): otherwise its figures are
read as the server's. The console and the headless line must say the same thing, and the headless
runner cannot import the console.
"""

from __future__ import annotations

from typing import Literal

from oxconsole.metrics.snapshot import Snapshot

__all__ = ["LOOP_LAG_WARN_MS", "TPM_FULL", "Bound", "bound_by", "tpm_bound"]

LOOP_LAG_WARN_MS = 50.0
"""Event-loop lag above this means the client itself is late sending and reading."""

TPM_FULL = 0.95
"""The share of the token budget used in its window above which the budget is what binds, even at
an instant when no request is waiting for it (one is admitted each time tokens leave the window)."""

Bound = Literal[
    "paused",
    "done",
    "starting",
    "loop lag",
    "tpm",
    "ratelimit",
    "slow rate",
    "draining",
    "concurrency",
    "rate",
    "pushback",
    "",
]
"""`""`: nothing on the client's side holds requests back."""


def tpm_bound(s: Snapshot) -> bool:
    """The token budget holds requests back: one waits for it, or it is (nearly) all used while
    nobody waits for a slot."""
    g = s.gauges
    if g.tpm <= 0:
        return False
    return g.waiting_tpm > 0 or (g.tpm_used >= TPM_FULL * g.tpm and g.waiting_slot == 0)


def bound_by(s: Snapshot) -> Bound:
    """What limits throughput now. "loop lag" and "slow rate" (a rate the client does not reach
    with free slots) mean the client itself is the bottleneck."""
    g = s.gauges
    if g.state in ("paused", "done", "starting"):
        return g.state  # type: ignore[return-value]  # the three states named as they are
    if g.loop_lag_ms >= LOOP_LAG_WARN_MS:
        return "loop lag"
    if g.state == "running" and tpm_bound(s):
        return "tpm"
    if g.ratelimit and any(e.get("waiting") for e in g.ratelimit.values()):
        return "ratelimit"  # pace_by_headers: a request waits for the provider's reset
    free = g.in_flight < 0.9 * g.concurrency and g.waiting_slot == 0
    slow = g.rate > 0 and g.achieved_rate < 0.8 * g.rate and s.elapsed_s >= 5
    if g.state == "running" and slow and free and g.waiting_bucket == 0:
        return "slow rate"
    if g.state == "draining":
        return "draining"
    if g.waiting_slot > 0 or g.in_flight >= g.concurrency:
        return "concurrency"
    if g.waiting_bucket > g.waiting_tpm or (g.rate > 0 and g.achieved_rate >= 0.9 * g.rate):
        return "rate"
    if g.backing_off > 0 and g.backing_off >= 0.2 * max(1, g.in_flight):
        return "pushback"
    return ""
