"""The `[slo]` table: when a request counts as good, and what share of them a run must reach.

Why this module exists: goodput is one decision taken in several places (the engine marks each
record, the adaptive-concurrency controller and sweeps judge what they see, `validate` describes
it); `SloConfig.good` (schema.py) is that decision, written once, pure and O(1), and `parse_slo` reads the
table with the same error texts as every other section.

What "good" means: the request ended `ok` and met every threshold given (a value equal to its
threshold meets it). `ttft` is judged on the record's `ttft_ms`; a request with none (not
streamed, or no content before the end) got its first token with the whole answer, so its
`latency_ms` stands in. `itl` is the record's mean inter-token gap (`itl_ms`); a request with
none (not streamed, or fewer than two content chunks) had no gap to be slow and meets it.
`ttfot` is judged on `ttfot_ms` (the first answer token, after any reasoning), else as `ttft`.
`latency` is `latency_ms`. A request that ended in error is never good.
"""

from __future__ import annotations

from typing import Any

from oxconsole.workload.problems import Problems
from oxconsole.workload.schema import DEFAULT_TARGET, SloConfig, toml_keys
from oxconsole.workload.values import Table, fmt_duration, is_num

__all__ = ["SloConfig", "parse_slo", "slo_lines", "slo_warnings"]

_SLO = toml_keys(SloConfig)


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
    if slo.ttfot is not None:
        out.append(
            "slo.ttfot with run.stream = false: no first answer token is timed, each latency is judged"
        )
    if slo.itl is not None:
        out.append("slo.itl with run.stream = false: no token gaps are timed, every request meets it")
    return out


def parse_slo(errs: Problems, data: Any) -> SloConfig | None:
    """The `[slo]` table (None when absent), its errors recorded in `errs`."""
    if data is None:
        return None
    t = Table(errs, data, "slo", _SLO, "[slo]")
    if t.broken:
        return None
    return SloConfig(
        ttft=_threshold(t, "ttft"),
        itl=_threshold(t, "itl"),
        latency=_threshold(t, "latency"),
        target=_target(t),
        ttfot=_threshold(t, "ttfot"),
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
