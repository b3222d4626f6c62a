"""When the next request may start: pause, arrival schedule, an available model, a slot, the rate.

Why this module exists: the dispatcher is the one loop that turns prompts into requests, and each
prompt waits here, in order, for what holds it back (a pause, its due time on an open-loop
schedule, a model that can take it, a free concurrency slot, the rate limiter and token budget).
The limits it waits on are changed live (`set_rate`, `set_tpm`, `slots.set_limit`, `pause`) by
the engine. A request admitted by the token budget carries its `Hold` to `settle`, where its
reservation becomes its actual usage. One wait is not in line: a request whose endpoint must wait
for its rate-limit reset (`pace_by_headers`) goes to that endpoint's queue (`pacing.py`), and the
next prompt is taken.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterator

from oxconsole.engine.arrival import ArrivalSchedule
from oxconsole.engine.headroom import Headroom
from oxconsole.engine.limits import Hold, LiveRateLimiter, ResizableSlots, TokenBudget
from oxconsole.engine.pacing import HeldForHeadroom
from oxconsole.engine.router import NoModelAvailable, Router
from oxconsole.engine.traceclock import TraceClock
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Prompt, Workload

DISPATCH_BURST = 64
"""Requests started back to back before the dispatcher yields to the loop. Without it, 10,000
free slots were filled in one go and the loop stalled for seconds (every timing taken meanwhile
was late by as much)."""

BURST_CHARS = 16_384
"""A prompt counts in the burst as one request more per this many characters, so the dispatcher
yields after about a megabyte of prompts as after 64 short ones: the first wave of 16 1 MB prompts
was built and encoded back to back before any of them reached its connection, and each one's clock
(which starts as it is sent) held the others' encoding (docs/performance.md, long prompts)."""

TPM_WINDOW_S = 60.0
"""The token budget's window: the contract's minute. Tests shorten it to run in seconds."""

OUTPUT_GUESS = 256
"""Output tokens reserved for a request with no max_tokens anywhere, until answers show more."""


_NO_OUTPUT = frozenset({"embeddings", "rerank", "speech", "images"})
"""APIs whose answers count no output tokens (a vector, a ranking, audio, images)."""


