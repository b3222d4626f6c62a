"""Whether a model's server looks unwell, and the cool-down that takes a failing model out a while.

Why this module exists: a model whose server keeps failing would otherwise take its share of every
request and fail it; after COOL_AFTER failed attempts in a row the router skips it for a while,
doubling the pause each time it fails again. The count must follow the order attempts were sent,
which is not the order they come back in; keeping that order is this module's job.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from oxconsole.engine.router import Router
from oxconsole.engine.send.client import AttemptResult

COOL_AFTER = 5
"""Failed attempts in a row, in the order they were SENT, after which a model is cooled down.
Send order, not completion order: at high concurrency fast failures (500s, 429s, resets) come back
before the slower successes sent with them, and a healthy model would look dead."""
COOL_FIRST_S, COOL_MAX_S = 5.0, 60.0

OK, FAIL, NEUTRAL = 1, 2, 3
"""What one attempt says about its model: it works, it is unwell, or nothing (our request was wrong,
or it was cancelled)."""


def counts_against_model(res: AttemptResult) -> bool:
    """Failures that say the model's server is unwell (not that our request was wrong)."""
    if res.status is not None:
        return res.status >= 500 or res.status in (408, 429)
    return res.error is not None and res.error != "cancelled"


class ModelHealth:
    """Failures in a row per model, in send order; cools a model down in the router when too many.

    `sent(model)` numbers an attempt as it goes out; `settle(model, seq, outcome, error)` takes its
    outcome when it is known, in any order. Outcomes are consumed in sequence, so a streak is only
    broken by a success sent before the next failure.
    """

    def __init__(
        self,
        router: Router,
        models: Iterable[str],
        *,
        elapsed: Callable[[], float],
        on_warm: Callable[[], None],
    ) -> None:
        self.router = router
        self._elapsed = elapsed
        self._on_warm = on_warm
        names = list(models)
        self._streak = dict.fromkeys(names, 0)
        self._sent_seq = dict.fromkeys(names, 0)
        self._next_seq = dict.fromkeys(names, 0)
        self._outcomes: dict[str, dict[int, int]] = {m: {} for m in names}
        self._cool_s = dict.fromkeys(names, COOL_FIRST_S)
        self.cooldowns: list[dict[str, Any]] = []
        """Each cool-down: when (s since start), which model, for how long, after which error."""

    def sent(self, model: str) -> int:
        """The send sequence number of an attempt going out now."""
        seq = self._sent_seq[model]
        self._sent_seq[model] = seq + 1
        return seq

    def settle(self, model: str, seq: int, outcome: int, error: str | None) -> None:
        """The outcome of attempt `seq` (OK, FAIL or NEUTRAL); cools the model down if it failed
        COOL_AFTER times in a row. Call on the engine's loop."""
        pending = self._outcomes[model]
        pending[seq] = outcome
        nxt = self._next_seq[model]
        while nxt in pending:
            o = pending.pop(nxt)
            nxt += 1
            if o == OK:
                self._streak[model] = 0
                self._cool_s[model] = COOL_FIRST_S
            elif o == FAIL:
                self._streak[model] += 1
        self._next_seq[model] = nxt
        if self._streak[model] >= COOL_AFTER and not self.router.cooled[model]:
            self._cool_down(model, error)

    def _cool_down(self, model: str, error: str | None) -> None:
        seconds = self._cool_s[model]
        self._cool_s[model] = min(COOL_MAX_S, seconds * 2)
        self._streak[model] = COOL_AFTER - 1  # one more failure after the cool-down re-cools it
        self.router.set_cooled(model, True)
        self.cooldowns.append(
            {"t": round(self._elapsed(), 3), "model": model, "seconds": seconds, "after": error}
        )
        asyncio.get_running_loop().call_later(seconds, self._warm, model)

    def _warm(self, model: str) -> None:
        self.router.set_cooled(model, False)
        self._on_warm()
