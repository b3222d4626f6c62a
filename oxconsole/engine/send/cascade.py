"""The cascade: each answer judged under `[quality]`, a failed one sent on to the next model.

Why this module exists: a successful answer is no longer final when it is wrong. `Sender.send`
gets an answer as before (retries and fallbacks: an error is not an invalid answer), then hands it
here once (`Cascade.settle`): it is checked (`engine/send/checks.py`), judged by a judge model when
`[quality] judge` is given, and, when it fails and the cascade has a step after its model
(`Router.next_step`), the same prompt goes to that model, until an answer passes or the last
step's answer stands. Every answer asked for is billed into the record (`Judged.mark`: the
journal's `cost` is the sum over every model asked and every judge request), so the journal
sums to the bill.

Off the hot path: nothing here runs without `[quality]`; with it, one check per answer and one
small list per request that escalated or was judged.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.checks import Checker, fill_judge, prompt_text
from oxconsole.engine.send.request import Sender, Story, finished_record
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Pack, Prompt, Workload
from oxconsole.workload.schema import QualityConfig

if TYPE_CHECKING:
    from oxconsole.engine.send.packing import Packer

__all__ = ["STOPPED", "Cascade", "Judged", "cascade_for", "unfinished"]

STOPPED = "the run stopped before the cascade's next model answered"


def unfinished(res: AttemptResult) -> AttemptResult:
    """A request the cascade could not finish (the run stopped): "cancelled", as one cancelled at
    stop, with the timing of its last answer."""
    return AttemptResult(
        ok=False, error="cancelled", detail=STOPPED, t_sent=res.t_sent, latency_ms=res.latency_ms
    )


@dataclass(slots=True)
class Judged:
    """One request's verdicts so far, and what the answers it left behind cost."""

    valid: bool | None = None
    """The standing answer's verdict (None: the request ended without one, in error)."""
    reason: str | None = None
    """Why it is not valid (`workload.quality.REASONS`)."""
    escalations: int = 0
    """Times the cascade moved it on."""
    spent: float = 0.0
    """The cost of every answer but the standing one, judge requests included."""
    answers: list[dict[str, Any]] = field(default_factory=list)
    """Each answer asked for but the standing one, and each judge request: model, tokens, cost,
    and for an answer its verdict."""

    t_first: float | None = None
    """When the first answer was sent (the loop's clock), for the record's `cascade_ms`."""

    def mark(self, rec: RequestRecord) -> None:
        """The record carries the verdict, the whole bill and, when more than one request was
        made for it, the time all of them took."""
        rec.cost += self.spent
        if self.answers and self.t_first is not None:
            rec.cascade_ms = max(0.0, (asyncio.get_running_loop().time() - self.t_first) * 1000.0)
        rec.escalations = self.escalations
        if rec.status == "ok":
            rec.valid = self.valid
            rec.invalid_reason = None if self.valid else self.reason
        if self.answers:
            rec.answers = self.answers


def timings(rec: RequestRecord) -> dict[str, float]:
    """An answer's latency and TTFT, for its entry in `answers`: the model that gave it shows
    them in its row, though its answer did not stand."""
    return {k: v for k, v in (("latency_ms", rec.latency_ms), ("ttft_ms", rec.ttft_ms)) if v is not None}


def judged_of(story: Story) -> Judged:
    """The story's verdicts, begun when it has none yet."""
    j = story.judged
    if not isinstance(j, Judged):
        j = story.judged = Judged()
    return j


def cascade_for(w: Workload, sender: Sender) -> Cascade | None:
    """The run's judge and cascade; None without `[quality]` (nothing changes at all)."""
    return None if w.quality is None else Cascade(w, w.quality, sender)


