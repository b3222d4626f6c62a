"""The `[slo]` table: when a request counts as good, and what share of them a run must reach.

Why this module exists: goodput is one decision taken in several places (the engine marks each
record, the adaptive-concurrency controller and sweeps judge what they see, `validate` describes
it); `SloConfig.good` is that decision, written once, pure and O(1), and `parse_slo` reads the
table with the same error texts as every other section.

What "good" means: the request ended `ok` and met every threshold given (a value equal to its
threshold meets it). `ttft` is judged on the record's `ttft_ms`; a request with none (not
streamed, or no content before the end) got its first token with the whole answer, so its
`latency_ms` stands in. `itl` is the record's mean inter-token gap (`itl_ms`); a request with
none (not streamed, or fewer than two content chunks) had no gap to be slow and meets it.
`latency` is `latency_ms`. A request that ended in error is never good.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from oxconsole.workload.errors import Problems
from oxconsole.workload.values import Table, fmt_duration, is_num

__all__ = ["DEFAULT_TARGET", "SLO_KEYS", "Judged", "SloConfig", "parse_slo", "slo_lines", "slo_warnings"]

SLO_KEYS = ("ttft", "itl", "latency", "target")

DEFAULT_TARGET = 0.95
"""The share of finished requests that must be good when `target` is not given: the contract's
example, and the usual "95% of requests" of a latency SLO (one straggler never fails a run)."""

_INF = math.inf


class Judged(Protocol):
    """What `good` reads of a finished request (a `RequestRecord` has it)."""

    @property
    def status(self) -> str: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def itl_ms(self) -> float | None: ...
    @property
    def latency_ms(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class SloConfig:
    ttft: float | None = None
    """Seconds to the first content token at most (a request without one: its latency)."""
    itl: float | None = None
    """Seconds of mean gap between content chunks at most (a request without gaps meets it)."""
    latency: float | None = None
    """Seconds from send to the last byte at most."""
    target: float = DEFAULT_TARGET
    """Share of finished requests that must be good, in (0, 1]; below it the run exits 3."""

    def good(self, rec: Judged) -> bool:
        """Whether a finished request is good: `ok` and within every threshold given. O(1)."""
        if rec.status != "ok":
            return False
        lat = rec.latency_ms
        if lat is None:
            lat = _INF
        if self.latency is not None and lat > self.latency * 1000.0:
            return False
        if self.ttft is not None:
            ttft = rec.ttft_ms
            if (lat if ttft is None else ttft) > self.ttft * 1000.0:
                return False
        if self.itl is not None:
            itl = rec.itl_ms
            if itl is not None and itl > self.itl * 1000.0:
                return False
        return True

    def thresholds(self) -> dict[str, float]:
        """The thresholds given, in seconds, by key (`ttft`, `itl`, `latency`)."""
        return {k: v for k, v in (("ttft", self.ttft), ("itl", self.itl), ("latency", self.latency)) if v}

    def describe(self) -> str:
        """One line for people: `ttft <= 500ms, latency <= 20s for 95% of requests`."""
        parts = [f"{k} <= {fmt_duration(v)}" for k, v in self.thresholds().items()] or ["ok"]
        return f"{', '.join(parts)} for {self.target * 100:g}% of requests"

    def to_dict(self) -> dict[str, Any]:
        """As the journal's manifest keeps it (seconds; absent thresholds null)."""
        return {"ttft": self.ttft, "itl": self.itl, "latency": self.latency, "target": self.target}


def slo_lines(slo: SloConfig | None) -> list[str]:
    """`validate`'s section on the SLO (none without one)."""
    if slo is None:
        return []
    limits = [f"{k} <= {fmt_duration(v)}" for k, v in slo.thresholds().items()]
    good = "ok and " + ", ".join(limits) if limits else "ok (no thresholds: goodput is the ok share)"
    return [
        "",
        "slo",
        f"  a request is good when {good}",
        f"  target: {slo.target * 100:g}% of finished requests good, else the run exits 3",
    ]


def slo_warnings(slo: SloConfig | None, stream: bool) -> list[str]:
    """What `validate` warns about: thresholds a run without streaming cannot measure."""
    if slo is None or stream:
        return []
    out = []
    if slo.ttft is not None:
        out.append("slo.ttft with run.stream = false: no first token is timed, each latency is judged")
    if slo.itl is not None:
        out.append("slo.itl with run.stream = false: no token gaps are timed, every request meets it")
    return out


def parse_slo(errs: Problems, data: Any) -> SloConfig | None:
    """The `[slo]` table (None when absent), its errors recorded in `errs`."""
    if data is None:
        return None
    t = Table(errs, data, "slo", SLO_KEYS, "[slo]")
    if t.broken:
        return None
    return SloConfig(
        ttft=_threshold(t, "ttft"),
        itl=_threshold(t, "itl"),
        latency=_threshold(t, "latency"),
        target=_target(t),
    )


def _threshold(t: Table, key: str) -> float | None:
    return t.duration(key, 0.0, positive=True) or None if t.has(key) else None


def _target(t: Table) -> float:
    if not t.has("target"):
        return DEFAULT_TARGET
    v = t.data["target"]
    if not is_num(v) or not 0 < v <= 1:
        t.fail("target", "a number > 0 and <= 1 (the share of finished requests that must be good)")
        return DEFAULT_TARGET
    return float(v)
