"""An endpoint's server as the console sees it now: the latest figures, and whether its queue held.

Why this module exists: the live view needs more than the last reading. The `bound` line names the
server (`metrics/bound.py`) when its queue held "for most of the last 10 s", which is a share of
the rounds in that window, not one sample; a round that failed must not blank the figures shown
(they stay, marked with their age and why the last round failed); and the snapshot that carries
them crosses the control socket as JSON, so the gauge is a plain mapping (`Gauges.server`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from oxconsole.metrics.server.scrapes import Reading

__all__ = ["QUEUE_WINDOW_S", "STALE_S", "LiveServer", "fresh", "queue_place"]

QUEUE_WINDOW_S: Final = 10.0
"""The span over which "the engine queues" is judged (the contract's "most of the last 10 s")."""
STALE_S: Final = 10.0
"""Figures older than this (the server stopped answering) no longer name the server as the bound."""
RING_MAX: Final = 256
"""Rounds kept for the window: 40 at the shortest interval (0.25 s); a bound, not a tuning."""


class LiveServer:
    """One endpoint's rounds, as they come (`add`, times on the monotonic clock); `gauge` is what
    the snapshot carries."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self.latest: Reading | None = None
        """The last round some URL answered."""
        self.latest_t = 0.0
        self.latest_client: int | None = None
        """The client's requests in flight to this endpoint when the last round was read."""
        self.failed: tuple[tuple[str, str], ...] = ()
        """The URLs whose last round failed, and why."""
        self.scrapes = 0
        self.failed_scrapes = 0
        self._queued: deque[tuple[float, bool]] = deque(maxlen=RING_MAX)

    def add(self, t: float, reading: Reading, client_in_flight: int | None = None) -> None:
        self.scrapes += 1
        self.failed = reading.failed
        if not reading.answered:
            self.failed_scrapes += 1
            return
        self.latest, self.latest_t, self.latest_client = reading, t, client_in_flight
        waiting = reading.total.waiting
        if waiting is not None:
            self._queued.append((t, waiting > 0))

    def queued_share(self, now: float) -> float | None:
        """The share of the last `QUEUE_WINDOW_S`'s rounds in which the engine had requests
        waiting; None without a round in the window."""
        q = self._queued
        while q and q[0][0] < now - QUEUE_WINDOW_S:
            q.popleft()
        if not q:
            return None
        return sum(1 for _, on in q if on) / len(q)

    def gauge(self, now: float) -> dict[str, Any]:
        """The snapshot's figures for this endpoint: the engine, the latest figures (absent while
        none was read), `age_s` since they were read, `queued_share`, the failed URLs and why,
        the figures the engine lacks, and the rounds counted."""
        d: dict[str, Any] = {"url": self.urls[0] if len(self.urls) == 1 else list(self.urls)}
        r = self.latest
        if r is not None:
            d["engine"] = r.engine
            d.update(r.total.as_dict())
            d["age_s"] = round(max(0.0, now - self.latest_t), 3)
            d["missing"] = list(r.missing)
            if self.latest_client is not None:
                d["client_in_flight"] = self.latest_client
        share = self.queued_share(now)
        if share is not None:
            d["queued_share"] = round(share, 3)
        if self.failed:
            d["failed"] = [[url, why] for url, why in self.failed]
        d["scrapes"] = self.scrapes
        d["failed_scrapes"] = self.failed_scrapes
        return d


def fresh(g: Mapping[str, Any]) -> bool:
    """The gauge's figures were read within `STALE_S` (a server that stopped answering is not
    judged on what it said long ago)."""
    age = g.get("age_s")
    return isinstance(age, int | float) and age <= STALE_S


def queue_place(g: Mapping[str, Any], waiting_slot: int) -> tuple[str, int]:
    """Where requests queue now, from an endpoint's live figures (`client_in_flight`, as the
    round was read, beside the engine's running + waiting) and the client's own queue for a slot:
    ("engine", waiting in the engine), ("client", waiting for a slot), ("transit", out to the
    server and not counted by its
    engine: on the network, in a proxy or the server's front before its scheduler), ("others",
    the engine serves more than this run sends: other clients), or ("none", 0)."""
    running, waiting = g.get("running"), g.get("waiting")
    if isinstance(waiting, int | float) and waiting > 0:
        return "engine", int(waiting)
    if waiting_slot > 0:
        return "client", waiting_slot
    ours = g.get("client_in_flight")
    if isinstance(ours, int) and isinstance(running, int | float):
        theirs = int(running) + int(waiting or 0)
        if ours > theirs:
            return "transit", ours - theirs
        if theirs > ours:
            return "others", theirs - ours
    return "none", 0