class Cascade:
    """Judges the answers of one engine's requests and sends the failed ones on."""

    def __init__(self, w: Workload, q: QualityConfig, sender: Sender) -> None:
        self.checker = Checker(q)
        self.sender = sender
        self.judge_model = w.model(q.judge.model) if q.judge is not None else None

    def judges(self, prompt: Prompt) -> bool:
        """Whether this request's answer is judged here (a pack's is judged task by task)."""
        return not isinstance(prompt, Pack)

    async def settle(self, story: Story, res: AttemptResult) -> AttemptResult:
        """The answer that stands: `res` when it passes or the cascade has no step after its model,
        else the next step's (judged in turn), or that step's error."""
        sender = self.sender
        judged = judged_of(story)
        if judged.t_first is None:  # a packed task's began with its pack
            judged.t_first = story.t_first_send
        while True:
            reason = await self.verdict(story, res.text)
            judged.valid, judged.reason = reason is None, reason
            if reason is None:
                return res
            nxt = sender.router.next_step(story.model, story.tried)
            if nxt is None:
                return res
            self.bill(story, res, {"valid": False, "invalid_reason": reason})
            if sender.stopping():  # no final answer: not done, so `--resume` sends it again
                judged.valid = judged.reason = None
                return unfinished(res)
            judged.escalations += 1
            sender.move(story, nxt)
            res = await sender.answer(story)
            if not res.ok:
                judged.valid = judged.reason = None
                return res

    async def verdict(self, story: Story, text: str | None) -> str | None:
        """Why this answer is not valid, or None; the judge asked last, when every other check passed."""
        reason = self.checker.check(story.prompt, text)
        if reason is not None or self.judge_model is None:
            return reason
        return None if await self.judge(story, text or "") else "judge"

    async def tasks(
        self, packer: Packer, story: Story, recs: list[RequestRecord], sections: list[str]
    ) -> list[RequestRecord]:
        """A pack's task records, each judged on its own section; a task that failed goes on down
        the cascade alone (in the pack's slot, one after another, through the buckets), billed
        its share of the pack besides."""
        pack = story.prompt
        assert isinstance(pack, Pack)
        out = []
        for rec, task, text in zip(recs, pack.tasks, sections, strict=True):
            out.append(await self._task(packer, story, rec, task, text))
        return out

    async def _task(
        self, packer: Packer, story: Story, rec: RequestRecord, task: Prompt, text: str
    ) -> RequestRecord:
        judged = Judged(t_first=story.t_first_send)
        ts = Story(task, story.model, rec.t_scheduled, story.t_sched, judged=judged)
        reason = await self.verdict(ts, text)
        judged.valid, judged.reason = reason is None, reason
        sender = self.sender
        nxt = None if reason is None else sender.router.next_step(story.model, (story.model,))
        if nxt is None:
            judged.mark(rec)
            return rec
        if sender.stopping():  # no final answer: not done, so `--resume` sends it again
            rec.status, rec.error, rec.error_detail = "error", "cancelled", STOPPED
            return rec
        judged.spent += rec.cost
        judged.answers.append(
            {
                "model": rec.model,
                "valid": False,
                "invalid_reason": reason,
                "input_tokens": rec.input_tokens,
                "output_tokens": rec.output_tokens,
                "cost": rec.cost,
                **timings(rec),
            }
        )
        judged.escalations = 1
        loop = asyncio.get_running_loop()
        ts.t_sched_wall, ts.t_sched = time.time(), loop.time()  # its queue time: the buckets' wait
        ts.hold = await packer.dispatch.wait_buckets(task)
        ts.model, ts.tried, ts.tried_attempts, ts.attempts = nxt, [story.model], [rec.attempts], rec.attempts
        alone = await packer.send_alone(ts)
        alone.pack, alone.pack_size = rec.pack, rec.pack_size
        return alone

    async def judge(self, story: Story, answer: str) -> bool:
        """The judge model's verdict on an answer (a judge request that fails is a "judge" failure:
        nothing says the answer is right); its cost goes on the request's bill."""
        m = self.judge_model
        q = self.checker.judge
        assert m is not None and q is not None
        text = fill_judge(q.prompt, prompt_text(story.prompt), answer)
        ask = Prompt(
            id=f"{story.prompt.id}#judge",
            messages=[{"role": "user", "content": text}],
            input_chars=len(text),
            keep_text=True,
        )
        js = Story(ask, m.name, story.t_sched_wall, story.t_sched)
        sender = self.sender
        sender.router.in_flight[m.name] += 1
        try:
            res = await sender.answer(js)
        finally:
            sender.router.in_flight[js.model] -= 1
        self.bill(js, res, {"judge": True}, into=story)
        return res.ok and self.checker.judged(res.text)

    def bill(self, story: Story, res: AttemptResult, what: dict[str, Any], into: Story | None = None) -> None:
        """An answer that will not stand (or a judge's), billed into the request's record."""
        rec = finished_record(story, res, self.sender.models[story.model], False)
        target = into or story
        judged = judged_of(target)
        judged.spent += rec.cost
        judged.answers.append(
            {
                "model": rec.model,
                **what,
                "input_tokens": rec.input_tokens,
                "output_tokens": rec.output_tokens,
                "cost": rec.cost,
                **timings(rec),
            }
        )
