"""Multi-turn sessions: a prompts line's `"turns"` sent one turn at a time, each with its history.

Why this module exists: a chat benchmark that sends every question alone misses what real
conversations cost (a history that grows, a prefix the server may cache). A session's turn k+1
can only be sent once turn k's answer is back, so the run's prompts are no longer known in
advance. `Sessions.prompts` wraps the run's prompt iterator: a session line gives its first turn;
when a turn's record is finished (`Sessions.finished`, called by the engine before it records it)
the next turn is queued with the whole history (user and assistant alternating, the assistant's
messages being the answers the server gave) and goes before any new prompt. When nothing is
ready but a session still waits for an answer, the iterator yields a future that the dispatcher
awaits (so it never spins and concurrency counts requests, not sessions).

Rules: turn k's id is the line's id plus `#tK` (K from 1); later turns go to the model that
answered turn 1; a turn that fails ends its session (its later turns are not sent, counted in
`turns_not_sent`). The answer text is kept only while its session lasts, and in the journal only
when `save_text` is on. On `--resume` a session whose turns were all `ok` is skipped; any other is
sent again from turn 1 (its history cannot be rebuilt from a journal without its answers), and
each turn's last record is the one that counts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from oxconsole.journal.records import RequestRecord
from oxconsole.workload import Prompt, Workload, request_ids, turn_id
from oxconsole.workload.prompts.tokens import counter

Waiting = asyncio.Future[None]
"""What the iterator yields when no prompt is ready: the dispatcher awaits it."""


@dataclass(slots=True)
class _Session:
    line: Prompt
    """The prompts line (its id, tag, model pin, max_tokens and turns)."""
    history: list[dict[str, Any]]
    """The messages sent with the turn in flight (its own user message last)."""
    chars: int
    """Characters of the history's content (for token estimates)."""
    tokens: int | None
    """Tokens of the history's content, with `[prompts] tokenizer`."""
    k: int = 1
    """The turn in flight (from 1)."""


class Sessions:
    """The sessions of one run (one engine): which turn each is on, what is ready to send next."""

    def __init__(
        self,
        *,
        skip: AbstractSet[str] = frozenset(),
        save_text: bool = True,
        count: Callable[[str], int] | None = None,
    ) -> None:
        self.skip = skip
        self.save_text = save_text
        self.count = count
        """Tokens of a text, with `[prompts] tokenizer` (the history's count grows by each turn)."""
        self._open: dict[str, _Session] = {}
        """Sessions with a turn in flight, by that turn's id."""
        self._ready: deque[Prompt] = deque()
        self._waiter: Waiting | None = None
        self.total = 0
        """Sessions started."""
        self.completed = 0
        """Sessions whose every turn was answered."""
        self.failed = 0
        """Sessions ended by a failed turn."""
        self.turns = 0
        """Turn requests finished (one record each)."""
        self.not_sent = 0
        """Turns never sent: after a failed turn, or left when the run stopped."""
        self.skipped = 0
        """Sessions skipped by `--resume` (every turn already `ok`)."""

    @classmethod
    def of(cls, w: Workload, skip: AbstractSet[str]) -> Sessions | None:
        """The run's sessions when its prompts may have some (a JSONL prompts file), else None."""
        if w.prompts.file is None or w.prompts.format != "jsonl":
            return None
        return cls(skip=skip, save_text=w.output.save_text, count=counter(w.prompts.tokenizer))

    def prompts(self, source: Iterator[Prompt]) -> Iterator[Prompt | Waiting]:
        """`source` with each session unrolled into its turns: next turns first, then new prompts,
        then, at the end of `source`, whatever sessions still have to send."""
        ready = self._ready
        for p in source:
            while ready:
                yield ready.popleft()
            if p.turns is None:
                yield p
            elif self._done_before(p):
                self.skipped += 1
            else:
                yield self._start(p)
        while ready or self._open:
            while ready:
                yield ready.popleft()
            if self._open:
                self._waiter = asyncio.get_running_loop().create_future()
                yield self._waiter

    def finished(self, rec: RequestRecord) -> None:
        """A request's record, before it is journaled: a session's turn queues the next one (or
        ends its session). The answer's text leaves the record unless `save_text` is on."""
        s = self._open.pop(rec.id, None)
        if s is None:
            return
        text = rec.text or ""
        if not self.save_text:
            rec.text = None
        self.turns += 1
        turns = s.line.turns
        assert turns is not None
        if rec.status != "ok":
            self.failed += 1
            self.not_sent += len(turns) - s.k
        elif s.k == len(turns):
            self.completed += 1
        else:
            nxt = turns[s.k]
            s.history += ({"role": "assistant", "content": text}, {"role": "user", "content": nxt})
            s.chars += len(text) + len(nxt)
            if s.tokens is not None and self.count is not None:
                s.tokens += self.count(text) + self.count(nxt)
            s.k += 1
            self._ready.append(self._turn(s, rec.model))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def counts(self) -> dict[str, int]:
        """The summary's `conversations`: sessions started, completed and failed, turns finished
        and not sent (a session cut by the run's stop counts its unsent turns here too)."""
        # once the run is over, an open session's turn was never sent (it was ready, or waiting)
        cut = sum(len(s.line.turns or ()) - s.k + 1 for s in self._open.values())
        out = {
            "total": self.total,
            "completed": self.completed,
            "failed": self.failed,
            "turns": self.turns,
            "turns_not_sent": self.not_sent + cut,
        }
        if self.skipped:
            out["skipped"] = self.skipped
        return out

    # --- inside ---------------------------------------------------------------------------------
    def _done_before(self, p: Prompt) -> bool:
        """Every turn of this session is `ok` in the journal being resumed."""
        skip = self.skip
        return bool(skip) and all(rid in skip for rid in request_ids(p))

    def _start(self, p: Prompt) -> Prompt:
        self.total += 1
        s = _Session(p, list(p.messages), p.input_chars, p.input_tokens)
        return self._turn(s, p.model)

    def _turn(self, s: _Session, model: str | None) -> Prompt:
        """The request for the session's turn in flight, its model pinned after turn 1."""
        prompt = dataclasses.replace(
            s.line,
            id=turn_id(s.line.id, s.k),
            messages=list(s.history),
            model=model,
            input_chars=s.chars,
            input_tokens=s.tokens,
            turns=None,
            keep_text=True,
        )
        self._open[prompt.id] = s
        return prompt


def merge_counts(parts: Iterable[dict[str, int] | None]) -> dict[str, int] | None:
    """The `conversations` of several engines (a worker pool's) added up; None when none had any."""
    out: dict[str, int] = {}
    for part in parts:
        for k, v in (part or {}).items():
            out[k] = out.get(k, 0) + v
    return out or None
