"""The headless progress line: one line per interval from a snapshot, and the ETA it (and the
console's header) shows.

Why this module exists: a headless run (over SSH, in CI) and each point of a sweep print the same
line; it reads one snapshot and needs neither the engine nor the console.
"""

from __future__ import annotations

from collections.abc import Mapping

from oxconsole.base.figures import ITL, LATENCY, OUTPUT_TOKENS_PER_S, REQUESTS_PER_S, TTFT, Figure
from oxconsole.base.units import fmt_duration, fmt_ms
from oxconsole.metrics.goodput import progress_part
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.metrics.stages import stage_text

__all__ = ["BOUND_WORDS", "eta_seconds", "progress_line", "reset_hold"]


def eta_seconds(s: Snapshot) -> float | None:
    """Seconds left at the last 10 s rate, while the run is running with a fixed total (no ETA
    while paused, draining or done: nothing new is being sent). While requests are held for a
    provider's reset (`pace_by_headers`), that wait first: a reset a day away is a day of ETA."""
    if s.gauges.state != "running":
        return None
    total = s.gauges.total_expected
    done = s.counts.total
    if not total or done <= 0 or s.elapsed_s <= 0:
        return None
    rate = s.req_per_s_10s or done / s.elapsed_s
    hold = reset_hold(s)
    if rate <= 0 or hold is None:
        return None
    return hold + max(0, total - done) / rate


def reset_hold(s: Snapshot) -> float | None:
    """Seconds until the provider's reset that requests are held for now (the latest, over the
    endpoints holding some); 0 when none is held, None when some are and their reset is unknown."""
    hold = 0.0
    for e in (s.gauges.ratelimit or {}).values():
        if not e.get("waiting"):
            continue
        found = [_seconds(e.get(k)) for k in ("reset_requests_s", "reset_tokens_s")]
        resets = [r for r in found if r is not None]
        if not resets:
            return None
        hold = max(hold, *resets)
    return hold


def _seconds(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 else None


BOUND_WORDS = {"paused": "paused", "tpm": "tpm", "rate": "rate", "concurrency": "concurrency",
               "slow rate": "client (rate not reached)", "loop lag": "client (loop lag)",
               "pushback": "server pushback", "ratelimit": "provider rate limit",
               "server queue": "server queue", "server KV": "server KV cache"}  # fmt: skip
"""The progress line's `bound:` words for what `bound_by` found (none for the other states)."""


def _p50(window: Mapping[str, Mapping[str, float]], f: Figure) -> str:
    """`TTFT 26.4ms`, or `TTFT –` when the window holds no measure (never a made-up 0.0ms)."""
    d = window.get(f.key) or {}
    if not d or not d.get("max"):
        return f"{f.label} –"
    return f"{f.label} {fmt_ms(float(d.get('p50') or 0.0))}"


def _latency(window: Mapping[str, Mapping[str, float]], short: bool) -> str:
    lat = window.get(LATENCY.key) or {}
    if not lat or not lat.get("max"):
        return f"{LATENCY.short} –" if short else "p50 – p99 –"
    p50, p99 = fmt_ms(float(lat.get("p50") or 0.0)), fmt_ms(float(lat.get("p99") or 0.0))
    return f"{LATENCY.short} {p50}/{p99}" if short else f"p50 {p50} p99 {p99}"


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
        window = {LATENCY.key: s.stage.get(LATENCY.key) or {}}
    in_flight = f"{g.in_flight}/{g.concurrency}" + (" auto" if g.auto else "")
    ttft, itl = _p50(window, TTFT), _p50(window, ITL)
    rate, tokens = (
        f"{s.req_per_s_10s:.1f} {REQUESTS_PER_S.short}",
        f"{s.output_tokens_per_s_10s:.0f} {OUTPUT_TOKENS_PER_S.short}",
    )
    parts: list[Part] = [
        (9, f"[{fmt_duration(s.elapsed_s):>6}] {head}", f"{fmt_duration(s.elapsed_s)} {short_head}"),
        (8, rate, rate),
        (2, tokens, ""),
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
