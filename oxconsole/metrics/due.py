"""The intended send time: latency counted from when a request was due, and how late it left.

Why this module exists: an open-loop run (`constant`, `poisson`, a trace) promises each request
a send time. A client that falls behind sends late, and timing from the late send hides the
wait (coordinated omission): the user who was due at `t_scheduled` waited from then. So for these
runs the summary also holds `ttft_from_due_ms` and `latency_from_due_ms` (the measured figure
plus `t_sent - t_scheduled`), `schedule_lag_ms` (`t_sent - t_scheduled`, every request sent) and
`schedule` (the share sent within `ON_TIME_MS` of due). A closed loop has no promise: nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from oxconsole.base.figures import FROM_DUE, LATENCY, LATENCY_FROM_DUE, SCHEDULE_LAG, TTFT, TTFT_FROM_DUE
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.histogram import LogHistogram

__all__ = ["ON_TIME_MS", "DueStats", "behind"]

ON_TIME_MS: Final = 10.0
"""A request sent within this of its due time was on time."""
BEHIND_SHARE: Final = 0.9
"""Below this share on time, the client fell behind its schedule (said at the run's end)."""


class DueStats:
    """Histograms of the figures from due, fed every finished request; O(1) a request."""

    __slots__ = ("lag", "latency", "on_time", "ttft")

    def __init__(self) -> None:
        self.ttft = LogHistogram()
        self.latency = LogHistogram()
        self.lag = LogHistogram()
        self.on_time = 0

    def record(self, rec: RequestRecord) -> None:
        lag = (rec.t_sent - rec.t_scheduled) * 1000.0
        if lag < 0.0:
            lag = 0.0
        self.lag.record(lag)
        if lag <= ON_TIME_MS:
            self.on_time += 1
        if rec.status == "ok":
            if rec.ttft_ms is not None:
                self.ttft.record(rec.ttft_ms + lag)
            if rec.latency_ms is not None:
                self.latency.record(rec.latency_ms + lag)

    def live(self) -> dict[str, float] | None:
        """The console's figures: lag p50 and p99, the share on time; None before any request."""
        n = self.lag.count
        if not n:
            return None
        p50, p99 = self.lag.percentiles((50.0, 99.0))
        return {"p50": p50, "p99": p99, "within_10ms": self.on_time / n}

    def into(self, summary: dict[str, Any]) -> dict[str, Any]:
        """`summary` with the blocks from due (`timing` blocks: every key, null when unmeasured)."""
        for f, h in zip(FROM_DUE, (self.ttft, self.latency, self.lag), strict=True):
            s = h.summary()
            summary[f.key] = dict(s) if h.count else dict.fromkeys(s)
        n = self.lag.count
        summary["schedule"] = {
            "requests": n,
            "within_10ms": None if not n else round(self.on_time / n, 4),
            "behind": bool(n) and self.on_time / n < BEHIND_SHARE,
        }
        return summary


def behind(summary: Mapping[str, Any]) -> str | None:
    """The end-of-run sentence when the client fell behind its schedule, else None."""
    sched = summary.get("schedule")
    lag = SCHEDULE_LAG.of(summary)
    if not isinstance(sched, Mapping) or not sched.get("behind") or not isinstance(lag, Mapping):
        return None
    share = sched.get("within_10ms") or 0.0
    return (
        f"the client fell behind its schedule: sends were {lag.get('p50', 0):.0f} ms late at p50, "
        f"{lag.get('p99', 0):.0f} ms at p99, {share:.0%} within 10 ms of due. That lag is the "
        f"client's (its concurrency limit or a busy loop), not the server's: {TTFT_FROM_DUE.key} and "
        f"{LATENCY_FROM_DUE.key} include it, {TTFT.key} and {LATENCY.key} do not."
    )
