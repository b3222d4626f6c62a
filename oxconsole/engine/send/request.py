"""One request's story: send it, classify what came back, retry with backoff, fall back, record it.

Why this module exists: everything that happens to one request between its slot being taken and
its record being written is here, one step per method, read in order in `Sender.send`. The engine
decides when a request starts and what happens to its record; this module decides what it takes to
get an answer.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from oxconsole.base.gcpace import PacedGC
from oxconsole.engine.limits import Hold
from oxconsole.engine.router import Router
from oxconsole.engine.send.adapt import Bodies
from oxconsole.engine.send.apis import streams
from oxconsole.engine.send.attempt import Encoded
from oxconsole.engine.send.client import RETRY_AFTER_MAX, AttemptResult, EndpointClient
from oxconsole.engine.send.health import FAIL, NEUTRAL, OK, ModelHealth, counts_against_model
from oxconsole.engine.send.mediabodies import media_fields
from oxconsole.engine.send.thinking import record_fields
from oxconsole.engine.send.usage import doubt_warning
from oxconsole.journal.records import RequestRecord, billed_units
from oxconsole.workload import ModelConfig, Prompt, Workload
from oxconsole.workload.schema import MEDIA_APIS


class Verdicts(Protocol):
    """What `[quality]` made of a request's answers (`engine/send/cascade.py` `Judged`)."""

    def mark(self, rec: RequestRecord) -> None:
        """Put the verdict and the bill of every answer on the request's record."""


class Judge(Protocol):
    """The answers' judge and the cascade (`engine/send/cascade.py` `Cascade`), set by the shard."""

    def judges(self, prompt: Prompt) -> bool:
        """Whether this request's answer is judged when it comes (a pack's: task by task)."""

    async def settle(self, story: Story, res: AttemptResult) -> AttemptResult:
        """The answer that stands once judged (the cascade's next steps asked as needed)."""

    async def tasks(
        self, packer: Any, story: Story, recs: list[RequestRecord], sections: list[str]
    ) -> list[RequestRecord]:
        """A pack's task records, each judged on its own section (and sent on alone if it failed)."""

    def close(self) -> None:
        """The run is over: what runs the checks ends."""


STREAM_ERRORS = frozenset({"stream_aborted", "bad_response", "stream_error"})


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
    (the request itself is wrong); 408 is the server's timeout and follows "timeout". A server that
    asks for a longer wait than `RETRY_AFTER_MAX` is not retried."""
    if res.retry_after is not None and res.retry_after > RETRY_AFTER_MAX:
        return False
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


@dataclass(slots=True)
class Story:
    """One request so far: where it is, what it took, what went wrong on the way."""

    prompt: Prompt
    model: str
    """The model it is on now (a fallback moves it)."""
    t_sched_wall: float
    t_sched: float
    """When it was due, on the loop's clock (its queue time counts from here)."""
    attempts: int = 0
    attempt_errors: dict[str, int] = field(default_factory=dict)
    """Error class -> failed attempts that were retried, adapted or fell back."""
    backoff_s: float = 0.0
    tried: list[str] = field(default_factory=list)
    """The models tried so far, in order (the last is `model`)."""
    tried_attempts: list[int] = field(default_factory=list)
    """The attempts each model of `tried` took."""
    t_first_send: float | None = None
    res: AttemptResult | None = None
    """The last attempt's result."""
    hold: Hold | None = None
    """Its tokens in the run's token budget (when there is one): counted from its first send."""
    judged: Verdicts | None = None
    """With `[quality]`: the verdicts and the bill of every answer so far (`engine/send/cascade.py`)."""

    def fallback_trail(self) -> tuple[list[str] | None, list[int] | None]:
        """The record's `models_tried` and `model_attempts`: present only when a fallback was used."""
        if len(self.tried) < 2:
            return None, None
        return list(self.tried), list(self.tried_attempts)


