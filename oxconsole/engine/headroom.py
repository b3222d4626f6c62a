"""One endpoint's provider rate limits as one shard sees them, and pacing by them.

Why this module exists: a provider's `x-ratelimit-*` headers (read by `rlheaders.py`) say, on every
answer, its limits, what is left and when it resets. `Headroom` keeps, per endpoint and shard, the
limits last seen, the lowest remaining, the latest figures (the console's headroom line) and, with
`[endpoints.X] pace_by_headers = true`, decides whether a request may go now (`admit`) or must wait
for the reset rather than draw a 429.

The client tells it of every attempt: `sending()` before it is sent (its sequence number), then
`seen(headers, seq)` once its headers are in, or `unanswered(seq)` when none came. Answers with no
such headers cost two dictionary look-ups.

Pacing (`admit`), for each limit (requests, tokens) separately:

* an attempt is *pending* from its send until its headers are in: the server may not have counted
  it in the remaining figures seen so far, so it is taken off them;
* the remaining figure is the lowest seen in the current window (a window's count only falls);
  its reset is the latest `receipt + reset` seen, never earlier than the server's own;
* once that reset has passed, a new window begins: everything sent before it is the old window's
  (its answers' figures are ignored), the limit is taken as whole again, less what is pending;
* within a window this shard sends at most its share of the limit (`share`, 1/N with N shards):
  N shards seeing the same remaining figure at different times cannot overshoot together;
* a request may go when `remaining * share - pending` leaves room for it (one request, or its
  token estimate) and its share is not spent; otherwise it waits for the reset.

With no figures yet (the run's first requests, or a server that sends none) nothing waits. With
no reset known and nothing pending, one request goes to learn the figures (it may draw a 429).
"""

from __future__ import annotations

import math
import time
from typing import Any

from oxconsole.engine.send.rlheaders import parse_count, parse_reset

__all__ = ["Headroom"]

_HEADERS = {
    kind: (f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}")
    for kind in ("requests", "tokens")
}


class _Limit:
    """One of an endpoint's two limits (requests or tokens), as this shard has seen it."""

    __slots__ = ("end", "epoch", "last", "left", "limit", "lowest", "reset_at", "used")

    def __init__(self) -> None:
        self.limit: int | None = None
        """The limit last stated."""
        self.lowest: int | None = None
        """The lowest remaining figure seen in the run."""
        self.last: int | None = None
        """The latest remaining figure (the console's)."""
        self.reset_at: float | None = None
        """Wall time of the latest figure's reset."""
        self.left: int | None = None
        """Remaining in the current window: the lowest figure of answers sent in it."""
        self.end: float | None = None
        """Monotonic time the current window ends (the latest receipt + reset seen in it)."""
        self.epoch = 0
        """Attempts numbered below this were sent in an earlier window."""
        self.used = 0.0
        """This shard's sends in the current window (requests, or estimated tokens)."""

    def observe(
        self, limit: int | None, left: int | None, reset: float | None, seq: int, now: float, wall: float
    ) -> None:
        if limit is not None:
            self.limit = limit
        if left is None:
            return
        self.last = left
        self.lowest = left if self.lowest is None else min(self.lowest, left)
        self.reset_at = None if reset is None else wall + reset
        if seq < self.epoch:  # the old window's answer
            return
        self.left = left if self.left is None else min(self.left, left)
        if reset is not None:
            end = now + reset
            self.end = end if self.end is None else max(self.end, end)

    def roll(self, now: float, seq: int, pending: float) -> None:
        """The window ended: a new one from the next attempt, what is pending counted in it."""
        if self.end is not None and now >= self.end:
            self.epoch = seq + 1
            self.left = None
            self.end = None
            self.used = pending

    def wait(self, need: float, pending: float, share: float, idle: bool, now: float) -> float:
        """Seconds until `need` more fits (0 = now; inf = until an answer says more). A request
        larger than the whole share goes at the start of a window."""
        cap = self.limit
        if self.last is None or (self.left is None and cap is None):
            return 0.0
        if cap is not None:
            need = min(need, cap * share)
            left = cap if self.left is None else min(self.left, cap)
        else:
            left = self.left or 0
        fits = left * share - pending >= need and (cap is None or cap * share - self.used >= need)
        if fits:
            return 0.0
        if self.end is not None:
            return max(self.end - now, 1e-3)
        return 0.0 if idle else math.inf


