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
    if what == "auto":
        return "auto concurrency on" if to else "auto concurrency off"
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


BOUND_WORDS = {"paused": "paused", "tpm": "tpm", "rate": "rate", "concurrency": "concurrency",
               "slow rate": "client (rate not reached)", "loop lag": "client (loop lag)",
               "pushback": "server pushback"}  # fmt: skip
"""The progress line's `bound:` words for what `bound_by` found (none for the other states)."""


def _p50(window: Mapping[str, Mapping[str, float]], key: str, label: str) -> str:
    """`TTFT 26.4ms`, or `TTFT –` when the window holds no measure (never a made-up 0.0ms)."""
    d = window.get(key) or {}
    if not d or not d.get("max"):
        return f"{label} –"
    return f"{label} {fmt_ms(float(d.get('p50') or 0.0))}"


def _latency(window: Mapping[str, Mapping[str, float]], short: bool) -> str:
    lat = window.get("latency_ms") or {}
    if not lat or not lat.get("max"):
        return "lat –" if short else "p50 – p99 –"
    p50, p99 = fmt_ms(float(lat.get("p50") or 0.0)), fmt_ms(float(lat.get("p99") or 0.0))
    return f"lat {p50}/{p99}" if short else f"p50 {p50} p99 {p99}"


Part = tuple[int, str, str]
"""(rank: the lowest is left out first when the line must fit, the text, its short form)."""


def progress_line(s: Snapshot, width: int | None = None) -> str:
    """The headless progress line: done of total, the last 10 s's rates, TTFT and ITL p50 and the
    latency p50/p99 (`–` when the window is empty), errors, goodput, in flight of the limit, what
    bounds the run, the stage and the ETA. In a warm-up stage, whose requests the run's figures
    leave out, the stage's own count and latency. `width` (a terminal's): when the line is wider,
    shorter forms, then parts of least use left out, until it fits."""
    g = s.gauges
    done = s.counts.total
    total = g.total_expected
    head = f"{done}/{total} {100.0 * done / total:5.1f}%" if total else f"{done} done"
    short_head = f"{done}/{total} {100.0 * done / total:.0f}%" if total else f"{done} done"
    window = s.window
    warm = s.stage is not None and s.stage.get("warmup") and "done" in s.stage
    if warm:
        assert s.stage is not None
        head = short_head = f"warm-up {s.stage['done']} done"
        window = {"latency_ms": s.stage.get("latency_ms") or {}}
    in_flight = f"{g.in_flight}/{g.concurrency}" + (" auto" if g.auto else "")
    ttft, itl = _p50(window, "ttft_ms", "TTFT"), _p50(window, "itl_ms", "ITL")
    parts: list[Part] = [
        (9, f"[{fmt_duration(s.elapsed_s):>6}] {head}", f"{fmt_duration(s.elapsed_s)} {short_head}"),
        (8, f"{s.req_per_s_10s:.1f} req/s", f"{s.req_per_s_10s:.1f} req/s"),
        (2, f"{s.output_tokens_per_s_10s:.0f} tok/s", ""),
        *(((8, ttft, ttft), (1, itl, itl)) if not warm else ()),
        (7, _latency(window, False), _latency(window, True)),
        (4 if s.counts.error else 0, f"err {s.counts.error}", f"err {s.counts.error}"),
        *(((5, progress_part(s.goodput), progress_part(s.goodput)),) if s.goodput is not None else ()),
        (3, f"in flight {in_flight}", in_flight),
    ]
    parts += _state_parts(s)
    return _fit(parts, width)


def _state_parts(s: Snapshot) -> list[Part]:
    """PAUSED or what bounds the run, the stage, the ETA."""
    from oxconsole.metrics.bound import bound_by

    parts: list[Part] = []
    if s.gauges.state == "paused":
        parts.append((9, "PAUSED", "PAUSED"))
    elif (bound := BOUND_WORDS.get(bound_by(s))) is not None:
        parts.append((7, f"bound: {bound}", f"bound: {bound.replace('concurrency', 'conc')}"))
    eta = eta_seconds(s)
    if s.stage is not None:  # [[stages]]: which one, and the run ends after the last
        text = stage_text(s.stage, s.elapsed_s)
        parts.append((5, text, text))
        left = max(0.0, float(s.stage["total_s"]) - s.elapsed_s)
        eta = left if eta is None else min(eta, left)
    if eta is not None:
        parts.append((6, f"ETA {fmt_duration(eta)}", f"ETA {fmt_duration(eta)}"))
    return parts


def _fit(parts: list[Part], width: int | None) -> str:
    """The parts joined by ` | `; with a width it does not fit in, their short forms joined by two
    spaces, those of lowest rank left out until it fits."""
    line = " | ".join(text for _, text, _ in parts)
    if width is None or len(line) <= width:
        return line
    short = [(rank, text) for rank, _, text in parts if text]
    line = "  ".join(text for _, text in short)
    while len(line) > width and len(short) > 1:
        del short[min(range(len(short)), key=lambda i: short[i][0])]
        line = "  ".join(text for _, text in short)
    return line
