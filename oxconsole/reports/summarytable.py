"""The run summary as the 80-column text table a headless run prints and `report` shows.

Why this module exists: the table is read by a person at the end of every headless run and of
`oxconsole report`, from the summary dict alone (a live run's or one rebuilt from a journal); what
it shows and how it fits 80 columns (or a wider terminal) without cutting a name or a figure is a
concern of its own, apart from reading journals
(`summary.py`).
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping
from typing import Any, TextIO

from oxconsole.base.figures import (
    BLOCK_KEYS,
    COST,
    ERRORS,
    LATENCY,
    OK,
    OUTPUT_TOKENS_PER_S,
    QUEUE,
    REQUESTS,
    REQUESTS_PER_S,
    SCHEDULE_LAG,
    TABLED,
    TOKENS_IN,
    TOKENS_OUT,
    Column,
    nested,
)
from oxconsole.base.safetext import shown
from oxconsole.base.units import NONE, change_text, cut, fmt_count, fmt_duration, fmt_money, fmt_num
from oxconsole.metrics.goodput import goodput_lines
from oxconsole.metrics.packing import packing_lines
from oxconsole.metrics.plans import at_pace, cheapest
from oxconsole.metrics.quality import has_cascade, quality_lines
from oxconsole.metrics.ratelimit import ratelimit_lines
from oxconsole.metrics.reasoning import summary_lines
from oxconsole.metrics.stages import SPAN_COLUMNS, span_cells, span_head, stage_table
from oxconsole.metrics.stepresponse import step_lines
from oxconsole.reports.media import media_summary_lines
from oxconsole.reports.server import server_lines
from oxconsole.reports.trust import confidence_lines, trials_lines

__all__ = ["AUTO_ROWS", "UNCUT", "WIDTH", "render_summary", "table_width"]

WIDTH = 80
UNCUT = 100_000
"""The width of a table written to a file or a pipe: its lines are as long as they need, nothing
cut and nothing wrapped (a file has no width, and `grep` finds a whole row)."""


def _g(d: Mapping[str, Any], *keys: str) -> Any:
    cur: Any = d
    for k in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(k)
    return cur


def render_summary(summary: Mapping[str, Any], width: int = WIDTH) -> str:
    """The summary as a plain-text table, no line longer than ``width`` columns and no figure or
    name cut: a longer line wraps (a list of error classes, a model's name on a row of its own);
    only the heading is cut (its run name and start are whole in the JSON)."""
    s = summary
    models = _in_order(s.get("models") or {})
    lines = _totals_lines(s, width)
    lines += packing_lines(dict(s))
    lines += quality_lines(s)
    lines += _timing_lines(s)
    lines += trials_lines(s)
    lines += _model_lines(models, width)
    lines += _fallback_lines(models)
    lines += _error_lines(s.get("errors") or {}, s.get("attempt_errors") or {})
    lines += _error_detail_lines(s.get("error_details") or {}, width)
    lines += _plan_lines(s)
    lines += ratelimit_lines(s)
    lines += server_lines(s)
    phases = _phase_lines(s.get("phases") or [], s.get("changes") or [], width)
    stages = stage_table(s.get("stages") or [], s.get("stages_end"))
    lines += phases + stages
    if phases and stages:  # the same span counts different requests in each: say why
        lines.append(BY_TIME)
    lines += step_lines(s.get("steps") or [])
    # every name in it (a model, an error class, a change, a stage, a plan) came from a workload or
    # a journal: shown as text, each control character written out, never a terminal command
    safe = (shown(line.rstrip(), one_line=True) for line in lines)
    return "\n".join(out for line in safe for out in _wrap(line, width)) + "\n"


def table_width(stream: TextIO) -> int:
    """The columns a table may take on ``stream``: a terminal's width (80 at least, `COLUMNS`
    honoured; a longer line wraps, it is never cut), else `UNCUT` (a file: no line wraps)."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns) if tty else UNCUT


