"""The simulator's provider-style rate limits: requests and tokens per fixed window, and their headers.

Why this module exists: hosted providers send `x-ratelimit-limit-*`, `x-ratelimit-remaining-*` and
`x-ratelimit-reset-*` on every answer and answer 429 beyond them; a client that paces by those
headers needs a server whose figures can be computed by hand. The rule here is the simplest that
behaves like a provider's: windows of `window` seconds (a minute) follow one another from the first
request the server answers; each window allows `rpm_limit` requests and `tpm_limit` tokens (a
request's prompt tokens plus the completion tokens it will be answered with, charged whole when it
arrives). A request that would pass either limit is answered 429, is not charged, and carries
`Retry-After`: the time until the window ends. Every answer (429s included) carries, for each limit
that is on, the limit, what is left of it in the current window after this request, and the time
until the window ends (`reset`, in the providers' form: "20ms", "1.5s", "6m0s").
"""

from __future__ import annotations

import math

from oxconsole.workload import SimLimits

__all__ = ["Limiter", "go_duration"]


def go_duration(ms: int) -> str:
    """Milliseconds as providers write a reset (Go's duration form): "20ms", "1s", "1.5s", "6m0s"."""
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    minutes, rest = divmod(ms, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class Limiter:
    """The windows of one simulator: requests and tokens used in the current one."""

    __slots__ = ("_start", "limits", "requests", "tokens")

    def __init__(self, limits: SimLimits) -> None:
        self.limits = limits
        self._start = -math.inf
        """Loop time the current window began (the first request's time, then each window's)."""
        self.requests = 0
        self.tokens = 0

    @property
    def on(self) -> bool:
        return self.limits.rpm_limit > 0 or self.limits.tpm_limit > 0

    def take(self, now: float, tokens: int) -> tuple[dict[str, str], float, str]:
        """Charge one request of `tokens` tokens arriving at loop time `now`. Returns the headers its
        answer carries, and 0.0 and "" when it may pass, or the seconds to wait (a 429) and the limit
        it would pass ("requests" or "tokens") when it may not."""
        lim = self.limits
        window = lim.window
        if now >= self._start + window:
            if self._start == -math.inf:
                self._start = now
            else:
                self._start += window * math.floor((now - self._start) / window)
            self.requests = 0
            self.tokens = 0
        over = ""
        if lim.rpm_limit > 0 and self.requests + 1 > lim.rpm_limit:
            over = "requests"
        elif lim.tpm_limit > 0 and self.tokens + tokens > lim.tpm_limit:
            over = "tokens"
        if not over:
            self.requests += 1
            self.tokens += tokens
        left = max(0.0, self._start + window - now)
        ms = math.ceil(round(left * 1000.0, 6))
        reset = go_duration(ms)
        headers: dict[str, str] = {}
        if lim.rpm_limit > 0:
            headers["x-ratelimit-limit-requests"] = str(lim.rpm_limit)
            headers["x-ratelimit-remaining-requests"] = str(max(0, lim.rpm_limit - self.requests))
            headers["x-ratelimit-reset-requests"] = reset
        if lim.tpm_limit > 0:
            headers["x-ratelimit-limit-tokens"] = str(lim.tpm_limit)
            headers["x-ratelimit-remaining-tokens"] = str(max(0, lim.tpm_limit - self.tokens))
            headers["x-ratelimit-reset-tokens"] = reset
        return headers, (max(ms, 1) / 1000.0 if over else 0.0), over
