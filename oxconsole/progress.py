"""The headless progress line: one line per interval from a snapshot, and the ETA it (and the
console's header) shows.

Why this module exists: a headless run (over SSH, in CI) and each point of a sweep print the same
line; it reads one snapshot and needs neither the engine nor the console.
"""

from __future__ import annotations

from oxconsole.metrics.goodput import progress_part
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.metrics.stages import stage_text
from oxconsole.units import fmt_duration, fmt_ms

__all__ = ["eta_seconds", "progress_line"]


def eta_seconds(s: Snapshot) -> float | None:
    """Seconds left at the last 10 s rate, while the run is running with a fixed total (no ETA
    while paused, draining or done: nothing new is being sent)."""
    if s.gauges.state != "running":
        return None
    total = s.gauges.total_expected
    done = s.counts.total
    if not total or done <= 0 or s.elapsed_s <= 0:
        return None
    rate = s.req_per_s_10s or done / s.elapsed_s
    if rate <= 0:
        return None
    return max(0, total - done) / rate


def progress_line(s: Snapshot) -> str:
    g = s.gauges
    done = s.counts.total
    total = g.total_expected
    if total:
        head = f"{done}/{total} {100.0 * done / total:5.1f}%"
    else:
        head = f"{done} done"
    lat = s.window.get("latency_ms") or s.run.get("latency_ms") or {}
    p50 = lat.get("p50", 0.0)
    p99 = lat.get("p99", 0.0)
    parts = [
        f"[{fmt_duration(s.elapsed_s):>6}] {head}",
        f"{s.req_per_s_10s:.1f} req/s",
        f"{s.output_tokens_per_s_10s:.0f} tok/s",
        f"p50 {fmt_ms(p50)} p99 {fmt_ms(p99)}",
        f"err {s.counts.error}",
        *((progress_part(s.goodput),) if s.goodput is not None else ()),
        f"in flight {g.in_flight}/{g.concurrency}" + (" auto" if g.auto else ""),
    ]
    if g.state == "paused":
        parts.append("PAUSED")
    eta = eta_seconds(s)
    if s.stage is not None:  # [[stages]]: which one, and the run ends after the last
        parts.append(stage_text(s.stage, s.elapsed_s))
        left = max(0.0, float(s.stage["total_s"]) - s.elapsed_s)
        eta = left if eta is None else min(eta, left)
    if eta is not None:
        parts.append(f"ETA {fmt_duration(eta)}")
    return " | ".join(parts)