class Headroom:
    """One endpoint's rate-limit figures in one shard, and whether a request may go now."""

    __slots__ = (
        "_est", "limits", "name", "pending", "prepaid", "seen_at", "seq", "share",
        "wait_s", "waiting", "waits",
    )  # fmt: skip

    def __init__(self, name: str, share: float = 1.0) -> None:
        self.name = name
        self.share = share
        """This shard's part of each limit (1 / the run's shards)."""
        self.limits = {"requests": _Limit(), "tokens": _Limit()}
        self.seq = 0
        """Attempts sent so far (each one's number)."""
        self.pending = 0
        """Attempts sent (or admitted to be sent) whose headers are not in yet."""
        self.prepaid = 0
        """Admitted requests not sent yet: counted pending from their admission."""
        self._est = [0.0, 0]
        """Token estimates of admitted requests (sum, count): a pending attempt's tokens."""
        self.waits = 0
        """Times dispatch waited for a reset (`ratelimit.waits`)."""
        self.wait_s = 0.0
        """Seconds dispatch spent waiting for resets (client queue time)."""
        self.waiting = 0
        """Requests waiting for a reset now (what bounds the run, when any)."""
        self.seen_at = 0.0
        """Wall time of the latest answer with rate-limit headers."""

    # --- the client's side: every attempt --------------------------------------------------------
    def sending(self) -> int:
        """An attempt is about to be sent: its number."""
        if self.prepaid:
            self.prepaid -= 1
        else:
            self.pending += 1
        self.seq += 1
        return self.seq

    def seen(self, headers: Any, seq: int) -> None:
        """The attempt's headers are in (`headers`: any case-insensitive mapping)."""
        self.pending -= 1
        rr = headers.get("x-ratelimit-remaining-requests")
        rt = headers.get("x-ratelimit-remaining-tokens")
        if rr is None and rt is None:
            return
        now = time.monotonic()
        self.seen_at = wall = time.time()
        for kind, raw in (("requests", rr), ("tokens", rt)):
            if raw is not None:
                lim, _, rst = _HEADERS[kind]
                self.limits[kind].observe(
                    parse_count(headers.get(lim)),
                    parse_count(raw),
                    parse_reset(headers.get(rst)),
                    seq,
                    now,
                    wall,
                )

    def unanswered(self, seq: int) -> None:
        """The attempt ended with no headers (a connection failure, a timeout, a cancellation)."""
        self.pending -= 1

    # --- dispatch's side: pacing -----------------------------------------------------------------
    def admit(self, tokens: int, now: float) -> float:
        """0.0 when a request of about `tokens` tokens may go now (then it is counted pending from
        here); otherwise the seconds to wait before asking again (inf: until an answer comes)."""
        est_sum, est_n = self._est
        mean = (est_sum + tokens) / (est_n + 1)
        req, tok = self.limits["requests"], self.limits["tokens"]
        idle = self.pending == 0
        req.roll(now, self.seq, self.pending)
        tok.roll(now, self.seq, self.pending * mean)
        wait = max(
            req.wait(1, self.pending, self.share, idle, now),
            tok.wait(tokens, self.pending * mean, self.share, idle, now),
        )
        if wait > 0:
            return wait
        self._est = [est_sum + tokens, est_n + 1]
        req.used += 1
        tok.used += tokens
        self.pending += 1
        self.prepaid += 1
        return 0.0

    # --- what the run shows ----------------------------------------------------------------------
    def state(self) -> dict[str, Any] | None:
        """The figures as the summary and the console read them (`metrics/ratelimit.py`); None
        when the endpoint sent no rate-limit headers and nothing waited."""
        req, tok = self.limits["requests"], self.limits["tokens"]
        if req.last is None and tok.last is None and not self.waits and not self.waiting:
            return None
        now = time.time()
        out: dict[str, Any] = {}
        for kind, lim in (("requests", req), ("tokens", tok)):
            out[f"limit_{kind}"] = lim.limit
            out[f"remaining_{kind}"] = lim.last
            out[f"remaining_{kind}_min"] = lim.lowest
            out[f"reset_{kind}_s"] = None if lim.reset_at is None else round(max(0.0, lim.reset_at - now), 3)
        out["waits"] = self.waits
        out["wait_s"] = round(self.wait_s, 3)
        out["waiting"] = self.waiting
        out["seen_at"] = self.seen_at
        return out
