"""The cascade: each answer judged under `[quality]`, a failed one sent on to the next model.

Why this module exists: a successful answer is no longer final when it is wrong. `Sender.send`
gets an answer as before (retries and fallbacks: an error is not an invalid answer), then hands it
here once (`Cascade.settle`): it is checked (`engine/send/checks.py`), judged by a judge model when
`[quality] judge` is given, and, when it fails and the cascade has a step after its model
(`Router.next_step`), the same prompt goes to that model, until an answer passes or the last
step's answer stands. Every answer asked for is billed into the record (`Judged.mark`: the
journal's `cost` is the sum over every model asked and every judge request), so the journal
sums to the bill.

The checks run on one thread off the loop that times requests, each stopped at
`CHECK_DEADLINE_S` (`engine/send/checkthread.py`): a check stopped there, or one that raised,
counts as invalid for the check it was in, and says so on the record (`check_timeout`,
`check_error`), so a hostile schema costs answers their validity, never the run its records. A
judge request that fails is an error of the judge, not a verdict: the answer stands unjudged
(`valid` left out, `judge_error` on the record) and the cascade does not move on, since a judge
outage must not send every request on to a dearer model.

Off the hot path: nothing here runs without `[quality]`; with it, one check per answer (through
the check thread: about 130 us more than inline on a loaded machine, most of it waiting) and one
small list per request that escalated or was judged.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.checks import Checker, Stage, prompt_text
from oxconsole.engine.send.checkthread import TIMED_OUT, CheckThread
from oxconsole.engine.send.judgeprompt import judge_messages
from oxconsole.engine.send.request import Sender, Story, finished_record
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Pack, Prompt, Workload
from oxconsole.workload.schema import QualityConfig

if TYPE_CHECKING:
    from oxconsole.engine.send.packing import Packer

__all__ = ["CHECK_DEADLINE_S", "STOPPED", "Cascade", "Judged", "cascade_for", "unfinished"]

STOPPED = "the run stopped before the cascade's next model answered"

CHECK_DEADLINE_S = 1.0
"""How long one answer's checks may run before they are stopped. A check takes 3 to 30 us (RE2 and
a small schema); the longest answer a model gives today (128k tokens, about 512 KB: 1,500 objects
each with two patterns and a format) checks in 27 to 40 ms, and a schema of 5,000 properties all
given in 2 to 10 ms, on a loaded 2-core machine (`bench/bench_checks.py` G): 1 s is 25 times the
longest, so a loaded machine does not turn a right answer into a stopped one. A runaway check (a
`oneOf` whose branches both recurse: 12 to 14 s at 18 levels, doubling with each) holds the check
thread at most this long; the loop meanwhile runs in the GIL's 5 ms slices (its ticks lag 15 ms at
the median on a loaded machine, 0.1 ms idle)."""

JUDGE_ERROR = "judge error"
"""`verdict`'s answer when the judge request failed: no verdict (not a reason of `REASONS`)."""


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
    check_timeout: bool = False
    """The standing answer's checks were stopped at their deadline (it counts as invalid)."""
    check_error: str | None = None
    """The exception a check of the standing answer raised (it counts as invalid)."""
    judge_error: str | None = None
    """The judge request for the standing answer failed (its error class): the answer is unjudged."""

    def faults(self) -> dict[str, Any]:
        """The standing answer's check faults, for its entry in `answers` once it does not stand
        (and forgotten here: the next answer has its own)."""
        out: dict[str, Any] = {}
        if self.check_timeout:
            out["check_timeout"] = True
        if self.check_error is not None:
            out["check_error"] = self.check_error
        self.check_timeout, self.check_error = False, None
        return out

    def mark(self, rec: RequestRecord) -> None:
        """The record carries the verdict, the whole bill and, when more than one request was
        made for it, the time all of them took."""
        rec.cost += self.spent
        if self.answers and self.t_first is not None:
            rec.cascade_ms = max(0.0, (asyncio.get_running_loop().time() - self.t_first) * 1000.0)
        rec.escalations = self.escalations
        if rec.status == "ok":
            rec.valid = self.valid
            rec.invalid_reason = None if self.valid is not False else self.reason
            rec.check_timeout = self.check_timeout
            rec.check_error = self.check_error
            rec.judge_error = self.judge_error
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
        self.checks = CheckThread(CHECK_DEADLINE_S)
        """Where the checks run: off this loop, each stopped at its deadline."""
        self.sender = sender
        self.judge_model = w.model(q.judge.model) if q.judge is not None else None
        self._warned: set[str] = set()

    def close(self) -> None:
        """The run is over: the check thread ends (a check still running is stopped)."""
        self.checks.close()

    def _warn_once(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            self.sender.warnings.append(text)

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
            reason = await self.verdict(story, res.text, judged)
            if reason == JUDGE_ERROR:  # no verdict: the answer stands unjudged
                judged.valid = judged.reason = None
                return res
            judged.valid, judged.reason = reason is None, reason
            if reason is None:
                return res
            nxt = sender.router.next_step(story.model, story.tried)
            if nxt is None:
                return res
            self.bill(story, res, {"valid": False, "invalid_reason": reason, **judged.faults()})
            if sender.stopping():  # no final answer: not done, so `--resume` sends it again
                judged.valid = judged.reason = None
                return unfinished(res)
            judged.escalations += 1
            sender.move(story, nxt)
            res = await sender.answer(story)
            if not res.ok:
                judged.valid = judged.reason = None
                return res

    async def verdict(self, story: Story, text: str | None, judged: Judged) -> str | None:
        """Why this answer is not valid, or None (JUDGE_ERROR: the judge gave no verdict); the
        judge asked last, when every other check passed. A check stopped at its deadline or that
        raised fails as the check it was in, noted on `judged`."""
        stage = Stage()
        try:
            out = await self.checks.run(self.checker.check, story.prompt, text, stage)
        except Exception as e:  # the user's schema or pattern met what it was not written for
            judged.check_error = type(e).__name__
            self._warn_once(
                "check_error",
                f"[quality] the {stage.reason} check raised {type(e).__name__}: {str(e)[:200]} "
                "(counted as invalid; records carry check_error)",
            )
            return stage.reason
        if out is TIMED_OUT:
            judged.check_timeout = True
            self._warn_once(
                "check_timeout",
                f"[quality] the {stage.reason} check ran past {CHECK_DEADLINE_S * 1000:.0f} ms on an answer "
                "and was stopped (counted as invalid; records carry check_timeout)",
            )
            return stage.reason
        reason: str | None = out
        if reason is not None or self.judge_model is None:
            return reason
        res = await self.judge(story, text or "")
        if not res.ok:
            judged.judge_error = res.error or "error"
            self._warn_once(
                "judge_error",
                f"[quality] a judge request to {self.judge_model.name} failed "
                f"({res.error}: {(res.detail or '')[:200]}); its answer stands unjudged "
                "(no valid, judge_error on the record)",
            )
            return JUDGE_ERROR
        return None if self.checker.judged(res.text) else "judge"

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
        reason = await self.verdict(ts, text, judged)
        if reason == JUDGE_ERROR:  # no verdict: the task's answer stands unjudged
            judged.mark(rec)
            return rec
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
                **judged.faults(),
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

    async def judge(self, story: Story, answer: str) -> AttemptResult:
        """The judge request about an answer (`engine/send/judgeprompt.py`: the answer fenced,
        oxconsole's instruction in the system message); its cost goes on the request's bill, and
        a failed one says so in its entry of `answers` (`error`)."""
        m = self.judge_model
        q = self.checker.judge
        assert m is not None and q is not None
        messages = judge_messages(q.prompt, prompt_text(story.prompt), answer)
        ask = Prompt(
            id=f"{story.prompt.id}#judge",
            messages=messages,
            input_chars=sum(len(x["content"]) for x in messages),
            keep_text=True,
        )
        js = Story(ask, m.name, story.t_sched_wall, story.t_sched)
        sender = self.sender
        sender.router.in_flight[m.name] += 1
        try:
            res = await sender.answer(js)
        finally:
            sender.router.in_flight[js.model] -= 1
        self.bill(js, res, {"judge": True} if res.ok else {"judge": True, "error": res.error}, into=story)
        return res

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