class Dispatcher:
    """Starts a request (`start(prompt, model, t_sched, hold)`) for each prompt as soon as it may go.

    The waits are in helpers called only when there is something to wait for, so a prompt that
    finds a free slot and no rate limit costs the loop no await at all (but one in DISPATCH_BURST).
    """

    def __init__(
        self,
        w: Workload,
        router: Router,
        *,
        start: Callable[[Prompt, str, float, Hold | None], None],
        set_state: Callable[[str], None],
        warn: Callable[[str], None] | None = None,
    ) -> None:
        run = w.run
        self.w = w
        self.router = router
        self.start = start
        """Starts the request for a prompt on a model, due at t_sched (loop time); holds a slot, and
        the request's tokens in the budget when there is one."""
        self.set_state = set_state
        """Tells the engine the run is "paused" (no model can take a request) or "running" again."""
        self.warn = warn
        """Tells the engine something the user should know (a request larger than the budget: once)."""
        self.slots = ResizableSlots(run.concurrency)
        self.limiter: LiveRateLimiter | None = None
        self.schedule: ArrivalSchedule | None = None
        self.budget: TokenBudget | None = None
        """The token budget, from the first time `set_tpm` turns it on (then kept: 0 = off)."""
        caps = [0 if m.api in _NO_OUTPUT else m.max_tokens for m in w.models]
        self._out_cap = max(c for c in caps if c is not None) if None not in caps else None
        """The most output any model may give (every model sets max_tokens); None otherwise."""
        self._out_seen = [0, 0]  # output tokens and answers seen, for requests with no max_tokens
        self.waiting_slot = 0
        self.waiting_bucket = 0
        self.waiting_tpm = 0
        self.stopped = False
        self.exhausted = False
        """Every prompt was started: the loop ran to the end of the prompts, not to a stop."""
        self._ran_out = False
        self.deadline = math.inf
        """Loop time at which `run.duration` runs out: no request due at or after it is started."""
        self._running = asyncio.Event()
        self._model_event = asyncio.Event()
        self.trace = TraceClock(run.trace_speed)
        """When a trace's rows are due (`Prompt.due`), from the run's start."""
        self.paced: dict[str, Headroom] = {}
        """Model -> its endpoint's rate-limit figures, for endpoints with `pace_by_headers`."""
        self.held = HeldForHeadroom(
            lambda *a: self.start(*a), self.slots.release, lambda: self.stopped, DISPATCH_BURST
        )
        """Requests waiting for their endpoint's reset, one queue each (`pacing.py`)."""

    # --- live changes, from the engine's loop ---------------------------------------------------
    def set_rate(self, value: float, now: float) -> None:
        """Requests per second from now (0 = unlimited): a token bucket for closed-loop arrival,
        a schedule of due times for open-loop arrivals."""
        arrival = self.w.run.arrival
        if value <= 0:
            self.limiter = None
            self.schedule = None
        elif arrival == "closed":
            if self.limiter is None:
                self.limiter = LiveRateLimiter(value, self.w.run.burst)
            else:
                self.limiter.set_rate(value)
        elif self.schedule is None:
            self.schedule = ArrivalSchedule(arrival, value, now, seed=self.w.run.seed)
        else:
            self.schedule.set_rate(value, now)

    def set_tpm(self, value: float) -> None:
        """Tokens per minute from now (0 = no budget). Turned on for the first time, the budget
        counts sends from then; once on, it keeps counting while off, for when it comes back."""
        if self.budget is not None:
            self.budget.set_tpm(value)
        elif value > 0:
            loop = asyncio.get_running_loop()
            self.budget = TokenBudget(value, clock=loop.time, window=TPM_WINDOW_S)

    def settle(self, hold: Hold, rec: RequestRecord) -> None:
        """A request admitted by the token budget ended: its hold counts what it used (a request
        cancelled at stop keeps its reservation: part of it may have been sent)."""
        if self.budget is None or rec.error == "cancelled":
            return
        self.budget.settle(hold, rec.input_tokens + rec.output_tokens)
        if rec.status == "ok":
            self._out_seen[0] += rec.output_tokens
            self._out_seen[1] += 1

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def models_changed(self) -> None:
        """A model was enabled, re-weighted or warmed up: a dispatcher waiting for one looks again."""
        self._model_event.set()

    def stop(self) -> None:
        """Start nothing more; a paused or waiting dispatcher sees it at once."""
        self.stopped = True
        self._running.set()
        self._model_event.set()

    # --- the loop -------------------------------------------------------------------------------
    async def run(self, prompts: Iterator[Prompt | Awaitable[None]]) -> None:
        """Start every prompt; an awaitable in their place is a source waiting for answers
        (`sessions.py`): awaited, then the next one is taken. Requests held for their endpoint's
        reset are started (or, at a stop, given back) before it returns."""
        try:
            await self._dispatch(prompts)
            await self.held.drain()
        finally:
            self.held.cancel()
        if self._ran_out and not self.held.given_back:
            self.exhausted = True

    async def _dispatch(self, prompts: Iterator[Prompt | Awaitable[None]]) -> None:
        loop = asyncio.get_running_loop()
        slots = self.slots
        burst = 0
        for prompt in prompts:
            if self.stopped:
                return
            if not isinstance(prompt, Prompt):
                await prompt
                continue
            if not self._running.is_set() and not await self._until_resumed():
                return
            t_sched = loop.time()
            if prompt.due is not None:
                t_sched = await self.trace.until_due(prompt.due, t_sched)
            elif self.schedule is not None:
                due = self.schedule.next_due()
                if due > t_sched:
                    due_now = await self._until_due(due - t_sched, due)
                    if due_now is None:
                        return
                    due = due_now
                t_sched = due
            if t_sched >= self.deadline and not await self._past_deadline():
                return
            if not self.router.any_available() and not await self._until_model():
                return
            if not slots.try_acquire() and not await self._until_slot():
                return
            hold = None
            try:
                if self.limiter is not None or self.budget is not None:
                    hold = await self._until_buckets(prompt)
                try:
                    model = self.router.pick(prompt)
                except NoModelAvailable:
                    model = self.w.models[0].name
            except BaseException:
                slots.release()
                raise
            room = self.paced.get(model) if self.paced else None
            if room is not None and not self.held.offer(
                room, (prompt, model, t_sched, hold, self.token_estimate(prompt))
            ):
                continue  # held for its endpoint's reset: its queue starts it
            self.start(prompt, model, t_sched, hold)
            burst += 1 + prompt.input_chars // BURST_CHARS
            if burst >= DISPATCH_BURST:
                # Nothing above waited (free slots, no rate): let the requests just started, the
                # reads in progress and the timers run before starting more.
                burst = 0
                await asyncio.sleep(0)
        self._ran_out = True

    async def _until_resumed(self) -> bool:
        """Paused: wait for resume; False when the run stops instead."""
        await self._running.wait()
        if self.schedule is not None:
            self.schedule.rebase(asyncio.get_running_loop().time())
        return not self.stopped

    async def _until_due(self, wait: float, due: float) -> float | None:
        """Sleep until a request is due: its due time, None when the run stops meanwhile."""
        await asyncio.sleep(wait)
        if not self._running.is_set():  # paused while waiting: due time is void
            await self._running.wait()
            if self.stopped:
                return None
            assert self.schedule is not None
            self.schedule.rebase(asyncio.get_running_loop().time())
            due = self.schedule.next_due()
        return due

    async def _past_deadline(self) -> bool:
        """The next request is due at or after the end of `run.duration`: a dispatcher running
        behind (a busy machine) would start it before the deadline's own callback ran. Let that
        callback stop the run instead; False once it has."""
        while not self.stopped:
            await asyncio.sleep(0.001)
        return False

    async def _until_model(self) -> bool:
        """No model can take a request (all disabled, weight 0 or cooled down): wait for one."""
        while not self.router.any_available():
            self._model_event.clear()
            self.set_state("paused")
            await self._model_event.wait()
            if self.stopped:
                return False
            self.set_state("running" if self._running.is_set() else "paused")
        return True

    async def _until_slot(self) -> bool:
        """No slot free: wait for one (and, if paused meanwhile, for resume); False on stop."""
        slots = self.slots
        while True:
            self.waiting_slot += 1
            try:
                await slots.acquire()
            finally:
                self.waiting_slot -= 1
            if self._running.is_set():
                return True
            # Paused while waiting for a slot: give it back and hold the request until resumed.
            slots.release()
            await self._running.wait()
            if self.stopped:
                return False
            if slots.try_acquire():
                return True

    async def _until_buckets(self, prompt: Prompt) -> Hold | None:
        """Wait for the rate limiter and the token budget (each only when the run has one); the
        request's hold in the budget."""
        if self.limiter is not None:
            self.waiting_bucket += 1
            try:
                await self.limiter.acquire()
            finally:
                self.waiting_bucket -= 1
        budget = self.budget
        if budget is None:
            return None
        n = self.token_estimate(prompt)
        if n > budget.tpm > 0 and self.warn is not None:
            warn, self.warn = self.warn, None  # once a run
            warn(
                f"a request needs about {n:,} tokens, more than the whole budget (tpm {budget.tpm:,.0f}): "
                "it is sent alone, with nothing else in its minute, and that minute exceeds tpm"
            )
        self.waiting_bucket += 1
        self.waiting_tpm += 1
        try:
            return await budget.acquire(n)
        finally:
            self.waiting_bucket -= 1
            self.waiting_tpm -= 1

    async def wait_buckets(self, prompt: Prompt) -> Hold | None:
        """The rate limiter and token budget for a request started outside this loop (a task of a
        pack whose answer did not split, sent again alone in its pack's slot): its hold, if any."""
        if self.limiter is None and self.budget is None:
            return None
        return await self._until_buckets(prompt)

    def token_estimate(self, prompt: Prompt) -> int:
        """The tokens a request reserves: its input (4 characters a token, as the simulator and the
        journal's estimates count) and the most it may get back: its max_tokens, else the largest
        model's; with no max_tokens anywhere, the mean answer so far (OUTPUT_GUESS before any),
        which an answer longer than the mean can exceed."""
        out = prompt.max_tokens if prompt.max_tokens is not None else self._out_cap
        if out is None:
            total, n = self._out_seen
            out = math.ceil(total / n) if n else OUTPUT_GUESS
        tokens = prompt.input_tokens  # counted by [prompts] tokenizer
        return (math.ceil(prompt.input_chars / 4) if tokens is None else tokens) + out
