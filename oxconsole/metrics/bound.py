"""What bounds a run's throughput right now, from a snapshot: the console's "bound by" row and
the headless progress line's `bound:` part.

Why this module exists: a load generator must say when it is itself the limit (event-loop lag, a
rate it cannot reach with free slots) and which of its own limits holds requests back (pause,
token budget, a provider's rate limit it paces by, concurrency, rate): otherwise its figures are
read as the server's. When the client is not the limit, the server's own figures (its `/metrics`,
`Gauges.server`) can say that the server is: requests queued inside the engine for most of the
last 10 s (`server queue`), or its KV cache nearly full (`server KV`). The console and the
headless line must say the same thing, and the headless runner cannot import the console.
"""

from __future__ import annotations

from typing import Literal

from oxconsole.metrics.server.live import fresh
from oxconsole.metrics.snapshot import Snapshot

__all__ = [
    "LOOP_LAG_WARN_MS",
    "SERVER_KV_FULL",
    "SERVER_QUEUED_SHARE",
    "TPM_FULL",
    "Bound",
    "bound_by",
    "server_bound",
    "tpm_bound",
]

LOOP_LAG_WARN_MS = 50.0
"""Event-loop lag above this means the client itself is late sending and reading."""

SERVER_KV_FULL = 0.9
"""KV usage at or above this is the server's limit (the contract's `server KV`): new requests then
wait for room, or push others out, whatever the client does."""
SERVER_QUEUED_SHARE = 0.5
"""More than this share of the last 10 s's scrape rounds with requests waiting in the engine is
"most of the last 10 s" (the contract's `server queue`); one round's queue is a moment's."""

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
    "server KV",
    "server queue",
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
    server = server_bound(s)
    if server:
        return server
    if g.waiting_slot > 0 or g.in_flight >= g.concurrency:
        return "concurrency"
    if g.waiting_bucket > g.waiting_tpm or (g.rate > 0 and g.achieved_rate >= 0.9 * g.rate):
        return "rate"
    if g.backing_off > 0 and g.backing_off >= 0.2 * max(1, g.in_flight):
        return "pushback"
    return ""


def server_bound(s: Snapshot) -> Bound:
    """`server KV` when an endpoint's engine has its KV cache at `SERVER_KV_FULL` or more, `server
    queue` when it had requests waiting in most of the last 10 s; "" otherwise, and for figures
    older than `live.STALE_S` (a server that stopped answering)."""
    server = s.gauges.server or {}
    live = [e for e in server.values() if fresh(e)]
    if any(isinstance(kv := e.get("kv_usage"), int | float) and kv >= SERVER_KV_FULL for e in live):
        return "server KV"
    if any(isinstance(q := e.get("queued_share"), int | float) and q > SERVER_QUEUED_SHARE for e in live):
        return "server queue"
    return ""