class Sender:
    """Takes requests from their first attempt to their record, for one engine's run."""

    def __init__(
        self,
        w: Workload,
        router: Router,
        health: ModelHealth,
        bodies: Bodies,
        clients: dict[str, EndpointClient],
        warnings: list[str],
        *,
        stopping: Callable[[], bool],
        attempt_failed: Callable[[str, AttemptResult], None],
    ) -> None:
        self.w = w
        self.models = {m.name: m for m in w.models}
        self.router = router
        self.health = health
        self.bodies = bodies
        self.clients = clients
        """Endpoint name -> its client (filled when the run's endpoints start)."""
        self.warnings = warnings
        self.stopping = stopping
        """True once the run stops: no more retries or fallbacks."""
        self.attempt_failed = attempt_failed
        """Told of every failed attempt that goes again (retried, adapted, fallen back), at once."""
        self.rng = random.Random(w.run.seed * 7919 + 17)
        self.backing_off = 0
        """Requests sleeping between attempts now (a gauge)."""
        self.gc: PacedGC | None = None
        self.save_text = w.output.save_text
        """Keep answers' text (packing keeps it to split a pack's answer, whatever save_text says)."""
        self._unstreamed: set[str] = set()
        self._doubted: set[str] = set()
        """Endpoints whose usage was not believed once (said once each)."""
        self.cascade: Judge | None = None
        """With `[quality]`: each answer judged, a failed one sent on down the cascade (set by the
        shard: `engine/send/cascade.py`)."""
        self.judging = w.quality is not None
        """Read answers' text for the checks even when save_text is off (it leaves the record)."""

    async def send(self, story: Story) -> RequestRecord:
        """The request's record: its answer, or its last error once retries and fallbacks are spent
        (or the run stops); a "cancelled" record when the task is cancelled at stop. With
        `[quality]`, the answer that stands once the cascade judged it (`engine/send/cascade.py`)."""
        try:
            res = await self.answer(story)
            cascade = self.cascade
            if cascade is not None and res.ok and cascade.judges(story.prompt):
                res = await cascade.settle(story, res)
            keep = self.save_text or story.prompt.keep_text
            rec = finished_record(story, res, self.models[story.model], keep)
            if story.judged is not None:
                story.judged.mark(rec)
            return rec
        except asyncio.CancelledError:
            rec = cancelled_record(story, self.models[story.model].endpoint)
            if story.judged is not None:
                story.judged.mark(rec)
            return rec

    async def answer(self, story: Story) -> AttemptResult:
        """An answer from the story's model, or from its fallbacks when it fails (the last error
        once they are spent or the run stops)."""
        while True:
            res = await self._on_model(story)
            if res.ok or self.stopping():
                return res
            nxt = self.router.fallbacks(story.prompt, story.tried)
            if not nxt:
                return res
            self._fall_back(story, res, nxt[0])

    async def _on_model(self, story: Story) -> AttemptResult:
        """Attempts on the story's model until one answers, retries are spent or it cannot retry."""
        story.tried.append(story.model)
        story.tried_attempts.append(0)
        m = self.models[story.model]
        client = self.clients[m.endpoint]
        body = self.bodies.body(story.prompt, m)
        retry = self.w.retry
        i = 0
        while True:
            i += 1
            res, adapted = await self._attempt(story, m, client, body)
            if res.ok:
                return res
            if adapted and not self.stopping():
                # a field the server does not take: again at once, not counted as a retry
                self._failed(story, res)
                body = self.bodies.body(story.prompt, m)
                i -= 1
                continue
            if self.stopping() or i >= retry.max_attempts or not retryable(res, retry.on):
                return res
            self._failed(story, res)
            await self._back_off(
                story, backoff_delay(i, retry.backoff, retry.backoff_max, self.rng, res.retry_after)
            )

    async def _attempt(
        self, story: Story, m: ModelConfig, client: EndpointClient, body: dict[str, Any] | Encoded
    ) -> tuple[AttemptResult, bool]:
        """One attempt, classified: its result, and whether a rejected field was adapted (then the
        body must be built again). Its outcome goes to the model's health in every case. It starts
        once a place in the endpoint's connection pool is free: the wait for one is queue time
        (the first attempt's `queue_ms`), not the server's."""
        async with client.pool_room:
            return await self._sent(story, m, client, body)

    async def _sent(
        self, story: Story, m: ModelConfig, client: EndpointClient, body: dict[str, Any] | Encoded
    ) -> tuple[AttemptResult, bool]:
        """The attempt itself, its place in the pool taken: from here its request is sent."""
        story.attempts += 1
        story.tried_attempts[-1] += 1
        if story.t_first_send is None:
            story.t_first_send = asyncio.get_running_loop().time()
            if story.hold is not None:
                story.hold.sent(story.t_first_send)
        seq = self.health.sent(m.name)
        outcome = NEUTRAL
        try:
            run = self.w.run
            story.res = res = await client.attempt(
                body,
                stream=streams(m.api, run.stream),
                timeout=run.timeout,
                save_text=self.save_text or self.judging or story.prompt.keep_text,
                api=m.api,
            )
            adapted = res.status == 400 and isinstance(body, dict) and self.bodies.adapt(m.name, res, body)
            if res.unstreamed and m.endpoint not in self._unstreamed:
                self._unstreamed.add(m.endpoint)
                self.warnings.append(
                    f"endpoint {m.endpoint}: a streamed request was answered with one JSON "
                    "body (the server does not stream): no TTFT or inter-token latency"
                )
            if res.usage_doubt is not None and m.endpoint not in self._doubted:
                self._doubted.add(m.endpoint)
                self.warnings.append(doubt_warning(m.endpoint, res.usage_doubt))
            if res.ok:
                outcome = OK
            elif not adapted and counts_against_model(res):
                outcome = FAIL
            if res.status is None and not res.ok and self.gc is not None:
                self.gc.failures += 1  # raised in the HTTP stack: may leave cycles
        finally:
            last = story.res
            self.health.settle(m.name, seq, outcome, last.error if last is not None else None)
        return res, adapted

    def _failed(self, story: Story, res: AttemptResult) -> None:
        """A failed attempt the request goes on from: in its record, and counted live now."""
        assert res.error is not None
        story.attempt_errors[res.error] = story.attempt_errors.get(res.error, 0) + 1
        self.attempt_failed(story.model, res)

    async def _back_off(self, story: Story, delay: float) -> None:
        self.backing_off += 1
        try:
            await asyncio.sleep(delay)
        finally:
            self.backing_off -= 1
        story.backoff_s += delay

    def _fall_back(self, story: Story, res: AttemptResult, model: str) -> None:
        """Move the request to another model (its in-flight count goes with it)."""
        self._failed(story, res)
        self.move(story, model)

    def move(self, story: Story, model: str) -> None:
        """The request on another model from now on (its in-flight count goes with it)."""
        self.router.in_flight[story.model] -= 1
        story.model = model
        self.router.in_flight[model] += 1


