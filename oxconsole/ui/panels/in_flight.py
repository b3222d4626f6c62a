"""The in-flight panel: how much is out, what is waiting and why, and what bounds throughput.

Why this module exists: a load generator must say when it is itself the limit (event-loop lag, a
rate it cannot reach with free slots, the token budget): otherwise its figures are read as the
server's. `bottleneck` decides that from a snapshot; `in_flight_lines` shows it with the gauges it
was decided from.
"""

from __future__ import annotations

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.charts import hbar
from oxconsole.ui.lines import Line, Palette, fit
from oxconsole.ui.numbers import ms
from oxconsole.units import fmt_count, fmt_rate

__all__ = ["LOOP_LAG_WARN_MS", "TPM_FULL", "bottleneck", "in_flight_lines"]

LOOP_LAG_WARN_MS = 50.0
"""Event-loop lag above this means the client itself is late sending and reading."""

TPM_FULL = 0.95
"""The share of the token budget used in its window above which the budget is what binds, even at
an instant when no request is waiting for it (one is admitted each time tokens leave the window)."""

_SHORT = {"in flight": "in fl", "loop lag": "lag", "bound by": "bound", "per model": "models"}
"""Row labels in a narrow panel."""


def bottleneck(s: Snapshot) -> tuple[str, str]:
    """(level, message): what limits throughput right now. level is "warn" when the client itself
    is the bottleneck (its numbers are then not the server's), "info" otherwise."""
    g = s.gauges
    if g.state == "paused":
        return "info", "paused (space resumes)"
    if g.state in ("done", "starting"):
        return "info", g.state
    if g.loop_lag_ms >= LOOP_LAG_WARN_MS:
        return "warn", f"⚠ the client: event loop lag {g.loop_lag_ms:.0f} ms"
    if g.state == "running" and _tpm_bound(s):
        return "info", "tpm ({/} change it)"
    free = g.in_flight < 0.9 * g.concurrency and g.waiting_slot == 0
    if (
        g.state == "running"
        and g.rate > 0
        and s.elapsed_s >= 5
        and g.achieved_rate < 0.8 * g.rate
        and free
        and g.waiting_bucket == 0
    ):
        return "warn", f"⚠ the client: {fmt_rate(g.achieved_rate)} of {fmt_rate(g.rate)} with free slots"
    if g.state == "draining":
        return "info", "draining: no new requests"
    locked = (s.sweep or {}).get("locked") or ()  # a sweep sets these at each point: no key hint
    if g.waiting_slot > 0 or g.in_flight >= g.concurrency:
        if "concurrency" in locked:
            return "info", "concurrency (the sweep's)"
        return "info", "concurrency (auto's limit)" if g.auto else "concurrency (+ raises it)"
    if g.waiting_bucket > g.waiting_tpm or (g.rate > 0 and g.achieved_rate >= 0.9 * g.rate):
        return "info", "rate (the sweep's)" if "rate" in locked else "rate (] raises it)"
    if g.backing_off > 0 and g.backing_off >= 0.2 * max(1, g.in_flight):
        return "info", "server pushback (retries backing off)"
    return "info", "not limited by the client"


def _tpm_bound(s: Snapshot) -> bool:
    """The token budget holds requests back: one waits for it, or it is (nearly) all used while
    nobody waits for a slot."""
    g = s.gauges
    if g.tpm <= 0:
        return False
    return g.waiting_tpm > 0 or (g.tpm_used >= TPM_FULL * g.tpm and g.waiting_slot == 0)


class _Labels:
    """Row labels padded to one width, shortened in a narrow panel."""

    def __init__(self, p: Palette, narrow: bool) -> None:
        self.p = p
        self.narrow = narrow
        self.width = 8 if narrow else 10

    def __call__(self, text: str) -> Line:
        return Line((_SHORT.get(text, text) if self.narrow else text).ljust(self.width), style=self.p.muted)


