"""The run: prompts -> arrival -> router -> limits -> client -> retry -> journal + metrics.

Why this module exists: this is the one place that owns the event loop of a run. It never imports
the UI: a console (or a test) reads `Engine.latest` snapshots and calls `Engine.submit(command)`,
which is safe from any thread and applied here, on the engine's own loop, with its time logged.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from oxconsole.engine.arrival import ArrivalSchedule
from oxconsole.engine.client import AttemptResult, EndpointClient
from oxconsole.engine.commands import (
    Command,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetWeight,
    Stop,
)
from oxconsole.engine.limits import LiveRateLimiter, ResizableSlots, TokenBudget
from oxconsole.engine.router import NoModelAvailable, Router
from oxconsole.gcpace import PacedGC
from oxconsole.journal.journal import Journal
from oxconsole.journal.manifest import open_journal
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.workload import ModelConfig, Prompt, Workload, iter_prompts, resolve_api_key

STREAM_ERRORS = frozenset({"stream_aborted", "bad_response", "stream_error"})
COOL_AFTER = 5
"""Failed attempts in a row, in the order they were SENT, after which a model is cooled down.
Send order, not completion order: at high concurrency fast failures (500s, 429s, resets) come back
before the slower successes sent with them, and a healthy model would look dead."""
COOL_FIRST_S, COOL_MAX_S = 5.0, 60.0
DISPATCH_BURST = 64
"""Requests started back to back before the dispatcher yields to the loop. Without it, 10,000
free slots were filled in one go and the loop stalled for seconds (every timing taken meanwhile
was late by as much)."""


_OK, _FAIL, _NEUTRAL = 1, 2, 3


def counts_against_model(res: AttemptResult) -> bool:
    """Failures that say the model's server is unwell (not that our request was wrong)."""
    if res.status is not None:
        return res.status >= 500 or res.status in (408, 429)
    return res.error is not None and res.error != "cancelled"


@dataclass
class RunOutcome:
    summary: dict[str, Any]
    ok: int
    error: int
    interrupted: bool
    skipped: int = 0
    """Ids already `ok` in the journal (on --resume) that were not sent again."""
    warnings: list[str] = field(default_factory=list)

    crashed: bool = False
    """A worker process died: its requests in flight are not in the journal (--resume sends them)."""

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.error or self.crashed else 0


class RunEngine(Protocol):
    """What the CLI, the control socket and the console need of a run: `Engine` or `WorkerPool`."""

    w: Workload
    state: str
    latest: Snapshot | None
    warnings: list[str]
    publish_interval: float
    total_expected: int | None

    def apply(self, cmd: Command) -> None: ...
    def submit(self, cmd: Command) -> None: ...
    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None: ...
    async def run(self) -> RunOutcome: ...


_ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "stream_options")
_REJECTED = (
    "unsupported",
    "not supported",
    "unrecognized",
    "unknown",
    "not allowed",
    "extra inputs",
    "not permitted",
)


def rejected_field(res: AttemptResult, body: dict[str, Any]) -> str | None:
    """The field of `body` an HTTP 400 rejects, among those the engine may send differently.

    OpenAI names it in `error.param` ("Unsupported parameter: 'max_tokens' is not supported with
    this model. Use 'max_completion_tokens' instead."); other servers only in the message
    ("Unrecognized request argument supplied: stream_options", pydantic's "Extra inputs are not
    permitted"), so a message saying a field of the body is not supported counts too.
    """
    if res.param in _ADAPTABLE and res.param in body:
        return res.param
    text = (res.detail or "").lower()
    if not any(w in text for w in _REJECTED):
        return None
    for key in _ADAPTABLE:
        if key in body and re.search(rf"(?<![a-z_]){key}(?![a-z_])", text):
            return key
    return None


@dataclass(slots=True)
class _SendAs:
    """How one model's requests are sent (changed when its server rejects a field)."""

    max_key: str
    temperature: bool = True
    stream_options: bool = True
    max_switched: bool = False


