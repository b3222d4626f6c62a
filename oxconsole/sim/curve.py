"""The simulator's load curve: how much slower a model answers as its batch grows.

Why this module exists: a GPU server with continuous batching decodes every request in its batch
at once, so each request's tokens come slower as the batch grows, and prefill is shared too, so
the first token comes later. Without a curve the simulator is flat until `capacity` and then
queues, which gives sweeps and adaptive concurrency no knee to find. With ``knee = K`` (> 0) and
``knee_power = p`` a request admitted into a batch of ``b`` requests (itself included; `Batch`: the
requests still decoding, whose last token is not yet due) is served
``slowdown(b) = 1 + (b / K) ** p`` times slower than the profile says: both its TTFT and every
token gap are multiplied by it, fixed when its answer is planned. So with ``jitter = 0``

    ttft(b) = ttft * slowdown(b)      gap(b) = slowdown(b) / tokens_per_s
    latency(b) = slowdown(b) * (ttft + (n - 1) / tokens_per_s)

The *capacity C* of such a model is ``K``: the batch at which TTFT and the token gap are twice the
unloaded ones (``slowdown(K) = 2``), so an SLO of twice the unloaded ITL is met up to ``b = K`` and
missed above it. With ``p = 2`` requests/s (``b / latency(b)``) also peak at ``b = K``.
"""

from __future__ import annotations

import heapq


def slowdown(batch: int, knee: float, power: float) -> float:
    """How many times slower a request admitted into a batch of `batch` is served; exactly 1.0 when
    `knee` is 0 (no curve, today's flat behaviour)."""
    if knee <= 0.0:
        return 1.0
    return 1.0 + float((batch / knee) ** power)


def throughput_peak(knee: float, power: float) -> float:
    """The batch at which requests/s (``b / slowdown(b)``) peak: ``K / (p - 1) ** (1 / p)`` for
    p > 1 (K itself for p = 2); for p <= 1 throughput only grows, so there is no peak (inf)."""
    if power <= 1.0:
        return float("inf")
    return float(knee / (power - 1.0) ** (1.0 / power))


class Batch:
    """The requests a model is decoding: admitted, their last token not yet due.

    A request leaves the batch when its last token is due, before its final bytes are written, as
    a server with continuous batching frees the slot when generation ends. So a closed-loop client
    at concurrency N, which sends its next request only once the last one has ended, always finds
    at most N - 1 others in the batch (counting `in_service` instead, which drops only after the
    response is written, sometimes gave N + 1). A heap of due times; O(log n) per request.
    """

    __slots__ = ("_ends",)

    def __init__(self) -> None:
        self._ends: list[float] = []

    def join(self, now: float) -> int:
        """The batch a request admitted at loop time `now` joins, itself included."""
        ends = self._ends
        while ends and ends[0] <= now:
            heapq.heappop(ends)
        return len(ends) + 1

    def until(self, end: float) -> None:
        """The request just joined decodes until loop time `end` (its last token)."""
        heapq.heappush(self._ends, end)
