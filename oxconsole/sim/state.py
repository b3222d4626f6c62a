"""What the simulator keeps per model: counters, the FIFO admission gate, the rate bucket, a seeded RNG.

Why this module exists: capacity, rate limits and every random draw (faults, jitter) are per model,
so a run is reproducible model by model and `GET /sim/stats` can report what each model saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections import deque
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final

import orjson

from oxconsole.sim.curve import Batch
from oxconsole.sim.encoded import HEAD, Kind
from oxconsole.sim.exposition import ModelFigures, Served
from oxconsole.sim.prefix import PrefixCache
from oxconsole.sim.replicas import Replicas, scales
from oxconsole.workload import SimModelProfile

if TYPE_CHECKING:
    from oxconsole.sim.quality import Truth

_TEMPLATE_CACHE_SIZE: Final = 256


@dataclass(slots=True)
class ModelStats:
    """Counters for one model, as served by ``GET /sim/stats``."""

    received: int = 0
    """Requests that named this model (including those refused)."""
    admitted: int = 0
    """Requests given a capacity slot."""
    in_service: int = 0
    """Requests holding a slot now."""
    queued: int = 0
    """Requests waiting for a slot now."""
    max_concurrent: int = 0
    """Highest `in_service` seen (never above the profile's capacity)."""
    completed: int = 0
    """Responses sent whole and well-formed."""
    http_429: int = 0
    """Rate-limited (rate_limit) plus throttled (throttle_rate) answers."""
    http_500: int = 0
    faults: int = 0
    """All injected faults: 429s, 500s, resets, aborts, malformed responses, stalls."""
    disconnected: int = 0
    """Responses cut short because the client went away."""
    reset: int = 0
    abort: int = 0
    malformed: int = 0
    stall: int = 0
    replicas: int = 1
    """Replicas ready now (`replicas`, then one more after each cold start)."""

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class ModelState:
    """Everything the simulator keeps for one model name."""

    __slots__ = (
        "_bucket_t",
        "_bucket_tokens",
        "_waiters",
        "arrival_faults",
        "batch",
        "cache",
        "capacity",
        "model_json",
        "name",
        "profile",
        "replicas",
        "rng",
        "seed",
        "served",
        "stats",
        "stream_faults",
        "templates",
        "truth",
        "zero_latency",
    )

    def __init__(self, name: str, profile: SimModelProfile, seed: int) -> None:
        self.name = name
        self.profile = profile
        self.capacity = max(1, int(profile.capacity)) * profile.replicas
        self.replicas = Replicas(profile, self._replica_ready) if scales(profile) else None
        """Replicas that start while requests queue (`max_replicas`), else None: a fixed gate."""
        self.arrival_faults = (
            profile.rate_limit > 0
            or profile.stall_rate > 0
            or profile.throttle_rate > 0
            or profile.error_rate > 0
            or profile.reset_rate > 0
        )
        self.stream_faults = profile.abort_rate > 0 or profile.malformed_rate > 0
        self.zero_latency = (
            profile.ttft <= 0 and profile.tokens_per_s <= 0 and profile.prefill_tokens_per_s <= 0
        )
        self.cache = PrefixCache(profile.cache_block) if profile.prefix_cache else None
        """The prompt prefixes served (`prefix_cache = true`), else None."""
        self.model_json = orjson.dumps(name)
        self.seed = seed
        # A string seed is hashed deterministically (sha512), unlike hash(str).
        self.rng = random.Random(f"{seed}:{name}")
        self.stats = ModelStats(replicas=profile.replicas)
        self.served = Served()
        """What `/metrics` counts (`exposition.py`)."""
        self.batch = Batch()
        """The requests decoding now, for the load curve (`knee`; unused without one)."""
        self._waiters: deque[asyncio.Future[float]] = deque()
        self._bucket_tokens = max(1.0, profile.rate_limit)
        self._bucket_t = -math.inf
        self.templates: dict[tuple[int, str, Kind], list[bytes]] = {}
        self.truth: Truth | None = None
        """With `quality` in the profile: what a right answer is (`sim/quality.py`), set by the app."""

    def figures(self) -> ModelFigures:
        """This model as `/metrics` shows it now: KV usage over `kv_tokens` per ready replica."""
        st = self.stats
        kv = self.served.held_tokens / (self.profile.kv_tokens * max(1, st.replicas))
        return ModelFigures(st.in_service, st.queued, min(1.0, max(0.0, kv)), self.served)

    # -- admission (FIFO; a released slot is handed straight to the next waiter) ------------------

    def try_acquire(self) -> bool:
        st = self.stats
        if st.in_service < self.capacity and not self._waiters:
            st.in_service += 1
            st.admitted += 1
            if st.in_service > st.max_concurrent:
                st.max_concurrent = st.in_service
            return True
        return False

    async def acquire(self, loop: asyncio.AbstractEventLoop) -> float:
        """Wait for a slot; returns the loop time at which the slot was granted."""
        if self.try_acquire():
            return loop.time()
        fut: asyncio.Future[float] = loop.create_future()
        self._waiters.append(fut)
        self.stats.queued += 1
        if self.replicas is not None:
            self.replicas.queued(loop)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(loop)  # granted just before the cancellation landed: pass it on
            else:
                self.stats.queued -= 1
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def release(self, loop: asyncio.AbstractEventLoop) -> None:
        st = self.stats
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                st.queued -= 1
                st.admitted += 1  # in_service unchanged: the slot moves to the waiter
                fut.set_result(loop.time())
                return
        st.in_service -= 1

    def _replica_ready(self, loop: asyncio.AbstractEventLoop) -> None:
        """One more replica: its slots go to the queued requests at once, in order; the next
        replica starts if requests still queue."""
        reps = self.replicas
        assert reps is not None
        self.capacity += max(1, int(self.profile.capacity))
        st = self.stats
        st.replicas = reps.ready
        waiters = self._waiters
        while waiters and st.in_service < self.capacity:
            fut = waiters.popleft()
            if fut.done():
                continue
            st.queued -= 1
            st.in_service += 1
            st.admitted += 1
            fut.set_result(loop.time())
        if st.in_service > st.max_concurrent:
            st.max_concurrent = st.in_service
        if waiters:
            reps.queued(loop)

    # -- rate limit (token bucket: rate_limit per second, capacity max(1, rate_limit)) -----------

    def take_rate_token(self, now: float) -> float:
        """0.0 when the request may pass, else the seconds until the bucket has a token again."""
        rate = self.profile.rate_limit
        cap = max(1.0, rate)
        tokens = min(cap, self._bucket_tokens + (now - self._bucket_t) * rate)
        self._bucket_t = now
        if tokens >= 1.0:
            self._bucket_tokens = tokens - 1.0
            return 0.0
        self._bucket_tokens = tokens
        return (1.0 - tokens) / rate

    def chance(self, rate: float) -> bool:
        """True for a fraction `rate` of calls; draws from the RNG only when 0 < rate < 1."""
        if rate <= 0.0:
            return False
        if rate >= 1.0:
            return True
        return self.rng.random() < rate

    def factor(self) -> float:
        j = min(max(self.profile.jitter, 0.0), 1.0)
        if j == 0.0:
            return 1.0
        return self.rng.uniform(1.0 - j, 1.0 + j)

    def template(self, n: int, finish: str, kind: Kind) -> list[bytes]:
        """Segments of the streamed body (role if the kind has one, n tokens, finish) to be joined
        with the id slot (which carries the kind's object name)."""
        key = (n, finish, kind)
        segs = self.templates.get(key)
        if segs is None:
            if len(self.templates) >= _TEMPLATE_CACHE_SIZE:
                self.templates.clear()
            mid = b',"model":' + self.model_json + b',"choices":['
            tokens = kind.token_choice
            k = len(tokens)
            choices = [kind.role_choice] if kind.role_choice else []
            choices += (tokens[i % k] for i in range(n))
            choices.append(kind.finish_choice[finish])
            segs = [HEAD]
            for c in choices[:-1]:
                segs.append(mid + c + HEAD)
            segs.append(mid + choices[-1])
            self.templates[key] = segs
        return segs