def quiet_gc() -> PacedGC:
    """Pace the garbage collector for a run (`PacedGC`); a module-level hook benchmarks replace."""
    return PacedGC()


def new_collector(w: Workload, started_at: float) -> Collector:
    """The metrics collector for a run, with each model's prices for cost projections."""
    return Collector(
        [m.name for m in w.models],
        started_at=started_at,
        prices={m.name: (m.price_per_request, m.price_per_1m_input, m.price_per_1m_output) for m in w.models},
    )


def backoff_delay(
    attempt: int, base: float, cap: float, rng: random.Random, retry_after: float | None
) -> float:
    """Exponential backoff with full jitter, capped; a server's Retry-After is a floor."""
    delay = rng.uniform(0.0, min(cap, base * (2 ** (attempt - 1))))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def retryable(res: AttemptResult, on: frozenset[int | str]) -> bool:
    """Whether `[retry] on` covers this failure. 4xx other than 408 and 429 are never retried
    (the request itself is wrong); 408 is the server's timeout and follows "timeout"."""
    if res.status is not None:
        if res.status == 408:
            return 408 in on or "timeout" in on
        if 400 <= res.status < 500 and res.status != 429:
            return False
        return res.status in on
    if res.error in ("timeout", "connection"):
        return res.error in on
    if res.error in STREAM_ERRORS:
        return "stream" in on
    return False