def in_flight_lines(s: Snapshot, p: Palette, width: int, height: int = 6) -> list[Line]:
    """In flight vs limit, what is waiting and why, target vs achieved rate, the token budget (when
    the run has one), and what bounds throughput; more detail (loop lag, client queue time, in
    flight per model) when tall."""
    label = _Labels(p, width < 44)
    lines = _load_lines(s, p, width, label)
    lines.extend(_detail_lines(s, p, label)[: max(0, height - len(lines) - 1)])
    level, msg = bottleneck(s)
    t = label("bound by")
    t.append(msg, style=f"bold {p.error}" if level == "warn" else p.foreground)
    lines.append(t)
    return fit(lines, width)


def _load_lines(s: Snapshot, p: Palette, width: int, label: _Labels) -> list[Line]:
    """In flight with a bar against the limit; waiting for a slot / the bucket / a backoff; rate."""
    g = s.gauges
    narrow = label.narrow
    frac = g.in_flight / g.concurrency if g.concurrency else 0.0
    t = label("in flight")
    head = f"{g.in_flight}/{g.concurrency}".ljust(8 if narrow else 10)
    t.append(head, style="bold")
    bar_w = max(4, width - label.width - len(head) - 5)
    filled, empty = hbar(frac, bar_w)
    t.append(filled, style=p.warning if frac >= 1 else p.bar)
    t.append(empty, style=p.bar_empty)
    t.append(f" {100 * frac:3.0f}%")
    lines = [t]
    t = label("waiting")
    t.append("slot ", style=p.muted)
    t.append(fmt_count(g.waiting_slot), style=p.warning if g.waiting_slot else "")
    t.append(" · bucket " if not narrow else " bucket ", style=p.muted)
    t.append(fmt_count(g.waiting_bucket), style=p.warning if g.waiting_bucket else "")
    t.append(" · backoff " if not narrow else " backoff ", style=p.muted)
    t.append(fmt_count(g.backing_off), style=p.warning if g.backing_off else "")
    lines.append(t)
    t = label("rate")
    if g.rate > 0:
        t.append(fmt_rate(g.rate), style="bold")
        t.append(" target · ", style=p.muted)
    else:
        t.append("unlimited", style="bold")
        t.append(" · ", style=p.muted)
    t.append(fmt_rate(g.achieved_rate))
    t.append(" sent", style=p.muted)
    lines.append(t)
    if g.tpm > 0:
        lines.append(_tpm_line(s, p, label))
    return lines


def _tpm_line(s: Snapshot, p: Palette, label: _Labels) -> Line:
    """The token budget and the tokens in its window (the last minute), with the share used."""
    g = s.gauges
    frac = g.tpm_used / g.tpm
    t = label("tpm")
    t.append(fmt_count(g.tpm), style="bold")
    t.append(" · " if label.narrow else " budget · ", style=p.muted)
    t.append(fmt_count(g.tpm_used), style=p.warning if frac >= TPM_FULL else "")
    t.append(" used " if label.narrow else " in the last min ", style=p.muted)
    t.append(f"{100 * frac:.0f}%")
    return t


def _detail_lines(s: Snapshot, p: Palette, label: _Labels) -> list[Line]:
    """Loop lag and requests sent, the client's queue time, in flight per model (shown when tall)."""
    g = s.gauges
    t = label("loop lag")
    t.append(f"{g.loop_lag_ms:.1f} ms", style=p.error if g.loop_lag_ms >= LOOP_LAG_WARN_MS else "")
    t.append(f"   sent {fmt_count(g.dispatched)}", style=p.muted)
    extra = [t]
    q = s.window.get("queue_ms", {})
    t = label("queued")
    t.append(f"p50 {ms(q.get('p50', 0.0))}  p99 {ms(q.get('p99', 0.0))}")
    t.append("  (client, 10 s)", style=p.muted)
    extra.append(t)
    if g.models:
        t = label("per model")
        for i, (name, mg) in enumerate(g.models.items()):
            if i:
                t.append(" · ", style=p.muted)
            t.append(f"{name} ", style=p.muted if not mg.enabled else "")
            t.append(str(mg.in_flight))
        extra.append(t)
    return extra
