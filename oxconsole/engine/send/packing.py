"""Packing tasks into requests: packs formed from the run's prompts, their answers split into tasks.

Why this module exists: with `[packing] size = N` the engine sends one request for up to N tasks
and journals one record per task. Both ends live here so the per-request path stays as it is:
`Packer.packs` adapts the prompt stream (a pack is a `Pack`, a prompt like any other to the
dispatcher, router, limits and sender), and `Packer.finish` turns a finished request's record into
its tasks' records, sending a pack's tasks again alone when its answer does not split.

Which prompts share a pack: those with the same tag, the same pinned model and the same earlier
messages (so a pack routes exactly as each of its tasks would), whose last message is a user
message with text content, and none given as a whole request body. With `tags`, only prompts
carrying one of them are packed; every other prompt goes alone, as without packing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import time
from collections.abc import Iterator
from typing import Any

import orjson

from oxconsole.engine.dispatch import Dispatcher
from oxconsole.engine.router import NoModelAvailable, Router
from oxconsole.engine.send.request import Sender, Story
from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Pack, Prompt, Workload, format_pack, split_answer
from oxconsole.workload.packing import pack_head

__all__ = ["LINGER", "MAX_OPEN", "Packer", "packer_for"]

MAX_OPEN = 64
"""Partial packs kept open at once (one per tag, model and earlier messages). A prompt that would
open one more sends the oldest as it is: many distinct conversations never wait for each other."""

LINGER = 8
"""A partial pack is sent as it is once LINGER x size prompts were read after its first task
without filling it (a rare tag among common ones): no task waits long for company."""

_Key = tuple[str | None, str | None, bytes]
"""(tag, pinned model, earlier messages as JSON)"""


class _Open:
    """A pack being filled: its tasks, their texts, its estimated input size."""

    __slots__ = ("chars", "earlier", "first_read", "tasks", "texts")

    def __init__(self, earlier: list[dict[str, Any]], first_read: int) -> None:
        self.earlier = earlier
        self.first_read = first_read
        self.tasks: list[Prompt] = []
        self.texts: list[str] = []
        self.chars = sum(_chars(m.get("content")) for m in earlier) + len(pack_head(10))

    def add(self, task: Prompt, text: str) -> None:
        self.tasks.append(task)
        self.texts.append(text)
        self.chars += len(text) + 16


class Packer:
    """Forms packs from a run's prompts (`packs`) and splits each pack's record (`finish`)."""

    def __init__(
        self, w: Workload, sender: Sender, router: Router, dispatch: Dispatcher, *, prefix: str = ""
    ) -> None:
        cfg = w.packing
        self.size = cfg.size
        self.max_input_tokens = cfg.max_input_tokens
        self.tags = frozenset(cfg.tags)
        self.save_text = w.output.save_text
        self.sender = sender
        self.router = router
        self.dispatch = dispatch
        sender.save_text = True  # a pack's answer is split from its text, whatever save_text says
        caps = [m.max_tokens for m in w.models]
        self._out_cap = None if None in caps else max(c for c in caps if c is not None)
        """A task's output budget with no max_tokens of its own: the largest model's (None: some
        model has no cap, and neither has a pack)."""
        self._ids = itertools.count(1)
        self._prefix = f"pack-{prefix}"

    # --- forming packs ----------------------------------------------------------------------------
    def packs(self, prompts: Iterator[Prompt]) -> Iterator[Prompt]:
        """The run's prompts with tasks gathered into packs: a pack leaves when full, when the next
        task would take it past `max_input_tokens`, when it lingered (`LINGER`), when too many are
        open (`MAX_OPEN`) or at the end of the prompts; a prompt that cannot be packed at once."""
        open_: dict[_Key, _Open] = {}
        linger = LINGER * self.size
        cap_chars = self.max_input_tokens * 4
        for read, p in enumerate(prompts):
            key = self._key(p)
            if key is None:
                yield p
                continue
            text = p.messages[-1]["content"]
            g = open_.get(key)
            if g is not None and cap_chars and g.chars + len(text) + 16 > cap_chars:
                yield self._close(open_.pop(key))
                g = None
            if g is None:
                if len(open_) >= MAX_OPEN:
                    yield self._close(open_.pop(next(iter(open_))))
                g = open_[key] = _Open(p.messages[:-1], read)
            g.add(p, text)
            if len(g.tasks) >= self.size:
                yield self._close(open_.pop(key))
            oldest = next(iter(open_.values()), None)
            if oldest is not None and read - oldest.first_read >= linger:
                yield self._close(open_.pop(next(iter(open_))))
        while open_:
            yield self._close(open_.pop(next(iter(open_))))

    def _key(self, p: Prompt) -> _Key | None:
        """What a prompt shares a pack by, or None when it goes alone."""
        if p.body is not None or p.media is not None or (self.tags and p.tag not in self.tags):
            return None  # (a prompt's images, audio or documents have no place in a pack)
        last = p.messages[-1]
        if last.get("role") != "user" or type(last.get("content")) is not str:
            return None
        earlier = orjson.dumps(p.messages[:-1]) if len(p.messages) > 1 else b""
        return (p.tag, p.model, earlier)

    def _close(self, g: _Open) -> Prompt:
        """The request for an open pack: a `Pack`, or its one task as it is."""
        if len(g.tasks) == 1:
            return g.tasks[0]
        first = g.tasks[0]
        max_tokens: int | None = 0
        for t in g.tasks:
            out = t.max_tokens if t.max_tokens is not None else self._out_cap
            max_tokens = None if out is None or max_tokens is None else max_tokens + out
        content = format_pack(g.texts)
        return Pack(
            id=f"{self._prefix}{next(self._ids)}",
            messages=[*g.earlier, {"role": "user", "content": content}],
            tag=first.tag,
            model=first.model,
            max_tokens=max_tokens,
            input_chars=sum(_chars(m.get("content")) for m in g.earlier) + len(content),
            tasks=tuple(g.tasks),
        )

    # --- a pack's record into its tasks' --------------------------------------------------------
    async def finish(self, story: Story, rec: RequestRecord) -> list[RequestRecord]:
        """The records a finished request leaves: its own (a prompt sent alone), or one per task of
        a pack (its answer split; sent again alone when it does not split)."""
        pack = story.prompt
        if not isinstance(pack, Pack):
            if not self.save_text:
                rec.text = None
            return [rec]
        n = len(pack.tasks)
        if rec.status != "ok":
            return self._shares(rec, pack, None)
        sections = split_answer(rec.text, n)
        if sections is not None:
            shares = self._shares(rec, pack, sections)
            if self.sender.cascade is None:
                return shares
            return await self.sender.cascade.tasks(self, story, shares, sections)
        return await self._resend(story, rec)

    def _shares(self, rec: RequestRecord, pack: Pack, sections: list[str] | None) -> list[RequestRecord]:
        """One record per task: the request's timing, an even share of its tokens and cost, the
        task's own section as its text."""
        tasks = pack.tasks
        ins = _even(rec.input_tokens, len(tasks))
        outs = _even(rec.output_tokens, len(tasks))
        costs = _even_cost(rec.cost, len(tasks))
        keep = self.save_text and sections is not None
        return [
            dataclasses.replace(
                rec,
                id=t.id,
                tag=t.tag,
                input_tokens=ins[i],
                output_tokens=outs[i],
                cost=costs[i],
                text=sections[i] if keep and sections is not None else None,
                pack=pack.id,
                pack_size=len(tasks),
            )
            for i, t in enumerate(tasks)
        ]

    async def _resend(self, story: Story, rec: RequestRecord) -> list[RequestRecord]:
        """Each task of a pack whose answer did not split, sent again alone (in the pack's slot, one
        after another, through the rate limiter and token budget); the pack's tokens and cost added
        evenly to their records. Tasks the run stops before are left in error."""
        pack = story.prompt
        assert isinstance(pack, Pack)
        left = self._shares(rec, pack, None)  # the failed pack's share, task by task
        out: list[RequestRecord] = []
        try:
            for task, share in zip(pack.tasks, left, strict=True):
                if self.sender.stopping():
                    break
                r = await self._alone(task, story.model)
                out.append(_billed(r, share))
                if r.error == "cancelled":
                    break
        except asyncio.CancelledError:
            pass
        for share in left[len(out) :]:
            share.status = "error"
            share.error = "cancelled"
            share.error_detail = "its pack's answer did not split; the run stopped before it went alone"
            share.repacked = True
            out.append(share)
        return out

    async def _alone(self, task: Prompt, model: str) -> RequestRecord:
        """One task sent alone, as the dispatcher would send it (a model picked, its buckets)."""
        loop = asyncio.get_running_loop()
        t_wall, t_loop = time.time(), loop.time()  # its queue time counts the buckets' wait
        hold = await self.dispatch.wait_buckets(task)
        try:
            model = self.router.pick(task)
        except NoModelAvailable:
            pass  # the pack's model
        return await self.send_alone(Story(task, model, t_wall, t_loop, hold=hold))

    async def send_alone(self, st: Story) -> RequestRecord:
        """A task's story sent on its own (its buckets already waited for, its hold in `st`)."""
        self.router.in_flight[st.model] += 1
        try:
            r = await self.sender.send(st)
        finally:
            self.router.in_flight[st.model] -= 1
        if st.hold is not None:
            self.dispatch.settle(st.hold, r)
        if not self.save_text:
            r.text = None
        return r


def packer_for(
    w: Workload, sender: Sender, router: Router, dispatch: Dispatcher, *, prefix: str = ""
) -> Packer | None:
    """The run's packer; None when packing is off (size 1), so nothing changes at all."""
    if w.packing.size <= 1:
        return None
    return Packer(w, sender, router, dispatch, prefix=prefix)


def _billed(r: RequestRecord, share: RequestRecord) -> RequestRecord:
    """A task's record from being sent again alone, billed its share of the pack that did not split."""
    r.pack = share.pack
    r.pack_size = share.pack_size
    r.repacked = True
    r.input_tokens += share.input_tokens
    r.output_tokens += share.output_tokens
    r.cost += share.cost
    return r


def _even(total: int, n: int) -> list[int]:
    """`total` split into n integers as evenly as can be (the first ones get the remainder)."""
    base, extra = divmod(total, n)
    return [base + 1 if i < extra else base for i in range(n)]


def _even_cost(total: float, n: int) -> list[float]:
    """`total` split into n even shares that add up to it exactly (the last takes the rounding)."""
    share = total / n
    shares = [share] * (n - 1)
    shares.append(total - math.fsum(shares))
    return shares


def _chars(content: Any) -> int:
    return len(content) if isinstance(content, str) else 0
