"""Live-adjustable limits: concurrency slots, a request-rate bucket and a FIFO token budget.

Why this module exists: a person turns these knobs while the run goes on. `asyncio.Semaphore`
cannot be resized, and aiolimiter's `AsyncLimiter` fixes its drip rate at construction
(aiolimiter issue #98) and serves small `acquire(n)` before large ones, so a token budget needs
its own first-in-first-out bucket. All three are plain event-loop objects with plain tests.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

from aiolimiter import AsyncLimiter


class ResizableSlots:
    """A counting limit whose size can change while holders keep their slots.

    Growing wakes waiters at once; shrinking never cancels work: holders above the new limit keep
    their slot until they release it, and nobody new gets one until `in_use < limit` again.
    Waiters are served first come, first served.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._limit = limit
        self._in_use = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._waiters if not f.done())

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._limit = limit
        self._wake()

    def try_acquire(self) -> bool:
        if self._in_use < self._limit and not self._waiters:
            self._in_use += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # We were granted the slot just as we were cancelled: give it back.
                self.release()
            raise

    def release(self) -> None:
        if self._in_use <= 0:
            raise RuntimeError("release() without acquire()")
        self._in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._in_use < self._limit:
            fut = self._waiters.popleft()
            if fut.done():
                continue
            self._in_use += 1
            fut.set_result(None)


class LiveRateLimiter(AsyncLimiter):
    """aiolimiter's leaky bucket, with a rate that can be changed while waiters wait.

    `rate` is requests per second and `burst` the bucket capacity in requests: the stock class
    takes (max_rate, time_period), so rate = burst / time_period. Changing the rate first drains
    the bucket at the old rate up to now, then re-arms the waker at the new rate.
    """

    def __init__(self, rate: float, burst: int = 1) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        super().__init__(max_rate=burst, time_period=burst / rate)

    @property
    def rate(self) -> float:
        return float(self._rate_per_sec)

    def set_rate(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0")
        self._leak()
        self.time_period = self.max_rate / rate
        self._rate_per_sec = rate
        self._wake_next()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, fut in self._waiters if not fut.done())


class TokenBudget:
    """A first-in-first-out token bucket for a tokens-per-minute budget.

    Unlike aiolimiter, a large request at the head of the queue is not overtaken by small ones,
    and a request larger than the whole bucket is admitted once the bucket is full (otherwise it
    could never run). `acquire(n)` returns when n tokens were taken.
    """

    def __init__(self, tokens_per_minute: float, clock: Callable[[], float] = time.monotonic):
        if tokens_per_minute <= 0:
            raise ValueError("tokens_per_minute must be > 0")
        self._clock = clock
        self._per_s = tokens_per_minute / 60.0
        self._capacity = float(tokens_per_minute)
        self._level = self._capacity
        self._t = clock()
        self._lock = asyncio.Lock()  # FIFO: asyncio.Lock wakes waiters in order

    @property
    def waiting(self) -> int:
        waiters = getattr(self._lock, "_waiters", None)
        return len(waiters) if waiters else 0

    def set_tpm(self, tokens_per_minute: float) -> None:
        self._refill()
        self._per_s = tokens_per_minute / 60.0
        self._capacity = float(tokens_per_minute)
        self._level = min(self._level, self._capacity)

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self._capacity, self._level + (now - self._t) * self._per_s)
        self._t = now

    async def acquire(self, n: float) -> None:
        async with self._lock:
            need = min(n, self._capacity)
            while True:
                self._refill()
                if self._level >= need:
                    self._level -= n  # may go negative for oversized requests: it is paid back
                    return
                await asyncio.sleep((need - self._level) / self._per_s)