def _wrap(line: str, width: int) -> list[str]:
    """``line`` in lines of at most ``width`` columns, the rest under the figures' column (10);
    a word longer than the width stays whole."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(
        line, width, subsequent_indent=" " * 10, break_on_hyphens=False, break_long_words=False
    ) or [line]


def _in_order(models: Mapping[str, Any]) -> dict[str, Any]:
    """The models by name: the run's own summary and one rebuilt from its journal (which meet
    the models in a different order) list them alike."""
    return {shown(str(name), one_line=True): models[name] for name in sorted(models, key=str)}


def _totals_lines(s: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """Name, duration and start; requests, rates, tokens (how many estimated) and cost."""
    req = s.get("requests") or {}
    src = s.get("tokens_source") or {}
    estimated = " (estimated)" if src.get("estimate") else ""
    if src.get("estimate") and src.get("usage"):
        estimated = f" ({src['estimate']} of {src['estimate'] + src['usage']} estimated)"
    title = f"{s.get('name', '')}  ·  {fmt_duration(float(s.get('duration_s') or 0.0), 1)}"
    if (req.get("sessions") or 1) > 1:
        title += f" over {req['sessions']} sessions"
    if s.get("started_at"):
        title += f"  ·  started {s['started_at']}"
    not_sent = req.get("not_sent", 0)
    unsent = f"  {not_sent:,} not sent" if not_sent else "  stopped early" if not_sent is None else ""
    return [
        cut(title, width),  # the heading: its name and start are whole in the JSON (and a file)
        *_not_saved_lines(s),
        (
            f"requests  {req.get('total', 0):,} total  {req.get('ok', 0):,} ok  "
            f"{req.get('error', 0):,} error  {req.get('retried', 0):,} retried"
            + (f"  {req['cancelled']:,} cancelled" if req.get("cancelled") else "")
            + unsent
            + (f"  {req['fallbacks']:,} fell back" if req.get("fallbacks") else "")
        ),
        (
            f"rate      {fmt_num(REQUESTS_PER_S.of(s), 2)} "
            f"{'tasks/s' if s.get('packing') else REQUESTS_PER_S.short}  " + _token_rate(s)
        ),
        *goodput_lines(s),
        f"tokens    {_tokens(s)}{estimated}",
        *summary_lines(s),
        *media_summary_lines(s),
        f"cost      {COST.text(COST.of(s))}",
        *confidence_lines(s),
    ]


def _tokens(s: Mapping[str, Any]) -> str:
    return "  ".join(f"{f.short} {f.of(s) or 0:,}" for f in (TOKENS_IN, TOKENS_OUT))


def _token_rate(s: Mapping[str, Any]) -> str:
    """Output tokens/s; for a run that answers none (embeddings), the input tokens/s it read."""
    inputs, seconds = TOKENS_IN.of(s) or 0, s.get("duration_s") or 0
    if not TOKENS_OUT.of(s) and inputs and seconds > 0 and OK.of(s):
        return f"{fmt_num(inputs / seconds, 1)} input tok/s"
    return f"{fmt_num(OUTPUT_TOKENS_PER_S.of(s), 1)} {OUTPUT_TOKENS_PER_S.label}"


def _not_saved_lines(s: Mapping[str, Any]) -> list[str]:
    """A run whose journal failed says so before any figure (`saved: false`)."""
    if s.get("saved") is not False:
        return []
    return [
        "NOT SAVED: the results journal could not be written; the run stopped at once.",
        f"  {s.get('save_error')}",
        "  The figures below count only the requests written to the journal.",
    ]


def _timing_lines(s: Mapping[str, Any]) -> list[str]:
    """The latency table (10 + 6 * 11 = 76 columns), then the client's own loop lag and GC."""
    lines = [""]
    lines.append(f"{'ms':<10}" + "".join(f"{c:>11}" for c in BLOCK_KEYS))
    for fig in (f for f in TABLED if f.shown_in(s)):
        row = fig.of(s) or {}
        lines.append(f"{fig.label:<10}" + "".join(f"{fmt_num(row.get(c), 1):>11}" for c in BLOCK_KEYS))
        if fig is LATENCY and has_cascade(s):  # the answer's time, beside the last step's
            answer = LATENCY.of(s.get("quality") or {}) or {}
            lines.append(f"{'answer':<10}" + "".join(f"{fmt_num(answer.get(c), 1):>11}" for c in BLOCK_KEYS))
    if has_cascade(s):
        lines.append("TTFT/ITL/latency: the last step's request; answer: first request to the answer")
    if SCHEDULE_LAG.key not in s and (QUEUE.of(s) or {}).get("p99"):  # a closed loop
        lines.append(CLOSED_QUEUE)
    lag = s.get("loop_lag_ms")
    if lag:
        # the client's own event-loop lag: every timing above may include up to this much
        lines.append(
            f"client loop lag  p50 {fmt_num(lag.get('p50'), 1)}  p99 {fmt_num(lag.get('p99'), 1)}  "
            f"max {fmt_num(lag.get('max'), 1)} ms (timings above may include it)"
        )
    gcs = s.get("gc")
    if gcs and gcs.get("collections"):
        lines.append(
            f"client GC        {gcs['collections']} collections, {fmt_num(gcs.get('pause_ms'), 1)} ms "
            "of pauses (cycles from failures)"
        )
    return lines