class Engine:
    """Runs one workload. Create it, then `await run()` on the loop that should own the run."""

    def __init__(
        self,
        workload: Workload,
        *,
        results_path: Path,
        skip_ids: AbstractSet[str] | None = None,
        total_expected: int | None = None,
        endpoint_urls: dict[str, str] | None = None,
        publish_interval: float = 0.25,
        on_tick: Callable[[Snapshot], None] | None = None,
        tick_interval: float = 2.0,
        shard: tuple[int, int] | None = None,
        record_sink: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.w = workload
        self.shard = shard
        """(index, count): this engine sends every count-th prompt from index (one of several workers)."""
        self.record_sink = record_sink
        """Where finished records go instead of the journal and collector (a worker's parent)."""
        self.results_path = results_path
        self.skip_ids: AbstractSet[str] = skip_ids or set()
        self.total_expected = total_expected
        self.endpoint_urls = dict(endpoint_urls or {})
        self.publish_interval = publish_interval
        self.on_tick = on_tick
        self.tick_interval = tick_interval
        run = workload.run
        self.models: dict[str, ModelConfig] = {m.name: m for m in workload.models}
        self._send_as = {m.name: _SendAs(m.max_tokens_param) for m in workload.models}
        self._unstreamed: set[str] = set()
        self.router = Router(workload.models, workload.routing, seed=run.seed)
        self.slots = ResizableSlots(run.concurrency)
        self.rate = float(run.rate)
        self.limiter: LiveRateLimiter | None = None
        self.schedule: ArrivalSchedule | None = None
        self.budget = TokenBudget(run.tpm) if run.tpm > 0 else None
        self._rng = random.Random(run.seed * 7919 + 17)
        self.started_at = time.time()
        self.collector = self._new_collector()
        self.latest: Snapshot | None = None
        self.state = "starting"
        self.dispatched = 0
        self.in_flight = 0
        self.waiting_slot = 0
        self.waiting_bucket = 0
        self.backing_off = 0
        self.loop_lag_ms = 0.0
        self.loop_lag = LogHistogram()
        self._gc: PacedGC | None = None
        """How late the engine's 100 ms ticker woke, each tick (ms): the client's own event-loop lag,
        which every timing it takes may include. In the summary as `loop_lag_ms`."""
        self.ok = 0
        self.errors = 0
        self.warnings: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: dict[str, EndpointClient] = {}
        self._journal: Journal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0  # loop time at start
        self._perf0 = 0.0
        self._running = asyncio.Event()
        self._stop_requested = False
        self._cancel_now = False
        self._interrupted = False
        self._wake = asyncio.Event()  # something the drain loop waits for changed
        self._model_event = asyncio.Event()
        self._dispatch_done = False
        self._dispatch_hist: deque[tuple[float, int]] = deque(maxlen=64)
        self._sim: Any = None
        self._streak: dict[str, int] = {m.name: 0 for m in workload.models}
        # Attempt outcomes per model by send sequence, consumed in send order (see COOL_AFTER).
        self._sent_seq: dict[str, int] = {m.name: 0 for m in workload.models}
        self._next_seq: dict[str, int] = {m.name: 0 for m in workload.models}
        self._outcomes: dict[str, dict[int, int]] = {m.name: {} for m in workload.models}
        self._cool_s: dict[str, float] = {m.name: COOL_FIRST_S for m in workload.models}
        self.cooldowns: list[dict[str, Any]] = []

    # --- control, from any thread -------------------------------------------------------------
    def submit(self, cmd: Command) -> None:
        """Queue a command for the engine loop. Safe from any thread, also before run() starts."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("engine is not running")
        loop.call_soon_threadsafe(self.apply, cmd)

    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None:
        """Stop dispatching; in-flight requests get `run.grace` seconds (or none with cancel)."""
        if interrupted:
            self._interrupted = True
        self._stop_requested = True
        if cancel:
            self._cancel_now = True
        self._running.set()  # a paused dispatcher must see the stop
        self._model_event.set()
        self._wake.set()
        if self._dispatcher is not None and not self._dispatcher.done():
            self._dispatcher.cancel()

    _dispatcher: asyncio.Task[None] | None = None

    def elapsed(self) -> float:
        return 0.0 if self._loop is None else self._loop.time() - self._t0

    def apply(self, cmd: Command) -> None:
        """Apply a command on the engine loop (call only from the loop; `submit` from elsewhere)."""
        t = round(self.elapsed(), 3)
        if isinstance(cmd, SetConcurrency):
            value = max(1, int(cmd.value))
            old = self.slots.limit
            if value != old:
                self.slots.set_limit(value)
                self.collector.change(t, "concurrency", old, value)
        elif isinstance(cmd, SetRate):
            rate = max(0.0, float(cmd.value))
            old_rate = self.rate
            if rate != old_rate:
                self._set_rate(rate)
                self.collector.change(t, "rate", old_rate, rate)
        elif isinstance(cmd, SetWeight):
            if cmd.model in self.router.weights and cmd.value >= 0:
                old_w: float = self.router.weights[cmd.model]
                if cmd.value != old_w:
                    self.router.set_weight(cmd.model, cmd.value)
                    self.collector.change(t, "weight", old_w, float(cmd.value), model=cmd.model)
                    self._model_event.set()
        elif isinstance(cmd, EnableModel):
            if cmd.model in self.router.enabled:
                old_e = self.router.enabled[cmd.model]
                if cmd.enabled != old_e:
                    self.router.set_enabled(cmd.model, cmd.enabled)
                    self.collector.change(t, "enabled", old_e, cmd.enabled, model=cmd.model)
                    self._model_event.set()
        elif isinstance(cmd, Pause):
            if self._running.is_set() and not self._stop_requested:
                self._running.clear()
                self.state = "paused"
                self.collector.change(t, "paused", False, True)
        elif isinstance(cmd, Resume):
            if not self._running.is_set():
                self._running.set()
                self.state = "running"
                self.collector.change(t, "paused", True, False)
        elif isinstance(cmd, Stop):
            self.request_stop(cancel=cmd.cancel)
        self._publish()

    def _set_rate(self, value: float) -> None:
        self.rate = value
        arrival = self.w.run.arrival
        assert self._loop is not None
        if value <= 0:
            self.limiter = None
            self.schedule = None
        elif arrival == "closed":
            if self.limiter is None:
                self.limiter = LiveRateLimiter(value, self.w.run.burst)
            else:
                self.limiter.set_rate(value)
        elif self.schedule is None:
            self.schedule = ArrivalSchedule(arrival, value, self._loop.time(), seed=self.w.run.seed)
        else:
            self.schedule.set_rate(value)

    # --- the run ------------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._t0 = loop.time()
        self._perf0 = time.perf_counter()
        self.started_at = time.time()
        self.collector = self._new_collector()
        run = self.w.run
        self._running.set()
        self._set_rate(self.rate)
        if self.record_sink is None:
            self._journal, notes = open_journal(self.w, self.results_path, self.skip_ids)
            self.warnings.extend(notes)
        ticker = None
        try:
            self._check_limits()
            await self._start_endpoints()
            # The run's clock starts when dispatch can start (after a simulator is up).
            self._t0 = loop.time()
            self.started_at = time.time()
            self.collector = self._new_collector()
            self._gc = quiet_gc()
            if self.schedule is not None:
                self.schedule.rebase(self._t0)
            self.state = "running"
            ticker = asyncio.create_task(self._ticker())
            if run.duration > 0:
                loop.call_later(run.duration, self._deadline)
            self._dispatcher = asyncio.create_task(self._dispatch())
            try:
                await self._dispatcher
            except asyncio.CancelledError:
                if not self._stop_requested:
                    raise
            self._dispatch_done = True
            self.state = "draining"
            await self._drain()
        finally:
            self.state = "done"
            if self._gc is not None:
                self._gc.restore()
            if ticker is not None:
                ticker.cancel()
            for t in list(self._tasks):
                t.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._close_endpoints()
            if self._journal is not None:
                self._journal.close()
        duration = loop.time() - self._t0
        self._publish()
        summary = self.collector.summary(self.w.name, duration)
        if self.skip_ids:
            summary["resumed_skipped"] = len(self.skip_ids)
        summary["cooldowns"] = self.cooldowns
        lag = self.loop_lag.summary()
        summary["loop_lag_ms"] = {"p50": lag["p50"], "p99": lag["p99"], "max": lag["max"]}
        if self._gc is not None:
            summary["gc"] = {"collections": self._gc.collections, "pause_ms": round(self._gc.pause_ms, 3)}
        return RunOutcome(
            summary=summary,
            ok=self.ok,
            error=self.errors,
            interrupted=self._interrupted,
            skipped=len(self.skip_ids),
            warnings=self.warnings,
        )

    def _new_collector(self) -> Collector:
        return new_collector(self.w, self.started_at)

    def _deadline(self) -> None:
        if not self._stop_requested:
            self.request_stop()

    def _check_limits(self) -> None:
        """Raise the open-files soft limit to fit the connections a run may open (10k in flight)."""
        try:
            import resource
        except ImportError:  # not on this platform
            return
        need = self.w.run.concurrency + 256  # sockets, the journal, the simulator's pipes, margin
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < need:
            target = need if hard == resource.RLIM_INFINITY else min(max(need, soft), hard)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (ValueError, OSError):
                target = soft
            if target < need:
                self.warnings.append(
                    f"run.concurrency = {self.w.run.concurrency} needs about {need} open files but the "
                    f"limit is {target} (hard limit {hard}); raise it (ulimit -n) or expect connection errors"
                )

    async def _start_endpoints(self) -> None:
        need_sim = [
            e for e in self.w.endpoints.values() if e.base_url == "sim" and e.name not in self.endpoint_urls
        ]
        if need_sim:
            from oxconsole.sim.process import SimProcess

            sim = SimProcess(profiles=self.w.sim, seed=self.w.run.seed)
            await asyncio.to_thread(sim.start)
            self._sim = sim
            for e in need_sim:
                self.endpoint_urls[e.name] = sim.url
        used = {m.endpoint for m in self.w.models}
        for name, ep in self.w.endpoints.items():
            if name not in used:
                continue
            url = self.endpoint_urls.get(name, ep.base_url)
            if ep.insecure:
                self.warnings.append(f"endpoints.{name}.insecure = true: TLS certificates are not verified")
            if ep.max_connections < self.w.run.concurrency:
                self.warnings.append(
                    f"endpoints.{name}.max_connections = {ep.max_connections} is below run.concurrency"
                    f" = {self.w.run.concurrency}: requests beyond it wait for a connection"
                )
            self._clients[name] = EndpointClient(
                name,
                url,
                resolve_api_key(self.w, name),
                max_connections=ep.max_connections,
                timeout=self.w.run.timeout,
                insecure=ep.insecure,
            )

    async def _close_endpoints(self) -> None:
        for c in self._clients.values():
            try:
                await c.close()
            except Exception:  # closing must not hide the run's result
                pass
        if self._sim is not None:
            await asyncio.to_thread(self._sim.stop)

    def _prompts(self) -> Iterator[Prompt]:
        skip = self.skip_ids
        index, count = self.shard or (0, 1)
        for i, p in enumerate(iter_prompts(self.w)):
            if count > 1 and i % count != index:
                continue
            if skip and p.id in skip:
                continue
            yield p

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        slots = self.slots
        burst = 0
        for prompt in self._prompts():
            if self._stop_requested:
                return
            if not self._running.is_set():
                await self._running.wait()
                if self.schedule is not None:
                    self.schedule.rebase(loop.time())
                if self._stop_requested:
                    return
            t_sched = loop.time()
            if self.schedule is not None:
                due = self.schedule.next_due()
                if due > t_sched:
                    await asyncio.sleep(due - t_sched)
                    if not self._running.is_set():  # paused while waiting: due time is void
                        await self._running.wait()
                        if self._stop_requested:
                            return
                        self.schedule.rebase(loop.time())
                        due = self.schedule.next_due()
                t_sched = due
            while not self.router.any_available():
                self._model_event.clear()
                self.state = "paused"
                await self._model_event.wait()
                if self._stop_requested:
                    return
                self.state = "running" if self._running.is_set() else "paused"
            while not slots.try_acquire():
                self.waiting_slot += 1
                try:
                    await slots.acquire()
                finally:
                    self.waiting_slot -= 1
                if self._running.is_set():
                    break
                # Paused while waiting for a slot: give it back and hold the request until resumed.
                slots.release()
                await self._running.wait()
                if self._stop_requested:
                    return
            try:
                if self.limiter is not None:
                    self.waiting_bucket += 1
                    try:
                        await self.limiter.acquire()
                    finally:
                        self.waiting_bucket -= 1
                if self.budget is not None:
                    self.waiting_bucket += 1
                    try:
                        await self.budget.acquire(self._token_estimate(prompt))
                    finally:
                        self.waiting_bucket -= 1
                try:
                    model = self.router.pick(prompt)
                except NoModelAvailable:
                    model = self.w.models[0].name
            except BaseException:
                slots.release()
                raise
            self.dispatched += 1
            self.in_flight += 1
            self.router.in_flight[model] += 1
            wall_sched = self.started_at + (t_sched - self._t0)
            task = loop.create_task(self._request(prompt, model, wall_sched, t_sched))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            burst += 1
            if burst >= DISPATCH_BURST:
                # Nothing above waited (free slots, no rate): let the requests just started, the
                # reads in progress and the timers run before starting more.
                burst = 0
                await asyncio.sleep(0)

    def _token_estimate(self, prompt: Prompt) -> int:
        out = prompt.max_tokens
        if out is None:
            out = self.models[self.router.names[0]].max_tokens or 256
        return math.ceil(prompt.input_chars / 4) + out

    def _body(self, prompt: Prompt, m: ModelConfig) -> dict[str, Any]:
        send = self._send_as[m.name]
        body: dict[str, Any] = {"model": m.name, "messages": prompt.messages}
        if self.w.run.stream:
            body["stream"] = True
            if send.stream_options:
                body["stream_options"] = {"include_usage": True}
        else:
            body["stream"] = False
        max_tokens = prompt.max_tokens if prompt.max_tokens is not None else m.max_tokens
        if max_tokens is not None:
            body[send.max_key] = max_tokens
        if m.temperature is not None and send.temperature:
            body["temperature"] = m.temperature
        return body

    def _adapt(self, model: str, res: AttemptResult, body: dict[str, Any]) -> bool:
        """After an HTTP 400 naming a key this engine chose to send: send it differently from now
        on (max_tokens <-> max_completion_tokens once, temperature or stream_options dropped), with
        a warning the first time. True when the request should go again with a new body."""
        key = rejected_field(res, body)
        if key is None:
            return False
        send = self._send_as[model]
        note = ""
        if key in ("max_tokens", "max_completion_tokens"):
            if send.max_key == key:
                if send.max_switched:
                    return False  # both rejected: a real error
                send.max_key = "max_completion_tokens" if key == "max_tokens" else "max_tokens"
                send.max_switched = True
                note = f"sending the cap as {send.max_key} instead"
        elif key == "temperature":
            if send.temperature:
                send.temperature = False
                note = "sending no temperature (the model's default) instead"
        elif send.stream_options:
            send.stream_options = False
            note = "sending no stream_options: token counts may be estimated"
        if note:
            self.warnings.append(
                f"model {model}: the server rejected {key} ({res.detail or 'HTTP 400'}); {note} "
                "for the rest of the run"
            )
        return True

    async def _request(self, prompt: Prompt, model: str, t_sched_wall: float, t_sched: float) -> None:
        loop = asyncio.get_running_loop()
        retry = self.w.retry
        run = self.w.run
        attempts = 0
        attempt_errors: dict[str, int] = {}
        backoff_total = 0.0
        tried: list[str] = []
        res: AttemptResult | None = None
        current = model
        t_first_send: float | None = None
        try:
            while True:
                tried.append(current)
                m = self.models[current]
                client = self._clients[m.endpoint]
                body = self._body(prompt, m)
                i = 0
                while i < retry.max_attempts:
                    i += 1
                    attempts += 1
                    if t_first_send is None:
                        t_first_send = loop.time()
                    seq = self._sent_seq[current]
                    self._sent_seq[current] = seq + 1
                    outcome = _NEUTRAL
                    adapted = False
                    try:
                        res = await client.attempt(
                            body, stream=run.stream, timeout=run.timeout, save_text=self.w.output.save_text
                        )
                        adapted = res.status == 400 and self._adapt(current, res, body)
                        if res.unstreamed and m.endpoint not in self._unstreamed:
                            self._unstreamed.add(m.endpoint)
                            self.warnings.append(
                                f"endpoint {m.endpoint}: a streamed request was answered with one JSON "
                                "body (the server does not stream): no TTFT or inter-token latency"
                            )
                        if res.ok:
                            outcome = _OK
                        elif not adapted and counts_against_model(res):
                            outcome = _FAIL
                        if res.status is None and not res.ok and self._gc is not None:
                            self._gc.failures += 1  # raised in the HTTP stack: may leave cycles
                    finally:
                        self._health(current, seq, outcome, res)
                    if res.ok:
                        break
                    assert res.error is not None
                    if adapted and not self._stop_requested:
                        # a field the server does not take: again at once, not counted as a retry
                        attempt_errors[res.error] = attempt_errors.get(res.error, 0) + 1
                        self.collector.record_attempt_error(current, res.error, res.detail or "")
                        body = self._body(prompt, m)
                        i -= 1
                        continue
                    if self._stop_requested or i == retry.max_attempts or not retryable(res, retry.on):
                        break
                    attempt_errors[res.error] = attempt_errors.get(res.error, 0) + 1
                    self.collector.record_attempt_error(current, res.error, res.detail or "")
                    delay = backoff_delay(i, retry.backoff, retry.backoff_max, self._rng, res.retry_after)
                    self.backing_off += 1
                    try:
                        await asyncio.sleep(delay)
                    finally:
                        self.backing_off -= 1
                    backoff_total += delay
                assert res is not None
                if res.ok or self._stop_requested:
                    break
                nxt = self.router.fallbacks(prompt, tried)
                if not nxt:
                    break
                assert res.error is not None
                attempt_errors[res.error] = attempt_errors.get(res.error, 0) + 1
                self.collector.record_attempt_error(current, res.error, res.detail or "")
                self.router.in_flight[current] -= 1
                current = nxt[0]
                self.router.in_flight[current] += 1
            assert res is not None
            rec = self._record(
                prompt,
                current,
                res,
                attempts,
                t_sched_wall,
                t_sched,
                t_first_send,
                backoff_total,
                attempt_errors,
            )
        except asyncio.CancelledError:
            rec = RequestRecord(
                id=prompt.id,
                model=current,
                endpoint=self.models[current].endpoint,
                status="error",
                attempts=max(attempts, 1),
                t_scheduled=t_sched_wall,
                t_sent=res.t_sent if res is not None else time.time(),
                queue_ms=((t_first_send or loop.time()) - t_sched) * 1000.0,
                latency_ms=None,
                error="cancelled",
                error_detail="cancelled at stop before it finished",
                tag=prompt.tag,
                attempt_errors=attempt_errors or None,
            )
        finally:
            self.slots.release()
            self.in_flight -= 1
            self.router.in_flight[current] -= 1
            if self.in_flight == 0 and self._dispatch_done:
                self._wake.set()
        self._finish(rec)

    def _health(self, model: str, seq: int, outcome: int, res: AttemptResult | None) -> None:
        """Track failures in a row per model, in send order; cool a failing model down for a while."""
        pending = self._outcomes[model]
        pending[seq] = outcome
        nxt = self._next_seq[model]
        while nxt in pending:
            o = pending.pop(nxt)
            nxt += 1
            if o == _OK:
                self._streak[model] = 0
                self._cool_s[model] = COOL_FIRST_S
            elif o == _FAIL:
                self._streak[model] += 1
        self._next_seq[model] = nxt
        if self._streak[model] >= COOL_AFTER and not self.router.cooled[model]:
            seconds = self._cool_s[model]
            self._cool_s[model] = min(COOL_MAX_S, seconds * 2)
            self._streak[model] = COOL_AFTER - 1  # one more failure after the cool-down re-cools it
            self.router.set_cooled(model, True)
            self.cooldowns.append(
                {
                    "t": round(self.elapsed(), 3),
                    "model": model,
                    "seconds": seconds,
                    "after": res and res.error,
                }
            )
            assert self._loop is not None
            self._loop.call_later(seconds, self._warm, model)

    def _warm(self, model: str) -> None:
        self.router.set_cooled(model, False)
        self._model_event.set()

    def _record(
        self,
        prompt: Prompt,
        model: str,
        res: AttemptResult,
        attempts: int,
        t_sched_wall: float,
        t_sched: float,
        t_first_send: float | None,
        backoff_total: float,
        attempt_errors: dict[str, int],
    ) -> RequestRecord:
        m = self.models[model]
        estimated = False
        if res.input_tokens is None:
            estimated = True
            input_tokens = math.ceil(prompt.input_chars / 4)
        else:
            input_tokens = res.input_tokens
        if res.output_tokens is None:
            estimated = True
            output_tokens = int(res.extra.get("estimated_output", res.content_chunks))
        else:
            output_tokens = res.output_tokens
        if not res.ok and res.output_tokens is None:
            output_tokens = res.content_chunks
        cost = 0.0
        if res.ok:
            cost = (
                m.price_per_request
                + input_tokens * m.price_per_1m_input / 1e6
                + output_tokens * m.price_per_1m_output / 1e6
            )
        return RequestRecord(
            id=prompt.id,
            model=model,
            endpoint=m.endpoint,
            status="ok" if res.ok else "error",
            attempts=attempts,
            t_scheduled=t_sched_wall,
            t_sent=res.t_sent,
            queue_ms=max(0.0, ((t_first_send if t_first_send is not None else t_sched) - t_sched) * 1000.0),
            latency_ms=res.latency_ms,
            ttft_ms=res.ttft_ms,
            itl_ms=res.itl_ms,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            tokens_source="estimate" if estimated else "usage",
            cost=cost,
            error=res.error,
            error_detail=res.detail,
            text=res.text if self.w.output.save_text else None,
            tag=prompt.tag,
            backoff_ms=backoff_total * 1000.0,
            attempt_errors=attempt_errors or None,
        )

    def _finish(self, rec: RequestRecord) -> None:
        if rec.status == "ok":
            self.ok += 1
        else:
            self.errors += 1
        if self.record_sink is not None:
            self.record_sink(rec)
            return
        assert self._journal is not None
        self._journal.write(rec)
        rec.text = None  # the collector does not need it; let it go
        self.collector.record(rec)

    async def _drain(self) -> None:
        """Wait for requests in flight: all of them, or `grace` seconds after a stop."""
        loop = asyncio.get_running_loop()
        grace_deadline: float | None = None
        while self.in_flight > 0:
            if self._cancel_now:
                break
            if self._stop_requested and grace_deadline is None:
                grace_deadline = loop.time() + self.w.run.grace
            timeout = None if grace_deadline is None else grace_deadline - loop.time()
            if timeout is not None and timeout <= 0:
                break
            self._wake.clear()
            if self.in_flight == 0:
                break
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                break
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- gauges, snapshots, housekeeping ------------------------------------------------------
    def gauges(self) -> Gauges:
        now = self.elapsed()
        hist = self._dispatch_hist
        achieved = 0.0
        if len(hist) >= 2:
            t_a, n_a = hist[0]
            t_b, n_b = hist[-1]
            if t_b > t_a:
                achieved = (n_b - n_a) / (t_b - t_a)
        return Gauges(
            state=self.state,
            elapsed_s=now,
            total_expected=self.total_expected,
            dispatched=self.dispatched,
            in_flight=self.in_flight,
            waiting_slot=self.waiting_slot,
            waiting_bucket=self.waiting_bucket,
            backing_off=self.backing_off,
            concurrency=self.slots.limit,
            rate=self.rate,
            achieved_rate=achieved,
            loop_lag_ms=self.loop_lag_ms,
            warnings=tuple(self.warnings),
            models={
                n: ModelGauge(
                    weight=self.router.weights[n],
                    enabled=self.router.enabled[n],
                    in_flight=self.router.in_flight[n],
                    cooled_down=self.router.cooled[n],
                )
                for n in self.router.names
            },
        )

    def _publish(self) -> None:
        self.latest = self.collector.snapshot(self.gauges())

    async def _ticker(self) -> None:
        loop = asyncio.get_running_loop()
        step = 0.1
        last_pub = last_sync = last_tick = loop.time()
        lag_ewma = 0.0
        perf = time.perf_counter
        while True:
            t_before = perf()
            await asyncio.sleep(step)
            now = loop.time()
            lag = max(0.0, (perf() - t_before - step) * 1000.0)  # perf: uvloop's clock is in ms
            self.loop_lag.record(lag)
            if self._gc is not None:
                self._gc.tick()
            lag_ewma = lag if lag > lag_ewma else 0.8 * lag_ewma + 0.2 * lag
            self.loop_lag_ms = lag_ewma
            self._dispatch_hist.append((now, self.dispatched))
            while self._dispatch_hist and now - self._dispatch_hist[0][0] > 5.0:
                self._dispatch_hist.popleft()
            if now - last_pub >= self.publish_interval:
                last_pub = now
                self._publish()
            if now - last_sync >= 1.0 and self._journal is not None:
                last_sync = now
                await self._journal.sync_async()
            if self.on_tick is not None and now - last_tick >= self.tick_interval:
                last_tick = now
                if self.latest is not None:
                    self.on_tick(self.latest)
