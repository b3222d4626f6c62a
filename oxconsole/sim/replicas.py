"""The simulator's cold starts: replicas that start while requests queue, each ready later.

Why this module exists: a provider that scales out under a burst serves the burst's first seconds
from the replicas it had, and a new replica only after its cold start. The rule (docs/simulator.md,
"Cold starts") is exact, so a step's penalty and recovery can be computed by hand: capacity is
`capacity` per ready replica; whenever a request has to queue and no replica is starting, one
more starts (up to `max_replicas`) and is ready `cold_start` seconds later, when it takes queued
requests at once; if requests still queue then, the next one starts. Replicas never stop (a run
is minutes long; providers keep replicas warm for longer than that).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from oxconsole.workload import SimModelProfile

__all__ = ["Replicas", "scales"]


def scales(profile: SimModelProfile) -> bool:
    """True when the profile may start replicas (`max_replicas` above `replicas`)."""
    return profile.max_replicas > profile.replicas


class Replicas:
    """How many replicas of one model are ready, and the one starting (at most one at a time)."""

    __slots__ = ("_on_ready", "cold_start", "limit", "ready", "starting")

    def __init__(
        self, profile: SimModelProfile, on_ready: Callable[[asyncio.AbstractEventLoop], None]
    ) -> None:
        self.ready = profile.replicas
        self.limit = max(profile.max_replicas, profile.replicas)
        self.cold_start = profile.cold_start
        self.starting = False
        self._on_ready = on_ready
        """Called on the loop when a replica becomes ready (after `ready` grew)."""

    def queued(self, loop: asyncio.AbstractEventLoop) -> None:
        """A request is waiting: start a replica unless one is starting or none may."""
        if self.starting or self.ready >= self.limit:
            return
        self.starting = True
        loop.call_later(self.cold_start, self._started, loop)

    def _started(self, loop: asyncio.AbstractEventLoop) -> None:
        self.starting = False
        self.ready += 1
        self._on_ready(loop)
