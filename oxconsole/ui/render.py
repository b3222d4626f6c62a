"""What each console panel shows, as Rich Text built from one immutable Snapshot.

Why this module exists: the widgets should be thin (hold a snapshot, show a Text) and the figures
should be testable without a terminal. Every function here is pure: a `Snapshot`, a `Palette` (theme
colours already resolved) and the space available in, a `rich.text.Text` out. Tables are laid out
by hand (`grid`): cheaper than rich.table to build and to paint, and two results compare equal when
nothing visible changed, so the widget can skip the repaint.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from oxconsole.metrics.format import eta_seconds, fmt_duration, fmt_ms
from oxconsole.metrics.snapshot import Bins, Snapshot

__all__ = [
    "LATENCY_METRICS",
    "Palette",
    "bar_chart",
    "bottleneck",
    "fmt_change",
    "fmt_cost",
    "fmt_count",
    "fmt_rate",
    "header_lines",
    "join_lines",
    "sparkline",
]

LATENCY_METRICS: tuple[tuple[str, str], ...] = (
    ("ttft_ms", "TTFT"),
    ("itl_ms", "inter-token"),
    ("latency_ms", "end-to-end"),
    ("queue_ms", "client queue"),
)
"""(snapshot key, label) in the order `h` cycles through them."""

LOOP_LAG_WARN_MS = 50.0
"""Event-loop lag above this means the client itself is late sending and reading."""

_EIGHTHS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True, slots=True)
class Palette:
    """Theme colours resolved to Rich colour strings (from the app's theme variables)."""

    primary: str = ""
    accent: str = ""
    success: str = ""
    warning: str = ""
    error: str = ""
    muted: str = ""
    foreground: str = ""
    bar: str = ""
    bar_empty: str = ""

    @classmethod
    def from_variables(cls, v: Mapping[str, str]) -> Palette:
        """Build from ``App.theme_variables`` (text-* variants are legible on the background)."""
        from textual.color import Color, ColorParseError

        def get(*names: str) -> str:
            for n in names:
                raw = v.get(n)
                if not raw:
                    continue
                try:
                    return Color.parse(raw).hex
                except ColorParseError:
                    continue
            return ""

        def blend(a: str, b: str, f: float) -> str:
            try:
                return Color.parse(v[a]).blend(Color.parse(v[b]), f).hex
            except (KeyError, ColorParseError):
                return ""

        return cls(
            primary=get("text-primary", "primary"),
            accent=get("text-accent", "accent"),
            success=get("text-success", "success"),
            warning=get("text-warning", "warning"),
            error=get("text-error", "error"),
            muted=blend("foreground", "background", 0.45),
            foreground=get("foreground"),
            bar=get("primary"),
            bar_empty=blend("foreground", "background", 0.8),
        )


class Line:
    """One line of a panel as (text, style) runs: the few parts of `rich.text.Text` the panels use.

    Why not Text itself: a panel builds some 30 lines four times a second, and Text sanitises every
    string it is given and keeps spans that must be divided again to be drawn; that was a fifth of
    the console's CPU. A Line is a list of runs, two Lines compare equal when they draw the same,
    and `widgets.Panel` turns one into a Strip with styles parsed once per style string.
    ``style`` applies under every run, as a Text's own style does.
    """

    __slots__ = ("cells", "runs", "style")

    def __init__(self, text: str = "", style: str = "") -> None:
        self.style = style
        self.runs: list[tuple[str, str]] = [(text, "")] if text else []
        self.cells = -1
        """Width in cells once `truncate` has measured it (-1: not yet)."""

    def append(self, text: str, style: str = "") -> Line:
        if text:
            self.runs.append((text, style))
            self.cells = -1
        return self

    def append_text(self, other: Line) -> Line:
        if other.style:
            self.runs.extend((t, f"{other.style} {st}" if st else other.style) for t, st in other.runs)
        else:
            self.runs.extend(other.runs)
        self.cells = -1
        return self

    @property
    def plain(self) -> str:
        return "".join(t for t, _ in self.runs)

    def __len__(self) -> int:
        return sum(len(t) for t, _ in self.runs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Line):
            return NotImplemented
        return self.runs == other.runs and self.style == other.style

    # mutable, like Text: not hashable
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Line({self.plain!r})"

    def copy(self) -> Line:
        new = Line(style=self.style)
        new.runs = list(self.runs)
        return new

    @property
    def cell_len(self) -> int:
        if self.cells < 0:
            self.cells = cell_len(self.plain)
        return self.cells

    def truncate(self, width: int) -> None:
        """Cut to ``width`` cells, the last one an ellipsis in the style of the cell it replaces
        (as `Text.truncate(..., overflow="ellipsis")`)."""
        if self.cell_len <= width:
            return
        self.cells = width
        room = max(0, width - 1)
        out: list[tuple[str, str]] = []
        for text, style in self.runs:
            n = cell_len(text)
            if n <= room:
                out.append((text, style))
                room -= n
                continue
            if room:
                out.append((set_cell_size(text, room), style))
            out.append(("…", style))
            break
        self.runs = out

    def to_text(self) -> Text:
        return Text.assemble(*self.runs, style=self.style, no_wrap=True)


def _fit(lines: Sequence[Line], width: int) -> list[Line]:
    """Each line cut to ``width`` cells with an ellipsis."""
    w = max(1, width)
    for line in lines:
        line.truncate(w)
    return list(lines)


def join_lines(lines: Sequence[Line]) -> Text:
    """One Rich Text of several lines (a panel's lines, for tests and tools that want Text)."""
    return Text("\n", no_wrap=True).join(line.to_text() for line in lines)


# -- numbers ---------------------------------------------------------------------------------


def fmt_count(n: float) -> str:
    """1234 -> "1,234"; 1234567 -> "1.23M"."""
    n = int(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if abs(n) >= 100_000:
        return f"{n / 1e3:.0f}k"
    return f"{n:,}"


def fmt_rate(r: float, unit: str = "/s") -> str:
    """Requests (or tokens) per second with sensible digits; 0 shows as 0."""
    if r >= 1000:
        return f"{r:,.0f}{unit}"
    if r >= 100:
        return f"{r:.0f}{unit}"
    if r >= 10:
        return f"{r:.1f}{unit}"
    return f"{r:.2f}{unit}"


def fmt_cost(c: float) -> str:
    """Costs carry no currency sign: they are in the currency of the workload's prices."""
    if c == 0:
        return "0"
    if c < 0.01:
        return f"{c:.5f}"
    if c < 1:
        return f"{c:.4f}"
    if c < 100:
        return f"{c:.2f}"
    return f"{c:,.0f}"


def fmt_weight(w: float) -> str:
    return f"{w:g}" if w < 1000 else f"{w:.0f}"


def fmt_clock(s: float) -> str:
    """Elapsed time as m:ss or h:mm:ss."""
    s = int(max(0.0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _ms(v: float) -> str:
    return fmt_ms(v) if v > 0 else "–"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%" if x >= 0.1 or x == 0 else f"{100 * x:.1f}%"


def fmt_change(c: Mapping[str, Any]) -> str:
    """One logged change in words: ``concurrency 32→28``, ``qwen off``, ``paused``."""
    what = str(c.get("what", "?"))
    frm, to = c.get("from"), c.get("to")
    if what == "rate":

        def r(x: Any) -> str:
            return "∞" if not x else fmt_rate(float(x))

        return f"rate {r(frm)}→{r(to)}"
    if what == "weight":
        return f"{c.get('model', '?')} weight {fmt_weight(float(frm or 0))}→{fmt_weight(float(to or 0))}"
    if what == "enabled":
        return f"{c.get('model', '?')} {'on' if to else 'off'}"
    if what == "paused":
        return "paused" if to else "resumed"
    return f"{what} {frm}→{to}"


# -- small charts ----------------------------------------------------------------------------


def sparkline(values: Sequence[float], width: int, top: float | None = None) -> str:
    """One row of eighth-blocks, the last ``width`` values (left-padded with spaces)."""
    vals = list(values)[-width:] if width > 0 else []
    hi = top if top is not None else max(vals, default=0.0)
    out = []
    for v in vals:
        if hi <= 0 or v <= 0:
            out.append(" ")
        else:
            out.append(_EIGHTHS[max(1, min(8, round(8 * v / hi)))])
    return " " * (width - len(out)) + "".join(out)


def bar_chart(values: Sequence[float], width: int, height: int, top: float | None = None) -> list[str]:
    """A block column chart, ``height`` rows of eighth-blocks, newest value on the right."""
    vals = list(values)[-width:] if width > 0 else []
    pad = width - len(vals)
    hi = top if top is not None else max(vals, default=0.0)
    levels = [0 if hi <= 0 or v <= 0 else max(1, round(8 * height * v / hi)) for v in vals]
    rows = []
    for r in range(height - 1, -1, -1):
        base = r * 8
        row = []
        for lv in levels:
            fill = lv - base
            row.append("█" if fill >= 8 else (_EIGHTHS[fill] if fill > 0 else " "))
        rows.append(" " * pad + "".join(row))
    return rows


def _bar(frac: float, width: int) -> tuple[str, str]:
    """(filled, empty) parts of a horizontal bar with eighth-block resolution."""
    frac = min(1.0, max(0.0, frac))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return filled, "░" * max(0, width - len(filled))


# -- header ----------------------------------------------------------------------------------


def header_lines(
    s: Snapshot,
    p: Palette,
    width: int,
    *,
    name: str,
    state: str,
    note: str = "",
    note_style: str = "",
    flash: str = "",
    flash_style: str = "",
) -> list[Line]:
    """Three lines: who/state/counts/cost; progress bar with ETA; a status line: a confirmation
    (``flash``, for a moment), then the console's note or the phase, and the current rates."""
    g = s.gauges
    state_style = {
        "running": p.success,
        "paused": p.warning,
        "draining": p.warning,
        "stopping": p.warning,
        "done": p.primary,
        "starting": p.muted,
        "disconnected": p.error,
    }.get(state, p.foreground)
    t = Line()
    t.append(f" {name} ", style=f"bold {p.primary}")
    t.append(" ● ", style=state_style)
    t.append(state, style=f"bold {state_style}")
    t.append(f"  {fmt_clock(s.elapsed_s)}", style="bold")
    t.append("   ok ", style=p.muted)
    t.append(fmt_count(s.counts.ok), style=p.success)
    t.append("  err ", style=p.muted)
    err_pct = s.counts.error / s.counts.total if s.counts.total else 0.0
    t.append(fmt_count(s.counts.error), style=p.error if s.counts.error else "")
    if s.counts.error:
        t.append(f" ({_pct(err_pct)})", style=p.error)
    if s.counts.retried and width >= 100:
        t.append("  retried ", style=p.muted)
        t.append(fmt_count(s.counts.retried))
    t.append("   cost ", style=p.muted)
    t.append(fmt_cost(s.cost))
    if s.projected_cost is not None and s.projected_cost > s.cost:
        t.append(" → ", style=p.muted)
        t.append(f"~{fmt_cost(s.projected_cost)}", style=p.accent)
        if width >= 100:
            t.append(" projected", style=p.muted)
    lines = [t]
    t = Line()
    total = g.total_expected
    done = s.counts.total
    if total:
        frac = done / total if total else 0.0
        tail = f" {fmt_count(done)}/{fmt_count(total)} {100 * frac:5.1f}%"
        eta = eta_seconds(s)
        if state in ("done",) or done >= total:
            tail += "  complete"
        elif eta is not None:
            tail += f"  ETA {fmt_duration(eta)}"
        bar_w = max(10, width - len(tail) - 2)
        filled, empty = _bar(frac, bar_w)
        t.append(" ")
        t.append(filled, style=p.bar)
        t.append(empty, style=p.bar_empty)
        t.append(tail)
    else:
        t.append(
            f" {fmt_count(done)} finished · {fmt_count(g.dispatched)} sent · no fixed total", style=p.muted
        )
    lines.append(t)
    t = Line()
    if flash:
        t.append(f" {flash}", style=f"bold {flash_style or p.accent}")
        if note:
            t.append("  ·", style=p.muted)
    if note:
        t.append(f" {note}", style=note_style or p.warning)
    elif flash:
        t.append(f"   {fmt_rate(s.req_per_s_10s, ' req/s')}", style=p.primary)
        t.append(f"  {fmt_rate(s.output_tokens_per_s_10s, ' tok/s')}", style=p.primary)
    else:
        t.append(f" phase {s.phase_index}", style=p.muted)
        if s.phase_settings:
            t.append(f" since {fmt_clock(s.phase_t_start)}: ", style=p.muted)
            t.append(", ".join(fmt_change(c) for c in s.phase_settings))
        else:
            t.append(" (no change yet)", style=p.muted)
        t.append(f"   {fmt_rate(s.req_per_s_10s, ' req/s')}", style=p.primary)
        t.append(f"  {fmt_rate(s.output_tokens_per_s_10s, ' tok/s')}", style=p.primary)
    lines.append(t)
    return _fit(lines, width)


# -- in flight -------------------------------------------------------------------------------


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
    if g.waiting_slot > 0 or g.in_flight >= g.concurrency:
        return "info", "concurrency (+ raises it)"
    if g.waiting_bucket > 0 or (g.rate > 0 and g.achieved_rate >= 0.9 * g.rate):
        return "info", "rate (] raises it)"
    if g.backing_off > 0 and g.backing_off >= 0.2 * max(1, g.in_flight):
        return "info", "server pushback (retries backing off)"
    return "info", "not limited by the client"


def in_flight_lines(s: Snapshot, p: Palette, width: int, height: int = 6) -> list[Line]:
    """In flight vs limit, what is waiting and why, target vs achieved rate, and what bounds
    throughput; more detail (loop lag, client queue time, in flight per model) when tall."""
    g = s.gauges
    narrow = width < 44
    lab = 8 if narrow else 10
    short = {"in flight": "in fl", "loop lag": "lag", "bound by": "bound", "per model": "models"}

    def label(text: str) -> Line:
        return Line((short.get(text, text) if narrow else text).ljust(lab), style=p.muted)

    lines: list[Line] = []
    frac = g.in_flight / g.concurrency if g.concurrency else 0.0
    t = label("in flight")
    head = f"{g.in_flight}/{g.concurrency}".ljust(8 if narrow else 10)
    t.append(head, style="bold")
    bar_w = max(4, width - lab - len(head) - 5)
    filled, empty = _bar(frac, bar_w)
    t.append(filled, style=p.warning if frac >= 1 else p.bar)
    t.append(empty, style=p.bar_empty)
    t.append(f" {100 * frac:3.0f}%")
    lines.append(t)
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
    level, msg = bottleneck(s)
    extra: list[Line] = []
    t = label("loop lag")
    t.append(f"{g.loop_lag_ms:.1f} ms", style=p.error if g.loop_lag_ms >= LOOP_LAG_WARN_MS else "")
    t.append(f"   sent {fmt_count(g.dispatched)}", style=p.muted)
    extra.append(t)
    q = s.window.get("queue_ms", {})
    t = label("queued")
    t.append(f"p50 {_ms(q.get('p50', 0.0))}  p99 {_ms(q.get('p99', 0.0))}")
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
    room = max(0, height - 4)
    lines.extend(extra[:room])
    t = label("bound by")
    t.append(msg, style=f"bold {p.error}" if level == "warn" else p.foreground)
    lines.append(t)
    return _fit(lines, width)


# -- throughput ------------------------------------------------------------------------------


def _axis(width: int, span: int) -> str:
    """`-2m ... -1m ... now` under a chart of ``span`` seconds drawn in ``width`` columns."""
    if width < 8:
        return ""
    left = f"-{fmt_duration(span)}"
    mid = f"-{fmt_duration(span / 2)}" if width >= 30 and span >= 4 else ""
    right = "now"
    line = [" "] * width
    for i, ch in enumerate(left):
        if i < width:
            line[i] = ch
    if mid:
        start = width // 2 - len(mid) // 2
        for i, ch in enumerate(mid):
            line[start + i] = ch
    for i, ch in enumerate(right):
        line[width - len(right) + i] = ch
    return "".join(line)


def throughput_lines(s: Snapshot, p: Palette, width: int, height: int) -> list[Line]:
    """req/s (a block chart) and output tokens/s (a sparkline), one column per second, a ▲ under
    each second where a setting changed and a × under seconds with errors."""
    ser = s.series
    cols = max(1, width)
    n = len(ser.req_per_s)
    shown = min(n, cols)
    tall = height >= 7
    lines: list[Line] = []
    t = Line("req/s ", style=p.muted)
    t.append(fmt_rate(s.req_per_s_10s, ""), style=f"bold {p.primary}")
    t.append(f" now · {fmt_rate(s.req_per_s, '')} run", style=p.muted)
    if s.errors_per_s_10s > 0:
        t.append(f" · err {fmt_rate(s.errors_per_s_10s)}", style=p.error)
    if not tall:
        t.append(" · tok/s ", style=p.muted)
        t.append(fmt_rate(s.output_tokens_per_s_10s, ""), style=f"bold {p.accent}")
    lines.append(t)
    chart_h = max(1, height - (5 if tall else 3))
    recent = ser.req_per_s[-shown:] if shown else ()
    top = max(recent, default=0.0)
    for row in bar_chart(recent, cols, chart_h, top=top or None):
        lines.append(Line(row, style=p.primary))
    if tall:
        t = Line("tok/s ", style=p.muted)
        t.append(fmt_rate(s.output_tokens_per_s_10s, ""), style=f"bold {p.accent}")
        t.append(f" now · {fmt_rate(s.output_tokens_per_s, '')} run", style=p.muted)
        lines.append(t)
    lines.append(Line(sparkline(ser.output_tokens_per_s[-shown:] if shown else (), cols), style=p.accent))
    marks = [" "] * cols
    first = ser.start_s + n - shown  # the second drawn in column ``off``
    off = cols - shown
    for i, e in enumerate(ser.errors_per_s[-shown:] if shown else ()):
        if e > 0:
            marks[off + i] = "×"
    for m in ser.markers:
        col = off + int(m) - first
        if 0 <= col < cols:
            marks[col] = "▲"
    t = Line()
    styles = {"▲": p.warning, "×": p.error, " ": ""}
    for ch, same in itertools.groupby(marks):
        t.append(ch * len(list(same)), style=styles[ch])
    lines.append(t)
    if tall:
        lines.append(Line(_axis(cols, max(shown, 1)), style=p.muted))
    return _fit(lines[: max(1, height)], width)


# -- latency ---------------------------------------------------------------------------------


def _fit_bins(bins: Bins, rows: int) -> list[tuple[float, float, int]]:
    b = list(bins)
    while b and b[0][2] == 0:
        b.pop(0)
    while b and b[-1][2] == 0:
        b.pop()
    rows = max(1, rows)
    if len(b) > rows:
        k = math.ceil(len(b) / rows)
        b = [
            (b[i][0], b[min(i + k, len(b)) - 1][1], sum(c for _, _, c in b[i : i + k]))
            for i in range(0, len(b), k)
        ]
    return b


def latency_lines(s: Snapshot, p: Palette, width: int, height: int, metric: str, scope: str) -> list[Line]:
    """One metric's histogram (``scope`` "window" = last window_s seconds, "run" = whole run),
    with p50/p90/p99 marked on the bins that hold them."""
    label = dict(LATENCY_METRICS).get(metric, metric)
    summ = (s.window if scope == "window" else s.run).get(metric, {})
    bins = (s.bins_window if scope == "window" else s.bins_run).get(metric, ())
    lines: list[Line] = []
    t = Line(label, style=f"bold {p.primary}")
    t.append(f" · {'last ' + str(s.window_s) + ' s' if scope == 'window' else 'whole run'}", style="bold")
    t.append("   h: metric · r: window/run", style=p.muted)
    lines.append(t)
    n = sum(c for _, _, c in bins)
    t = Line()
    for q in ("p50", "p90", "p99"):
        t.append(f"{q} ", style=p.muted)
        t.append(f"{_ms(summ.get(q, 0.0)):<8}", style="bold")
    if width >= 52:
        t.append("max ", style=p.muted)
        t.append(f"{_ms(summ.get('max', 0.0)):<8}")
    t.append(f"n={fmt_count(n)}", style=p.muted)
    lines.append(t)
    if n == 0:
        lines.append(
            Line("no finished requests" + (" in this window" if scope == "window" else " yet"), style=p.muted)
        )
        return _fit(lines, width)
    rows = _fit_bins(bins, max(1, height - 2))
    label_w = 9
    count_w = max(len(fmt_count(c)) for _, _, c in rows)
    mark_w = 13
    bar_w = max(4, width - label_w - count_w - mark_w - 1)
    top = max(c for _, _, c in rows) or 1
    qs = [(q, summ.get(q, 0.0)) for q in ("p50", "p90", "p99")]
    for i, (lo, hi, c) in enumerate(rows):
        t = Line(f"{fmt_ms(hi):>{label_w - 1}} ", style=p.muted)
        filled, _ = _bar(c / top, bar_w)
        in_bin = [q for q, v in qs if v > 0 and (lo <= v <= hi or (i == 0 and v < lo))]
        t.append(filled.ljust(bar_w), style=p.accent if in_bin else p.bar)
        t.append(f" {fmt_count(c):>{count_w}}", style=p.muted if c == 0 else "")
        if in_bin:
            t.append(" ◂" + " ".join(in_bin), style=p.accent)
        lines.append(t)
    return _fit(lines, width)


# -- tables --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Col:
    """A column of `grid`: header, alignment, and whether it takes the width left over."""

    header: str
    right: bool = True
    flex: bool = False
    min_width: int = 0


Cell = Line | str


def grid(cols: Sequence[Col], rows: Sequence[Sequence[Cell]], width: int, p: Palette) -> list[Line]:
    """A plain table as lines of Text: header, a rule, rows. Columns are as wide as their widest
    cell; the flex column gets what is left (cells cut with an ellipsis). Much cheaper to build
    and to paint than rich.table.Table, and comparable, so an unchanged panel is not repainted."""
    cells = [[c if isinstance(c, Line) else Line(c) for c in row] for row in rows]
    lens = [[len(c) for c in row] for row in cells]
    widths = [max([len(col.header), col.min_width, *(n[i] for n in lens)]) for i, col in enumerate(cols)]
    gap = 2
    fixed = sum(w for w, c in zip(widths, cols, strict=True) if not c.flex) + gap * (len(cols) - 1)
    for i, col in enumerate(cols):
        if col.flex:
            widths[i] = max(4, width - fixed)
    out: list[Line] = []
    sep = " " * gap
    right = [col.right for col in cols]

    def line(items: Sequence[Line], sizes: Sequence[int], style: str = "") -> Line:
        t = Line(style=style)
        for i, item in enumerate(items):
            w, n = widths[i], sizes[i]
            if n > w:
                item = item.copy()
                item.truncate(w)
                n = len(item)
            pad = " " * (w - n)
            if i:
                t.append(sep)
            if right[i]:
                t.append(pad)
                t.append_text(item)
            else:
                t.append_text(item)
                t.append(pad)
        return t

    out.append(line([Line(c.header) for c in cols], [len(c.header) for c in cols], f"bold {p.primary}"))
    out.append(Line("─" * max(1, min(width, sum(widths) + gap * (len(cols) - 1))), style=p.muted))
    for row, sizes in zip(cells, lens, strict=True):
        out.append(line(row, sizes))
    return out


# -- models ----------------------------------------------------------------------------------


def models_lines(s: Snapshot, p: Palette, width: int) -> list[Line]:
    """One row per model; columns are dropped or merged, least useful first, to fit ``width``."""
    wide = width >= 120
    mid = width >= 100
    longest = max((len(m.name) for m in s.models), default=5)
    cols = [Col("model", right=False, flex=True, min_width=min(longest + (0 if mid else 8), 26))]
    if mid:
        cols.append(Col("state", right=False))
    cols += [
        Col("weight"),
        Col("share"),
        Col("in fl"),
        Col("req/s"),
        Col("TTFT p50/99" if mid else "TTFT50"),
        Col("lat p50/99" if mid else "lat50"),
        Col("ok"),
        Col("err"),
    ]
    if wide:
        cols += [Col("tok in/out"), Col("cost")]
    wsum = sum(
        m.gauge.weight for m in s.models if m.gauge is not None and m.gauge.enabled and m.gauge.weight > 0
    )
    rows: list[list[Cell]] = []
    for m in s.models:
        gauge = m.gauge
        enabled = gauge is None or gauge.enabled
        if gauge is None:
            state, st_style = "–", p.muted
        elif not gauge.enabled:
            state, st_style = "off", p.muted
        elif gauge.cooled_down:
            state, st_style = "cooling", p.warning
        else:
            state, st_style = "on", p.success
        if gauge is not None:
            wshare = gauge.weight / wsum if wsum and enabled else 0.0
            weight = f"{fmt_weight(gauge.weight)} {_pct(wshare):>4}"
        else:
            weight = "–"
        dim = p.muted if not enabled else ""

        def both(a: float, b: float) -> str:
            return f"{_ms(a)}/{_ms(b)}" if mid else _ms(a)

        name = Line(m.name, style=dim or "bold")
        if not mid and state != "on":
            name.append(f" {state}", style=st_style)
        row: list[Cell] = [name]
        if mid:
            row.append(Line(state, style=st_style))
        row += [
            Line(weight, style=dim),
            Line(_pct(m.share), style=dim),
            Line(str(gauge.in_flight if gauge is not None else 0), style=dim),
            Line(fmt_rate(m.req_per_s_10s, ""), style=dim),
            Line(both(m.ttft_p50, m.ttft_p99), style=dim),
            Line(both(m.latency_p50, m.latency_p99), style=dim),
            Line(fmt_count(m.counts.ok), style=dim),
            Line(fmt_count(m.counts.error), style=p.error if m.counts.error else dim),
        ]
        if wide:
            row.append(Line(f"{fmt_count(m.input_tokens)}/{fmt_count(m.output_tokens)}", style=dim))
            row.append(Line(fmt_cost(m.cost), style=dim))
        rows.append(row)
    return _fit(grid(cols, rows, width, p), width)


# -- errors ----------------------------------------------------------------------------------


class _ZeroStat:
    count = 0
    detail = ""


_Z: Any = _ZeroStat()


def errors_lines(s: Snapshot, p: Palette, width: int) -> list[Line]:
    """Final errors by class (requests that ended in error), attempts retried by class, and the
    latest detail of each class."""
    classes = sorted(set(s.errors) | set(s.attempt_errors), key=lambda c: (-s.errors.get(c, _Z).count, c))
    if not classes:
        return [Line("no errors", style=p.success)]
    cols = [
        Col("class", right=False),
        Col("final"),
        Col("retried"),
        Col("latest detail", right=False, flex=True),
    ]
    rows: list[list[Cell]] = []
    for c in classes:
        e = s.errors.get(c)
        rows.append(
            [
                Line(c, style=p.error if e else p.warning),
                Line(fmt_count(e.count) if e else "0", style=p.error if e else p.muted),
                fmt_count(s.attempt_errors.get(c, 0)),
                Line(e.detail if e and e.detail else "–", style=p.muted),
            ]
        )
    lines = grid(cols, rows, width, p)
    lines.append(
        Line(
            f"{fmt_rate(s.errors_per_s_10s)} now · final: failed after retries · retried: attempts retried",
            style=p.muted,
        )
    )
    return _fit(lines, width)


# -- phase -----------------------------------------------------------------------------------


def phase_lines(s: Snapshot, p: Palette, width: int, height: int) -> list[Line]:
    """This phase (since the last change) next to the whole run, and the last changes."""
    head = Line()
    head.append(f"phase {s.phase_index}", style=f"bold {p.primary}")
    if s.phase_settings:
        dur = max(0.0, s.elapsed_s - s.phase_t_start)
        head.append(f" · {fmt_clock(s.phase_t_start)} (+{fmt_duration(dur)}) ", style=p.muted)
        head.append(", ".join(fmt_change(c) for c in s.phase_settings), style=p.accent)
    else:
        head.append(" · from the start, no change yet", style=p.muted)
    pc, rc = s.phase_counts, s.counts

    def delta(a: float, b: float, lower_is_better: bool) -> Line:
        if a <= 0 or b <= 0:
            return Line("")
        d = (a - b) / b
        if abs(d) < 0.005:
            return Line("=", style=p.muted)
        good = (d < 0) == lower_is_better
        return Line(f"{100 * d:+.0f}%", style=p.success if good else p.warning)

    pe = pc.error / pc.total if pc.total else 0.0
    re_ = rc.error / rc.total if rc.total else 0.0
    rows: list[list[Cell]] = [
        [
            Line("req/s", style=p.muted),
            fmt_rate(s.phase_req_per_s, ""),
            fmt_rate(s.req_per_s, ""),
            delta(s.phase_req_per_s, s.req_per_s, False),
        ],
        [
            Line("ok / err", style=p.muted),
            f"{fmt_count(pc.ok)} / {fmt_count(pc.error)}",
            f"{fmt_count(rc.ok)} / {fmt_count(rc.error)}",
            "",
        ],
        [Line("error rate", style=p.muted), _pct(pe), _pct(re_), delta(pe, re_, True)],
    ]
    metrics: list[tuple[str, str, str]] = [
        ("TTFT p50", "ttft_ms", "p50"),
        ("TTFT p99", "ttft_ms", "p99"),
        ("latency p50", "latency_ms", "p50"),
        ("latency p99", "latency_ms", "p99"),
        ("ITL p50", "itl_ms", "p50"),
        ("queue p50", "queue_ms", "p50"),
    ]
    budget = max(1, height - 6)
    for label, metric, q in metrics[:budget]:
        a = s.phase.get(metric, {}).get(q, 0.0)
        b = s.run.get(metric, {}).get(q, 0.0)
        rows.append([Line(label, style=p.muted), _ms(a), _ms(b), delta(a, b, True)])
    cols = [
        Col("", right=False, flex=True, min_width=11),
        Col("this phase"),
        Col("whole run"),
        Col("Δ", min_width=4),
    ]
    lines = [head, *grid(cols, rows, width, p)]
    room = height - len(lines)
    if room >= 2 and s.changes:
        lines.append(Line("changes", style=p.muted))
        for c in s.changes[-(room - 1) :]:
            line = Line(f"{fmt_clock(float(c.get('t', 0))):>7} ", style=p.muted)
            line.append(fmt_change(c))
            lines.append(line)
    return _fit(lines, width)


def round_sig(x: float, digits: int = 3) -> float:
    """Round to ``digits`` significant digits (rates read better as 22.0 than 21.9615)."""
    if x <= 0:
        return 0.0
    return round(x, max(0, digits - 1 - math.floor(math.log10(x))))
