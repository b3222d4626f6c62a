"""The console's burst figures: the last step's penalty and recovery, and the schedule's lag.

Why this module exists: a burst's cost is what the user is watching for as it happens (did the
step to 300 hurt, is it over yet?), and an open-loop run's sends against their due times say
whether the client keeps up. Two lines in the in-flight panel, each shown only when the run has
that figure (`Snapshot.bursts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oxconsole.metrics.due import BEHIND_SHARE
from oxconsole.metrics.stepresponse import no_penalty
from oxconsole.ui.lines import Line, Palette
from oxconsole.ui.numbers import ms

__all__ = ["burst_lines"]


def burst_lines(
    bursts: Mapping[str, Any] | None, p: Palette, label: Callable[[str], Line], width: int = 80
) -> list[Line]:
    """ "step" (the last step: from → to, when, the TTFT penalty, its recovery or "recovering"),
    shortened to fit `width` columns, and "sched" (p50 and p99 of sends behind their due time, the
    share within 10 ms): 30 columns."""
    if not bursts:
        return []
    lines = []
    step = bursts.get("step")
    if isinstance(step, Mapping):
        t = label("step")
        lines.append(_step_line(step, p, t, width - len(t)))
    lag = bursts.get("lag")
    if isinstance(lag, Mapping):
        t = label("sched")
        share = float(lag.get("within_10ms") or 0.0)
        t.append(f"p50 {ms(lag.get('p50', 0.0))} p99 {ms(lag.get('p99', 0.0))} ")
        t.append(f"{100 * share:.0f}% on", style=p.warning if share < BEHIND_SHARE else "")
        t.append(" time" if len(t) < 32 else "", style=p.muted)
        lines.append(t)
    return lines


def _secs(v: float) -> str:
    return f"{v / 1000:.1f}s" if abs(v) >= 1000 else f"{v:.0f}ms"


def _step_line(st: Mapping[str, Any], p: Palette, t: Line, room: int) -> Line:
    """The step in the first of its forms that fits `room` columns: in full (`10→300 @30s +1.8s
    ok in 12s`), then "ok 12s", then without the step's time; a step line is never clipped."""
    frm, to = st.get("from"), st.get("to")
    what = "" if st.get("what") == "concurrency" else "rate "
    nums = isinstance(frm, int | float) and isinstance(to, int | float)
    head = f"{what}{frm:g}→{to:g}" if nums else "?"
    when = f" @{float(st.get('t') or 0.0):.0f}s"
    pen = st.get("penalty_ms")
    if not isinstance(pen, int | float):
        return t.append(head).append(f"{when} measuring", style=p.muted)
    if no_penalty(st):
        return t.append(head).append(f"{when} ", style=p.muted).append("no penalty", style=p.success)
    rec = st.get("recovery_s")
    done = isinstance(rec, int | float)
    secs = "" if not isinstance(rec, int | float) else f"{rec:.0f}s" if rec >= 10 else f"{rec:.1f}s"
    forms = [(when, " ok in "), (when, " ok "), ("", " ok ")]
    at, ok = next((f for f in forms if _width(head, f, pen, secs) <= room), forms[-1])
    t.append(head).append(f"{at} ", style=p.muted).append(f"+{_secs(pen)}", style=f"bold {p.warning}")
    return t.append(f"{ok}{secs}") if done else t.append(" recovering", style=p.warning)


def _width(head: str, form: tuple[str, str], pen: float, secs: str) -> int:
    """Columns of a step line in that form (the words after the label)."""
    tail = f"{form[1]}{secs}" if secs else " recovering"
    return len(head) + len(form[0]) + len(f" +{_secs(pen)}") + len(tail)
