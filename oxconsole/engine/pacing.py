"""Requests held for their endpoint's rate limits (`[endpoints.X] pace_by_headers`).

Why this module exists: when an endpoint's remaining requests or tokens would run out before its
reset, the contract has "dispatch to that endpoint" wait, not the whole run. So the dispatcher
hands such a request, its slot and its token-budget hold to that endpoint's queue and goes on with
the next prompt: a request for another endpoint is not held behind the wait. Each endpoint's queue
is first in, first out and drained by one task, which asks `Headroom.admit` for its head until
there is room, as the dispatcher used to ask inline, and then starts it. So one endpoint's
figures are still asked one request at a time, and `waits` / `wait_s` count what they counted:
each request that had to wait, and how long its endpoint's dispatch was held. A request that
finds its endpoint's queue non-empty goes behind it without asking, so none overtakes.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from oxconsole.engine.headroom import Headroom
from oxconsole.engine.limits import Hold
from oxconsole.workload import Prompt

__all__ = ["HEADROOM_POLL_S", "HeldForHeadroom"]

HEADROOM_POLL_S = 0.25
"""Longest sleep between looks while waiting for an endpoint's reset: a wait with no reset known
(every answer still pending) looks again this often."""

Held = tuple[Prompt, str, float, "Hold | None", int]
"""A held request: its prompt, model, due time (loop time), budget hold and token estimate."""


class HeldForHeadroom:
    """One queue per paced endpoint; `offer` each paced request, `drain` at the end of dispatch."""

    def __init__(
        self,
        start: Callable[[Prompt, str, float, Hold | None], None],
        release: Callable[[], None],
        stopped: Callable[[], bool],
        burst: int,
    ) -> None:
        self._start = start
        self._burst = burst
        """Requests a queue starts back to back before it yields to the loop."""
        self._release = release
        """Gives a held request's concurrency slot back (the run stopped before it was started)."""
        self._stopped = stopped
        self._queues: dict[Headroom, deque[Held]] = {}
        self.given_back = 0
        """Held requests never started: the run stopped while they waited."""
        self._tasks: set[asyncio.Task[None]] = set()

    def offer(self, room: Headroom, held: Held) -> bool:
        """True when the request may go now (then `room` counts it pending); False when it was
        queued behind its endpoint's reset, to be started by the queue's task."""
        queue = self._queues.get(room)
        if queue is not None:
            queue.append(held)
            room.waiting = len(queue)
            return False
        wait = room.admit(held[4], time.monotonic())
        if wait <= 0:
            return True
        queue = self._queues[room] = deque([held])
        room.waiting = 1
        task = asyncio.get_running_loop().create_task(self._drain_one(room, queue, wait))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return False

    @property
    def held(self) -> int:
        """Requests waiting in some endpoint's queue."""
        return sum(len(q) for q in self._queues.values())

    async def drain(self) -> None:
        """Until every held request has been started, or given back at a stop."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()

    async def _drain_one(self, room: Headroom, queue: deque[Held], wait: float) -> None:
        """Start `queue`'s requests in order, each once `room` admits it (its head waits `wait`)."""
        clock = time.monotonic  # the clock `Headroom` stamps answers with
        started = 0
        try:
            while queue and not self._stopped():
                prompt, model, t_sched, hold, n = queue[0]
                if wait > 0:
                    room.waits += 1
                    t0 = clock()
                    try:
                        while wait > 0 and not self._stopped():
                            await asyncio.sleep(min(wait, HEADROOM_POLL_S))
                            wait = room.admit(n, clock())
                    finally:
                        room.wait_s += clock() - t0
                    if wait > 0:
                        break  # stopped while waiting
                queue.popleft()
                room.waiting = len(queue)
                self._start(prompt, model, t_sched, hold)
                started += 1
                if started % self._burst == 0:
                    await asyncio.sleep(0)  # a reset that admits hundreds: let the loop run
                if queue:
                    wait = room.admit(queue[0][4], clock())
        finally:
            for _ in queue:  # the run stopped (or dispatch was cancelled) before they started
                self._release()
                self.given_back += 1
            queue.clear()
            room.waiting = 0
            del self._queues[room]