def finished_record(story: Story, res: AttemptResult, m: ModelConfig, save_text: bool) -> RequestRecord:
    """The journal record of a request that ended with `res` on model `m`."""
    prompt = story.prompt
    estimated = False
    if res.input_tokens is None:
        estimated = True
        counted = prompt.input_tokens  # by [prompts] tokenizer
        input_tokens = math.ceil(prompt.input_chars / 4) if counted is None else counted
    else:
        input_tokens = res.input_tokens
    if res.output_tokens is None:
        estimated = True
        output_tokens = int(res.extra.get("estimated_output", res.content_chunks))
    else:
        output_tokens = res.output_tokens
    if not res.ok and res.output_tokens is None:
        output_tokens = res.content_chunks
    extras, reasoning_estimated = record_fields(res, input_tokens, output_tokens)
    cost = request_cost(m, input_tokens, extras.get("cached_tokens"), output_tokens) if res.ok else 0.0
    if prompt.media is not None or m.api in MEDIA_APIS:
        media = media_record(prompt, m.api, res)
        extras.update(media)
        if res.ok:
            cost += media_cost(m, media)
    t_sent_loop = story.t_first_send if story.t_first_send is not None else story.t_sched
    tried, tried_attempts = story.fallback_trail()
    return RequestRecord(
        id=prompt.id,
        model=m.name,
        endpoint=m.endpoint,
        status="ok" if res.ok else "error",
        attempts=story.attempts,
        t_scheduled=story.t_sched_wall,
        t_sent=res.t_sent,
        queue_ms=max(0.0, (t_sent_loop - story.t_sched) * 1000.0),
        latency_ms=res.latency_ms,
        ttft_ms=res.ttft_ms,
        itl_ms=res.itl_ms,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens_source="estimate" if estimated or reasoning_estimated else "usage",
        cost=cost,
        error=res.error,
        error_detail=res.detail,
        text=res.text if save_text else None,
        tag=prompt.tag,
        backoff_ms=story.backoff_s * 1000.0,
        attempt_errors=story.attempt_errors or None,
        models_tried=tried,
        model_attempts=tried_attempts,
        **extras,
    )


