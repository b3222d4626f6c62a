"""The in-flight panel: how much is out, what is waiting and why, and what bounds throughput.

Why this module exists: a load generator must say when it is itself the limit (event-loop lag, a
rate it cannot reach with free slots, the token budget): otherwise its figures are read as the
server's. `bottleneck` says it (decided in `metrics/bound.py`, which the headless line shares);
`in_flight_lines` shows it with the gauges it was decided from. A run against a hosted provider is
often bound by its rate limits rather than the server or the client: the headroom line shows the
endpoint with the least left of them (the `x-ratelimit-*` headers, on every answer) in words that
fit the 36 columns the panel has at 80x24.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import QUEUE
from oxconsole.base.units import fmt_count, fmt_duration, fmt_rate
from oxconsole.metrics.bound import LOOP_LAG_WARN_MS, TPM_FULL, bound_by
from oxconsole.metrics.snapshot import Gauges, Snapshot
from oxconsole.ui.charts import hbar
from oxconsole.ui.lines import Line, Palette, fit
from oxconsole.ui.numbers import ms, tight_count
from oxconsole.ui.panels.bursts import burst_lines
from oxconsole.ui.panels.server import busiest, server_line
from oxconsole.ui.widgets import Panel

__all__ = [
    "LOOP_LAG_WARN_MS",
    "LOW",
    "TPM_FULL",
    "InFlightPanel",
    "bottleneck",
    "headroom_line",
    "in_flight_lines",
    "tightest",
]

_SHORT = {
    "in flight": "in fl",
    "loop lag": "lag",
    "bound by": "bound",
    "per model": "models",
    "headroom": "room",
}
"""Row labels in a narrow panel."""


def bottleneck(s: Snapshot) -> tuple[str, str]:
    """(level, message): what limits throughput right now (`metrics.bound.bound_by`), with the key
    that changes it. level is "warn" when the client itself is the bottleneck (its numbers are
    then not the server's), "info" otherwise."""
    g = s.gauges
    what = bound_by(s)
    locked = (s.sweep or {}).get("locked") or ()  # a sweep sets these at each point: no key hint
    if what == "paused":
        return "info", "paused (space resumes)"
    if what in ("done", "starting"):
        return "info", what
    if what == "loop lag":
        return "warn", f"⚠ the client: event loop lag {g.loop_lag_ms:.0f} ms"
    if what == "tpm":
        return "info", "tpm ({/} change it)"
    if what == "ratelimit":
        return "info", "provider limit (its reset)"
    if what == "slow rate":
        return "warn", f"⚠ the client: {fmt_rate(g.achieved_rate)} of {fmt_rate(g.rate)} with free slots"
    if what == "draining":
        return "info", "draining: no new requests"
    if what == "concurrency":
        if "concurrency" in locked:
            return "info", "concurrency (the sweep's)"
        return "info", "concurrency (auto's limit)" if g.auto else "concurrency (+ raises it)"
    if what == "rate":
        return "info", "rate (the sweep's)" if "rate" in locked else "rate (] raises it)"
    if what == "pushback":
        return "info", "server pushback (retries backing off)"
    if what == "server KV":
        _, e = busiest(g.server or {})
        return "info", f"server KV cache {100 * float(e.get('kv_usage') or 0):.0f}% full"
    if what == "server queue":
        _, e = busiest(g.server or {})
        return "info", f"server queue: {int(e.get('waiting') or 0)} waiting"
    return "info", "not limited by the client"


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
    the run has one), the server's own running, waiting and KV usage (when read) and where the queue
    is, and what bounds throughput; more detail (loop lag, client queue time, in flight per model)
    when tall."""
    label = _Labels(p, width < 44)
    lines = _load_lines(s, p, width, label)
    if s.gauges.ratelimit:
        lines.append(headroom_line(s.gauges.ratelimit, p, label("headroom"), label.narrow))
        if len(lines) >= height:  # a short panel: the limits before what is waiting
            del lines[1]
    if s.gauges.server and any("running" in e or "waiting" in e for e in s.gauges.server.values()):
        g = s.gauges  # a server never read has its warning; it takes no line here
        assert g.server is not None
        lines.append(server_line(g.server, g.waiting_slot, p, label("server"), label.narrow, width))
        if len(lines) >= height and len(lines) > 2:  # a short panel: the server before what is waiting
            del lines[1]
    lines += _bursts_in(s, p, label, lines, height, width)
    lines.extend(_detail_lines(s, p, label)[: max(0, height - len(lines) - 1)])
    level, msg = bottleneck(s)
    t = label("bound by")
    t.append(msg, style=f"bold {p.error}" if level == "warn" else p.foreground)
    lines.append(t)
    return fit(lines, width)


def _bursts_in(
    s: Snapshot, p: Palette, label: _Labels, lines: list[Line], height: int, width: int
) -> list[Line]:
    """The burst lines that fit above the bound line; in a short panel they go before what is
    waiting (unless the rate limits took its place already)."""
    extra = burst_lines(s.bursts, p, label, width)
    if (
        extra
        and len(lines) + len(extra) + 1 > height
        and not (s.gauges.ratelimit or s.gauges.server)
        and len(lines) > 1
    ):
        del lines[1]
    return extra[: max(0, height - len(lines) - 1)]


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
    lines.append(_waiting_line(g, p, label))
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


def _waiting_line(g: Gauges, p: Palette, label: _Labels) -> Line:
    """What waits: for a slot, the rate bucket, a provider's reset (`pace_by_headers`: requests held
    with their slots, only when some are; a narrow panel drops an empty bucket for it), a backoff."""
    held = sum(int(e.get("waiting") or 0) for e in (g.ratelimit or {}).values())
    items = [("slot", g.waiting_slot)]
    if g.waiting_bucket or not (held and label.narrow):
        items.append(("bucket", g.waiting_bucket))
    if held:
        items.append(("reset", held))
    items.append(("backoff", g.backing_off))
    t = label("waiting")
    for i, (word, n) in enumerate(items):
        t.append(("" if not i else " " if label.narrow else " · ") + f"{word} ", style=p.muted)
        t.append(fmt_count(n), style=p.warning if n else "")
    return t


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
    q = QUEUE.of(s.window) or {}
    t = label("queued")
    t.append(f"p50 {ms(q.get('p50', 0.0))}  p99 {ms(q.get('p99', 0.0))}")
    t.append("  (slot or rate)", style=p.muted)  # a closed loop always waits for a slot
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


# -- headroom: what is left of a provider's rate limits, and when they reset ----------------

LOW = 0.1
"""Below this share of a limit left, the figure is shown as a warning."""


def _left(s: Mapping[str, Any], kind: str) -> float | None:
    limit, left = s.get(f"limit_{kind}"), s.get(f"remaining_{kind}")
    if not limit or left is None:
        return None
    return float(left) / float(limit)


def tightest(rl: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """The endpoint with the least share of a limit left, and its figures."""

    def least(item: tuple[str, Mapping[str, Any]]) -> float:
        shares = [x for k in ("requests", "tokens") if (x := _left(item[1], k)) is not None]
        return min(shares, default=1.0)

    return min(rl.items(), key=least)


def headroom_line(rl: Mapping[str, Mapping[str, Any]], p: Palette, head: Line, narrow: bool) -> Line:
    """`head` (the row's label) then "req 12/600 · tok 81k/150k · reset 3.2s" for the tightest
    endpoint (its name too when there are several)."""
    name, s = tightest(rl)
    t = head
    sep = " " if narrow else " · "
    count = tight_count if narrow else fmt_count
    first = True
    reset = None
    for kind, word in (("requests", "req"), ("tokens", "tok")):
        left = s.get(f"remaining_{kind}")
        if left is None:
            continue
        if not first:
            t.append(sep, style=p.muted)
        first = False
        t.append(f"{word} ", style=p.muted)
        share = _left(s, kind)
        t.append(count(left), style=p.warning if share is not None and share < LOW else "bold")
        limit = s.get(f"limit_{kind}")
        if limit is not None:
            t.append(f"/{count(limit)}", style=p.muted)
        r = s.get(f"reset_{kind}_s")
        if r is not None:
            reset = r if reset is None else max(reset, r)
    if reset is not None:
        t.append(sep, style=p.muted)
        t.append("" if narrow else "reset ", style=p.muted)
        t.append(fmt_duration(float(reset), 1 if reset < 10 else 0))
    if len(rl) > 1 and not narrow:
        t.append(f" ({name})", style=p.muted)
    return t


class InFlightPanel(Panel):
    """In flight vs limit, waiting for a slot / the rate bucket / backing off, target vs achieved
    rate, loop lag, and what bounds throughput (with a warning when it is the client itself)."""

    TITLE = "in flight"
    DEFAULT_CSS = """
    InFlightPanel { height: 8; }
    """

    def draw(self, snap: Snapshot, width: int, height: int) -> list[Line]:
        return in_flight_lines(snap, self.palette, width, height)
