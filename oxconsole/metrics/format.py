"""Plain-text formatting of live figures: the headless progress line, and the words for a change.

Why this module exists: headless runs (and `ps`) show one line per interval from a snapshot, and
the console and the summary table both name logged changes (``rate unlimited → 27.5/s``); neither
must pull in the console to do so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.metrics.goodput import progress_part
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.metrics.stages import stage_text


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


def fmt_rate(r: float, unit: str = "/s") -> str:
    """Requests (or tokens) per second with sensible digits; 0 shows as 0."""
    if r >= 1000:
        return f"{r:,.0f}{unit}"
    if r >= 100:
        return f"{r:.0f}{unit}"
    if r >= 10:
        return f"{r:.1f}{unit}"
    return f"{r:.2f}{unit}"


def fmt_weight(w: float) -> str:
    return f"{w:g}" if w < 1000 else f"{w:.0f}"


def change_text(c: Mapping[str, Any], arrow: str = " → ", unlimited: str = "unlimited") -> str:
    """One logged change in words: ``concurrency 32 → 28``, ``rate unlimited → 27.5/s``,
    ``qwen weight 1 → 2``, ``qwen off``, ``paused``, ``resumed``. The console passes a tighter
    ``arrow`` and ``unlimited`` ("→", "∞")."""
    what = str(c.get("what", "?"))
    frm, to = c.get("from"), c.get("to")
    if what == "rate":

        def r(x: Any) -> str:
            return unlimited if not x else fmt_rate(float(x))

        return f"rate {r(frm)}{arrow}{r(to)}"
    if what == "tpm":

        def t(x: Any) -> str:
            return "off" if not x else f"{float(x):,.0f}"

        return f"tpm {t(frm)}{arrow}{t(to)}"
    if what == "weight":
        w0, w1 = fmt_weight(float(frm or 0)), fmt_weight(float(to or 0))
        return f"{c.get('model', '?')} weight {w0}{arrow}{w1}"
    if what == "enabled":
        return f"{c.get('model', '?')} {'on' if to else 'off'}"
    if what == "paused":
        return "paused" if to else "resumed"
    if what == "stage" and isinstance(to, int):  # [[stages]] boundary: shown 1-based, as the console
        return f"stage {to + 1}"
    model = f" {c['model']}" if c.get("model") is not None else ""
    return f"{what}{model} {frm}{arrow}{to}"


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
        f"in flight {g.in_flight}/{g.concurrency}",
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