MODEL_COLUMNS: tuple[Column, ...] = (
    Column(REQUESTS, 7),
    Column(OK, 7),
    Column(ERRORS, 6),
    *SPAN_COLUMNS[1:],
    Column(COST, 9),
)
"""A model's row after its name: what a span's row has (`metrics/stages.py`) and its totals."""

MODEL_FIGURES = sum(c.width for c in MODEL_COLUMNS)
"""Columns of a model's row after its name: 7 + 7 + 6 + 8 + 9 + 9 + 9 + 9 = 64."""

BY_TIME = "phases count a request when it ended, stages when it was sent"
"""Under a run's phase and stage tables: a request sent in one stage may end in the next phase,
so a stage and the phase over the same span count different requests."""

CLOSED_QUEUE = "queue: the next request waiting for a free slot (closed loop), or for the rate"
"""Under a closed loop's timings: its next request is read ahead and always waits for a free
slot, so its queue time is the concurrency limit at work (and the rate's or token budget's wait,
when set), not a sign that the client holds the run back."""


def _model_lines(models: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """One row per model: the name column as wide as the longest name when the row still fits
    ``width`` (16 at least: 16 + 64 = 80), else a name that does not fit on a row of its own above
    its figures. A name is never cut: two models may differ only at its end."""
    if not models:
        return []
    col = max(16, max(len(name) for name in models) + 1)
    if col + MODEL_FIGURES > width:
        col = 16
    lines = ["", f"{'model':<{col}}" + "".join(c.title() for c in MODEL_COLUMNS)]
    for name, m in models.items():
        figures = "".join(c.cell(m) for c in MODEL_COLUMNS)
        if len(name) < col:
            lines.append(f"{name:<{col}}{figures}")
        else:
            lines += [name, " " * col + figures]
    return lines


def _fallback_lines(models: Mapping[str, Any]) -> list[str]:
    """Which models requests fell back from, and how many (they are counted where they ended)."""
    left = [(str(name), _g(m, "requests", "fallbacks")) for name, m in models.items()]
    left = [(name, n) for name, n in left if isinstance(n, int) and n]
    if not left:
        return []
    return ["fell back from  " + "  ".join(f"{name} {n:,}" for name, n in left)]


def _error_lines(errors: Mapping[str, Any], attempts: Mapping[str, Any]) -> list[str]:
    """Final errors by class, then attempts retried by class."""
    lines: list[str] = []
    if errors or attempts:
        lines.append("")
    if errors:
        lines.append("errors    " + "  ".join(f"{k} {v:,}" for k, v in errors.items()))
    if attempts:
        lines.append("retried   " + "  ".join(f"{k} {v:,}" for k, v in attempts.items()) + " (attempts)")
    return lines


def _error_detail_lines(details: Mapping[str, Any], width: int = WIDTH) -> list[str]:
    """The first detail of each error class, wrapped (not cut) to 80 columns: the hint that says
    why (``is base_url ... missing /v1?``) is often at the end."""
    lines: list[str] = []
    for cls, detail in details.items():
        lead = "detail    " if not lines else " " * 10
        lines += textwrap.wrap(
            shown(f"{cls}: {detail}", one_line=True),  # a server's words, never its terminal commands
            width,
            initial_indent=lead,
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
    return lines


AUTO_ROWS = 6
"""Phases started by the auto controller shown one per row, in a run of them, before the rest of
that run is folded into one row (holding, auto probes a step up every few seconds: an hour would
be hundreds of rows). The summary JSON keeps every phase."""


def _phase_lines(phases: list[Any], changes: list[Any], width: int = WIDTH) -> list[str]:
    """One row per phase with what started it (15 + 7 + 8 + 9 + 9 + 9 = 57 columns, the rest for
    what changed, wrapped in its column); a long run of auto's phases folded after `AUTO_ROWS`;
    with changes but one phase, the list of changes."""
    if changes and len(phases) > 1:
        lines = ["", f"{'phase':<15}{span_head()}  changed"]
        for group in _fold_auto(phases):
            first, last = group[0], group[-1]
            span = f"{fmt_num(first.get('t_start'), 1)}-{fmt_num(last.get('t_end'), 1)}s"
            if len(group) == 1:
                what = ", ".join(change_text(c) for c in first.get("settings") or []) or "start"
                figures = span_cells(first)
            else:  # percentiles of several phases do not add up: none shown, the JSON has each
                what = _folded_text(group)
                figures = span_cells(_folded(group))
            row = f"{cut(span, 14):<15}{figures}  "
            wrapped = textwrap.wrap(what, width - len(row), break_on_hyphens=False) or [""]
            lines.append(row + wrapped[0])
            lines += [" " * len(row) + more for more in wrapped[1:]]
        return lines
    if changes:
        return ["", "changes", *(f"  {fmt_num(c.get('t'), 1):>8}s  {change_text(c)}" for c in changes)]
    return []


def _folded(group: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A run of phases as one span's block: its ok requests and their rate over its wall time."""
    ok = sum(int(OK.of(ph) or 0) for ph in group)
    wall = float(group[-1].get("t_end") or 0) - float(group[0].get("t_start") or 0)
    rate = ok / wall if wall > 0 else None
    return nested(((OK, ok), (REQUESTS_PER_S, rate)))


def _by_auto(ph: Mapping[str, Any]) -> bool:
    settings = ph.get("settings") or []
    return bool(settings) and all(isinstance(c, Mapping) and c.get("by") == "auto" for c in settings)


def _fold_auto(phases: list[Any]) -> list[list[Mapping[str, Any]]]:
    """The phases as rows: one phase each, except that a run of more than `AUTO_ROWS` + 1 phases
    started by auto shows its first `AUTO_ROWS` and then the rest as one row."""
    rows: list[list[Mapping[str, Any]]] = []
    run: list[Mapping[str, Any]] = []

    def flush() -> None:
        head, rest = run[:AUTO_ROWS], run[AUTO_ROWS:]
        rows.extend([ph] for ph in (run if len(rest) < 2 else head))
        if len(rest) >= 2:
            rows.append(list(rest))
        run.clear()

    for ph in phases:
        if not isinstance(ph, Mapping):
            continue
        if _by_auto(ph):
            run.append(ph)
            continue
        flush()
        rows.append([ph])
    flush()
    return rows


def _folded_text(group: list[Mapping[str, Any]]) -> str:
    """What a folded run of auto's phases did: how many changes, the range each setting took,
    and where it ended, e.g. "auto, 27 changes: concurrency 10-11, 10 at the end"."""
    seen: dict[str, list[Any]] = {}
    for ph in group:
        for c in ph.get("settings") or []:
            seen.setdefault(str(c.get("what")), []).append(c.get("to"))
    parts = []
    for what, values in seen.items():
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if nums and min(nums) != max(nums):
            parts.append(f"{what} {_plain(min(nums))}-{_plain(max(nums))}, {_plain(values[-1])} at the end")
        else:
            parts.append(f"{what} {_plain(values[-1])}")
    return f"auto, {len(group)} changes: " + "; ".join(parts)


def _plain(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _count(v: Any) -> str:
    try:
        return fmt_count(int(v))
    except (TypeError, ValueError):
        return NONE


def _actual_projected(s: Mapping[str, Any]) -> float | None:
    req = s.get("requests") or {}
    total = float((s.get("cost") or {}).get("total") or 0.0)
    not_sent = req.get("not_sent", 0)
    return at_pace(total, int(req.get("total") or 0), None if not_sent is None else int(not_sent))


def _plan_lines(s: Mapping[str, Any]) -> list[str]:
    """The plans block of the summary table (16 + 4 * 14 = 72 columns): the actual prices first,
    then each plan; `*` marks the cheapest projected (else total)."""
    cost = s.get("cost") or {}
    plans = cost.get("plans")
    if not plans:
        return []
    rows: list[tuple[str, float, float, float | None]] = [
        ("actual", float(cost.get("total") or 0.0), float(cost.get("per_task") or 0.0), _actual_projected(s))
    ]
    for name, p in plans.items():
        pr = p.get("projected")
        rows.append((str(name), float(p["total"]), float(p["per_task"]), None if pr is None else float(pr)))
    key = {n: (pr if pr is not None else t) for n, t, _, pr in rows}
    best = cheapest(key)
    lines = ["", f"{'plan':<16}{'total':>14}{'per task':>14}{'projected':>14}{'vs actual':>14}"]
    base = rows[0][1]
    for name, total, unit, pr in rows:
        vs = "" if name == "actual" or not base else f"{100.0 * (total - base) / base:+.0f}%"
        mark = " *" if name == best and len(rows) > 1 else ""
        money = "".join(f"{fmt_money(v):>14}" for v in (total, unit, pr))
        lines.append(f"{cut(name, 15):<16}{money}{vs:>14}{mark}".rstrip())
    lines.append("actual: the models' own prices; plans: the same requests elsewhere; * cheapest")
    return lines
