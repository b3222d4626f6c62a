"""Live-adjustable limits: concurrency slots, a request-rate bucket and a FIFO token budget.

Why this module exists: a person turns these knobs while the run goes on. `asyncio.Semaphore`
cannot be resized, and aiolimiter's `AsyncLimiter` fixes its drip rate at construction
(aiolimiter issue #98) and serves small `acquire(n)` before large ones; a token budget is also a
promise about every 60-second window of sends (a bucket that starts full lets two minutes' worth
through in the first one), so it is a sliding window of its own (`TokenWindow`, `TokenBudget`).
All are plain event-loop objects with plain tests.
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import Callable
from dataclasses import dataclass

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
        if not (0 < rate < math.inf):
            raise ValueError("rate must be a finite number > 0")
        super().__init__(max_rate=burst, time_period=burst / rate)

    @property
    def rate(self) -> float:
        return float(self._rate_per_sec)

    def set_rate(self, rate: float) -> None:
        if not (0 < rate < math.inf):  # checked before anything changes (nan fails it too)
            raise ValueError("rate must be a finite number > 0")
        self._leak()
        self.time_period = self.max_rate / rate
        self._rate_per_sec = rate
        self._wake_next()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, fut in self._waiters if not fut.done())


SEND_MARGIN_S = 0.1
"""How much longer than its window a send stays counted. The budget stamps a send on the loop's
monotonic clock just before the client stamps `t_sent` on the wall clock; the margin covers that
gap and the wall clock's slew against the monotonic one (NTP slews at most 0.5 ms/s: 30 ms a
minute), so no 60 s window of journal `t_sent`s holds more than the budget. It costs 0.17% of it."""


@dataclass(slots=True, eq=False)
class Hold:
    """One request's tokens in a `TokenWindow`: its reservation from the time it was admitted, its
    actual usage once settled; it leaves the window `window + margin` seconds after it was sent."""

    t: float
    """When it was sent: the time it was admitted, moved to its first send (`sent`)."""
    tokens: float
    counted: bool = True
    """False once it has left the window (settling it then changes nothing)."""

    def sent(self, now: float) -> None:
        """The request left now: it is counted from now (only ever later; see `TokenWindow`)."""
        if self.counted and now > self.t:
            self.t = now


class TokenWindow:
    """The tokens sent in the last `window` seconds, and when `n` more may be sent: the arithmetic
    of `TokenBudget`, on times passed in (no loop, no clock).

    A send of n tokens is admitted at `now` when the tokens held by sends of the last
    `window + margin` seconds (bounds included), plus n, stay within `limit`. Since every send was
    admitted that way, no window of that length holds more than `limit` tokens, as long as no
    request uses more than it reserved (a settled amount above the reservation is counted from then
    on, but cannot undo a send). A send larger than `limit` itself is admitted alone, into an empty
    window; nothing else is admitted until it leaves. `limit` 0 admits everything (still counted).

    Holds leave in the order they were taken; `Hold.sent` may move one a little later than the one
    behind it, which then leaves with it: later than it could, never earlier.
    """

    def __init__(self, limit: float, window: float = 60.0, margin: float = SEND_MARGIN_S) -> None:
        if limit < 0 or window <= 0 or margin < 0:
            raise ValueError("limit must be >= 0, window > 0, margin >= 0")
        self.limit = limit
        """Tokens per window; 0 = no limit."""
        self.span = window + margin
        self._holds: collections.deque[Hold] = collections.deque()
        self._used = 0.0

    def used(self, now: float) -> float:
        """Tokens held by the sends still in the window at `now`."""
        self._expire(now)
        return self._used

    def fits(self, n: float, now: float) -> bool:
        self._expire(now)
        if self.limit <= 0:
            return True
        if n > self.limit:
            return self._used <= 0
        return self._used + n <= self.limit

    def take(self, n: float, now: float) -> Hold:
        """Hold n tokens from now (the caller checked `fits`)."""
        hold = Hold(now, float(n))
        self._holds.append(hold)
        self._used += hold.tokens
        return hold

    def settle(self, hold: Hold, tokens: float) -> None:
        """The request used `tokens` in the end: its hold counts that instead of its reservation."""
        if hold.counted:
            self._used += tokens - hold.tokens
            hold.tokens = float(tokens)

    def free_at(self, n: float, now: float) -> float:
        """The earliest time `n` tokens fit if nothing is settled meanwhile (`now` when they fit)."""
        if self.fits(n, now):
            return now
        rest, last = self._used, -math.inf
        for hold in self._holds:
            rest -= hold.tokens
            last = max(last, hold.t)
            if (rest <= 0) if n > self.limit else (rest + n <= self.limit):
                break
        return math.nextafter(last + self.span, math.inf)

    def _expire(self, now: float) -> None:
        holds = self._holds
        while holds and now > holds[0].t + self.span:
            hold = holds.popleft()
            hold.counted = False
            self._used -= hold.tokens
        if not holds:
            self._used = 0.0  # no rounding left over from the sums


class TokenBudget:
    """A tokens-per-minute budget: no minute of sends holds more than `tpm` tokens (`TokenWindow`).

    `acquire(n)` returns, first come first served, once n more tokens fit in the window: a large
    request at the head of the queue is not overtaken by small ones (aiolimiter serves small
    `acquire(n)` first). It returns the request's `Hold`: `settle(hold, used)` replaces the
    reservation with the actual usage when the request ends (so a budget reserved for `max_tokens`
    is not lost when answers are shorter), and `Hold.sent(t)` moves it to the time it left. A
    request larger than the whole budget is sent alone, once the window is empty, and counted in
    `oversized`. `set_tpm` takes effect at once; 0 lets everything through (sends are still
    counted, so turning it on again knows the last minute).

    `clock` is the event loop's clock (its timers wake waiters); tests pass a shorter `window`.
    """

    def __init__(
        self,
        tokens_per_minute: float,
        *,
        clock: Callable[[], float],
        window: float = 60.0,
        margin: float = SEND_MARGIN_S,
    ) -> None:
        self._win = TokenWindow(tokens_per_minute, window, margin)
        self._clock = clock
        self._waiters: collections.deque[tuple[float, asyncio.Future[Hold]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self.oversized = 0
        """Requests admitted alone because they need more tokens than the whole budget."""

    @property
    def tpm(self) -> float:
        return self._win.limit

    @property
    def used(self) -> float:
        """Tokens in the window now (finished requests at their usage, others at their reservation)."""
        return self._win.used(self._clock())

    @property
    def waiting(self) -> int:
        return sum(1 for _, fut in self._waiters if not fut.done())

    def set_tpm(self, tokens_per_minute: float) -> None:
        if tokens_per_minute < 0:
            raise ValueError("tokens_per_minute must be >= 0")
        self._win.limit = tokens_per_minute
        self._serve()

    def settle(self, hold: Hold, tokens: float) -> None:
        self._win.settle(hold, tokens)
        if self._waiters:
            self._serve()

    async def acquire(self, n: float) -> Hold:
        if not self._waiters:
            now = self._clock()
            if self._win.fits(n, now):
                return self._take(n, now)
        fut: asyncio.Future[Hold] = asyncio.get_running_loop().create_future()
        self._waiters.append((n, fut))
        self._serve()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                # Granted just as it was cancelled: nothing was sent, give the tokens back.
                self._win.settle(fut.result(), 0.0)
            self._serve()
            raise

    def _take(self, n: float, now: float) -> Hold:
        if n > self._win.limit > 0:
            self.oversized += 1
        return self._win.take(n, now)

    def _serve(self) -> None:
        """Admit waiters from the head while they fit; else wake up when the head will."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiters = self._waiters
        while waiters:
            n, fut = waiters[0]
            if fut.done():  # cancelled while waiting
                waiters.popleft()
                continue
            now = self._clock()
            if not self._win.fits(n, now):
                delay = self._win.free_at(n, now) - now
                self._timer = asyncio.get_running_loop().call_later(delay, self._serve)
                return
            waiters.popleft()
            fut.set_result(self._take(n, now))