def request_cost(m: ModelConfig, input_tokens: int, cached: int | None, output_tokens: int) -> float:
    """What one ok request costs at its model's prices: cached input tokens at
    `price_per_1m_cached_input` (not given: the input price), reasoning inside output."""
    cost = m.price_per_request + output_tokens * m.price_per_1m_output / 1e6
    if cached and m.price_per_1m_cached_input is not None:
        return (
            cost
            + ((input_tokens - cached) * m.price_per_1m_input + cached * m.price_per_1m_cached_input) / 1e6
        )
    return cost + input_tokens * m.price_per_1m_input / 1e6


def media_record(prompt: Prompt, api: str, res: AttemptResult) -> dict[str, Any]:
    """A record's media keys: what was sent (`media_fields`), what came back (`audio_out_s`,
    `images_out`), and for an ok transcription or speech its `rtf`: latency over the seconds of
    its audio (the input audio's, the audio received)."""
    out = media_fields(prompt, api)
    if res.audio_out_s is not None:
        out["audio_out_s"] = res.audio_out_s
    if res.images_out is not None:
        out["images_out"] = res.images_out
    if res.ok and res.latency_ms is not None:
        seconds = out.get("audio_out_s") if api == "speech" else out.get("audio_in_s")
        if api in ("speech", "transcriptions") and seconds:
            out["rtf"] = res.latency_ms / 1000.0 / seconds
    return out


def media_cost(m: ModelConfig, media: dict[str, Any]) -> float:
    """What one ok request of the other kinds costs beyond its tokens: images generated at
    `price_per_image`, a transcription's input or speech's output audio at `price_per_audio_minute`,
    speech's input text at `price_per_1m_characters` (`billed_units`)."""
    g = media.get
    images, audio_s, chars = billed_units(
        g("api"), g("images_out"), g("audio_in_s"), g("audio_out_s"), g("characters")
    )
    return (
        images * m.price_per_image
        + audio_s / 60.0 * m.price_per_audio_minute
        + chars * m.price_per_1m_characters / 1e6
    )


def cancelled_record(story: Story, endpoint: str) -> RequestRecord:
    """The journal record of a request cancelled at stop before it finished."""
    res = story.res
    t_sent_loop = story.t_first_send or asyncio.get_running_loop().time()
    tried, tried_attempts = story.fallback_trail()
    return RequestRecord(
        id=story.prompt.id,
        model=story.model,
        endpoint=endpoint,
        status="error",
        attempts=max(story.attempts, 1),
        t_scheduled=story.t_sched_wall,
        # when it left (sent, the stop cut its answer) or now (the stop found it waiting)
        t_sent=res.t_sent if res is not None else story.t_sched_wall + (t_sent_loop - story.t_sched),
        queue_ms=(t_sent_loop - story.t_sched) * 1000.0,
        latency_ms=None,
        error="cancelled",
        error_detail="cancelled at stop before it finished",
        tag=story.prompt.tag,
        attempt_errors=story.attempt_errors or None,
        models_tried=tried,
        model_attempts=tried_attempts,
    )
