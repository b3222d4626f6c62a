"""Plain-text formatting of live figures: the headless progress line.

Why this module exists: headless runs (and `ps`) show one line per interval from a snapshot; it
must not pull in the console to do so.
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot


def fmt_duration(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def fmt_ms(ms: float) -> str:
    if ms >= 10_000:
        return f"{ms / 1000:.1f}s"
    if ms >= 100:
        return f"{ms:.0f}ms"
    return f"{ms:.1f}ms"


def eta_seconds(s: Snapshot) -> float | None:
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
        f"in flight {g.in_flight}/{g.concurrency}",
    ]
    if g.state == "paused":
        parts.append("PAUSED")
    eta = eta_seconds(s)
    if eta is not None:
        parts.append(f"ETA {fmt_duration(eta)}")
    return " | ".join(parts)
