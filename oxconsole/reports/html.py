"""The HTML report: one self-contained file (style inline, charts as inline SVG, no script).

Why this module exists: a run's results must be shareable with someone who has neither oxconsole
nor the network; `oxconsole report RESULTS.jsonl --html PATH` and `[output] html = true` both
write this page. It shows the summary's figures and the journal's figures over time; it never
shows a key, a header, an error's detail text or (unless asked) prompt and response text, because
it only reads the summary's numbers and the records' timings, counts and classes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oxconsole.base.figures import (
    COST,
    DRAWN,
    LATENCY,
    OUTPUT_TOKENS_PER_S,
    REQUESTS,
    REQUESTS_PER_S,
    TIMED,
    TTFOT,
    TTFT,
    Figure,
)
from oxconsole.base.units import change_text, fmt_money
from oxconsole.reports.media import media_section
from oxconsole.reports.plans import cost_by_plan, money_cell
from oxconsole.reports.quality import quality_section
from oxconsole.reports.reasoning import reasoning_section
from oxconsole.reports.server import server_section
from oxconsole.reports.steps import step_label, steps_section
from oxconsole.reports.summary import summary_from_journal
from oxconsole.reports.summarytable import AUTO_ROWS
from oxconsole.reports.svg import PALETTE, Line, Marker, distribution, fmt_num, line_chart, stacked_bars
from oxconsole.reports.sweepcurve import sweep_section
from oxconsole.reports.timeline import Timeline, build_timeline
from oxconsole.reports.trust import confidence_section

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = ["REPORT_NAME", "render_html", "write_compare_html", "write_html_report", "write_run_report"]

REPORT_NAME = "report.html"
"""What `[output] html = true` writes beside the journal."""

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2937;
  background: #f8fafc; margin: 0; }
main { max-width: 1580px; margin: 0 auto; padding: 20px 28px 40px; }
h1 { font-size: 22px; margin: 0 0 2px; } h2 { font-size: 17px; margin: 28px 0 8px;
  border-bottom: 1px solid #e2e8f0; padding-bottom: 4px; }
.meta, .note { color: #64748b; } .note { font-size: 13px; margin: 4px 0 10px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px;
  margin-top: 14px; }
.card { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 8px 12px; }
.card b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
.card span { color: #64748b; font-size: 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 12px; }
figure { margin: 0; background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 8px; }
figcaption { font-weight: 600; margin: 0 0 4px 4px; }
svg.chart { width: 100%; height: auto; display: block; font-size: 11px; fill: #475569; }
svg .grid { stroke: #eef2f7; } svg .axis { stroke: #94a3b8; }
svg .marker { stroke: #f59e0b; stroke-dasharray: 3 3; stroke-width: 1.2; }
svg .marker-label { fill: #b45309; font-size: 10.5px; } svg .unit { fill: #64748b; }
table { border-collapse: collapse; background: #fff; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eef2f7; text-align: right; }
th:first-child, td:first-child { text-align: left; } th { background: #f1f5f9; font-weight: 600; }
"""


def write_html_report(
    results: str | os.PathLike[str],
    out: str | os.PathLike[str],
    summary: Mapping[str, Any] | None = None,
    plans: Mapping[str, PricePlan] | None = None,
) -> Path:
    """Write the report of the journal ``results`` to ``out`` (whole, then renamed into place).

    ``summary`` is the run's own summary when the run writes its report (it has the changes and
    phases); without it the summary is rebuilt from the journal alone (priced under ``plans``).
    """
    s = summary if summary is not None else summary_from_journal(results, plans=plans)
    page = render_html(
        s,
        build_timeline(results),
        journal_only=summary is None,
        sweep=sweep_section(results),
        results=results,
    )
    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, dest)
    return dest


def write_run_report(results: Path, summary: Mapping[str, Any]) -> Path | None:
    """`[output] html = true`: `report.html` beside the journal at the end of a run, with the
    run's own summary (its changes and phases); a failure is a warning, never the run's end."""
    try:
        return write_html_report(results, results.parent / REPORT_NAME, summary)
    except OSError as e:
        print(f"oxconsole: warning: could not write {REPORT_NAME}: {e}", file=sys.stderr)
        return None


def render_html(
    summary: Mapping[str, Any],
    tl: Timeline,
    *,
    journal_only: bool,
    sweep: str = "",
    results: str | os.PathLike[str] | None = None,
) -> str:
    """The whole page as one string (``sweep``: a sweep's section, `reports/sweepcurve.py`; ``results``:
    the journal, whose server series beside it is drawn, `reports/server.py`)."""
    name = str(summary.get("name", ""))
    markers = _markers(summary)
    body = [
        _header(summary),
        confidence_section(summary),
        sweep,
        steps_section(summary),
        _section(
            "throughput",
            "Throughput over time",
            _note_changes(markers, journal_only, summary),
            _throughput(tl, markers),
        ),
        _section("latency-over-time", "Latency over time (p50 / p90 / p99)", "", _over_time(tl, markers)),
        _section("distributions", "Distributions (ok requests)", "", _distributions(summary, tl)),
        _section("models", "Models", "", [_model_table(summary.get("models") or {})]),
        reasoning_section(summary),
        media_section(summary),
        cost_by_plan(summary),
        quality_section(summary),
        _section("errors", "Errors", "", _errors(summary, tl, markers)),
        _server(summary, results, tl, markers) if results is not None else "",
        _phases(summary),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>oxconsole report: {escape(name)}</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>\n"
    )


def _section(sid: str, title: str, note: str, parts: Sequence[str]) -> str:
    inner = "".join(parts)
    note_html = f'<p class="note">{note}</p>' if note else ""
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{note_html}{inner}</section>'


def _figure(caption: str, svg: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{svg}</figure>"


def _g(d: Mapping[str, Any], *keys: str) -> Any:
    cur: Any = d
    for k in keys:
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return cur


def _v(s: Mapping[str, Any], f: Figure) -> float:
    """The figure's value in a summary block, 0 when it has none (a chart's or a card's)."""
    return f.value(s) or 0.0


_CARDS = (TTFT.at("p50"), TTFOT.at("p50"), LATENCY.at("p50"), LATENCY.at("p99"))
"""The timings the summary's cards show (each where the run has it)."""


def _header(s: Mapping[str, Any]) -> str:
    req = s.get("requests") or {}
    timings = [f for f in _CARDS if f.shown_in(s)]
    cards = [
        (REQUESTS.label, f"{req.get('total', 0):,}"),
        ("ok", f"{req.get('ok', 0):,}"),
        ("errors", f"{req.get('error', 0):,}"),
        (REQUESTS_PER_S.label, f"{_v(s, REQUESTS_PER_S):.2f}"),
        (OUTPUT_TOKENS_PER_S.name, fmt_num(_v(s, OUTPUT_TOKENS_PER_S))),
        *((f"{f.label} ({f.unit})", fmt_num(_v(s, f))) for f in timings),
        (COST.label, fmt_money(_v(s, COST))),
    ]
    card_html = "".join(
        f'<div class="card"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for k, v in cards
    )
    meta = f"started {s.get('started_at', '?')} · {float(s.get('duration_s') or 0):.1f} s"
    return (
        f'<header id="summary"><h1>{escape(str(s.get("name", "")))}</h1>'
        f'<div class="meta">{escape(meta)}</div><div class="cards">{card_html}</div></header>'
    )


def _markers(s: Mapping[str, Any]) -> list[Marker]:
    """A dashed rule per live change and stage; of the auto controller's changes only the first
    `AUTO_ROWS` (its search: holding, it probes every few seconds, which would fill the charts)."""
    out = []
    autos = 0
    for c in s.get("changes") or []:
        if c.get("what") == "stage":
            continue  # drawn below, with the stage's name
        if c.get("by") == "auto":
            autos += 1
            if autos > AUTO_ROWS:
                continue
        label = f"{change_text(c, arrow='→')}{step_label(s, c)}"  # rate 9.99/s→unlimited
        out.append(Marker(float(c.get("t") or 0.0), label))
    for st in s.get("stages") or []:
        if isinstance(st, Mapping) and "t" in st:
            out.append(Marker(float(st["t"]), f"stage {st.get('name', '')}".strip()))
    return out


def _note_changes(markers: list[Marker], journal_only: bool, summary: Mapping[str, Any]) -> str:
    if markers:
        note = "Dashed rules mark live changes (settings, stages); each starts a new phase."
        autos = sum(1 for c in summary.get("changes") or [] if c.get("by") == "auto")
        if autos > AUTO_ROWS:
            note += (
                f" Of auto concurrency's {autos} changes, the first {AUTO_ROWS} are drawn"
                " (holding, it probes every few seconds); the phases table has each."
            )
        return note
    if journal_only:
        return (
            "Made from the journal alone: live changes are not journaled, so no change markers "
            "(the report a run writes with <code>[output] html = true</code> has them)."
        )
    return "No live changes during this run."


_RATES = (
    (REQUESTS_PER_S, "Requests/s (ok)", f"ok {REQUESTS_PER_S.short}", "ok"),
    (OUTPUT_TOKENS_PER_S, "Output tokens/s", "tokens/s", "output_tokens"),
)
"""The throughput charts: the figure (its name labels the chart, its short name the unit), title,
line label, the timeline's counter."""


def _throughput(tl: Timeline, markers: list[Marker]) -> list[str]:
    xs, span = tl.times(), max(tl.span, tl.step)
    figs = [
        _figure(
            title,
            line_chart(
                f.name,
                xs,
                [Line(line, tl.rate(key), PALETTE[i])],
                x_max=span,
                y_unit=f.short,
                markers=markers,
            ),
        )
        for i, (f, title, line, key) in enumerate(_RATES)
    ]
    return ['<div class="charts">', *figs, "</div>"]


def _over_time(tl: Timeline, markers: list[Marker]) -> list[str]:
    xs, span = tl.times(), max(tl.span, tl.step)
    figs = []
    for f in TIMED:
        lines = [
            Line("p50", tl.percentile(f, 50), PALETTE[0]),
            Line("p90", tl.percentile(f, 90), PALETTE[4]),
            Line("p99", tl.percentile(f, 99), PALETTE[2], dashed=True),
        ]
        figs.append(
            _figure(
                f"{f.label} ({f.unit})",
                line_chart(f.label, xs, lines, x_max=span, y_unit=f.unit, markers=markers),
            )
        )
    return ['<div class="charts">', *figs, "</div>"]


def _distributions(s: Mapping[str, Any], tl: Timeline) -> list[str]:
    """Each of `DRAWN` the records carry and the run shows (a plain run's TTFOT is its TTFT:
    drawn once). Every run's timings keep their colours; the others take the next ones."""
    colors = dict(zip((*TIMED, *(f for f in DRAWN if f not in TIMED)), PALETTE, strict=False))
    figs = []
    for f in DRAWN:
        if f.key not in tl.whole or not f.shown_in(s):
            continue
        color = colors[f]
        marks = [(q, _v(s, f.at(q))) for q in ("p50", "p90", "p99")]
        chart = distribution(f.label, tl.whole[f.key].bins(32), color, marks)
        figs.append(_figure(f"{f.label} ({f.unit})", chart))
    return ['<div class="charts">', *figs, "</div>"]


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


_MODEL_TIMINGS = (TTFT.at("p50"), TTFT.at("p99"), LATENCY.at("p50"), LATENCY.at("p99"))


def _model_table(models: Mapping[str, Any]) -> str:
    rows = []
    for name, m in models.items():
        r = m.get("requests") or {}
        rows.append(
            [
                str(name),
                f"{r.get('total', 0):,}",
                f"{r.get('ok', 0):,}",
                f"{r.get('error', 0):,}",
                f"{_v(m, REQUESTS_PER_S):.2f}",
                fmt_num(_v(m, OUTPUT_TOKENS_PER_S)),
                *(fmt_num(_v(m, f)) for f in _MODEL_TIMINGS),
                fmt_money(_v(m, COST)),
            ]
        )
    head = [
        "model",
        REQUESTS.label,
        "ok",
        "error",
        REQUESTS_PER_S.short,
        OUTPUT_TOKENS_PER_S.short,
        *(f.label for f in _MODEL_TIMINGS),
        COST.label,
    ]
    return _table(head, rows) if rows else '<p class="note">No requests.</p>'


def _errors(s: Mapping[str, Any], tl: Timeline, markers: list[Marker]) -> list[str]:
    errors = s.get("errors") or {}
    attempts = s.get("attempt_errors") or {}
    if not errors and not attempts:
        return ['<p class="note">No errors.</p>']
    classes = tl.error_classes()
    stacks = [
        Line(
            c,
            [tl.per_second(i, slot.errors.get(c, 0)) for i, slot in enumerate(tl.slots)],
            PALETTE[(k + 2) % 8],
        )
        for k, c in enumerate(classes)
    ]
    out = []
    if stacks:  # in the grid like every chart, so its text is at their size
        out.append('<div class="charts">')
        out.append(
            _figure(
                "Errors/s by class (requests that ended in error)",
                stacked_bars(
                    "errors/s",
                    tl.times(),
                    tl.step,
                    stacks,
                    x_max=max(tl.span, tl.step),
                    y_unit="err/s",
                    markers=markers,
                ),
            )
        )
        out.append("</div>")
    rows = [
        [k, f"{int(errors.get(k, 0)):,}", f"{int(attempts.get(k, 0)):,}"]
        for k in sorted({*errors, *attempts})
    ]
    out.append(_table(["class", "requests ended", "attempts retried"], rows))
    return out


def _server(
    summary: Mapping[str, Any], results: str | os.PathLike[str], tl: Timeline, markers: list[Marker]
) -> str:
    """The server's charts on the journal's time slots (`reports/server.py`)."""
    return server_section(
        summary, results, tl.times(), tl.t0, tl.step, max(tl.span, tl.step), tl.in_flight(), markers
    )


_PHASE_TIMINGS = (LATENCY.at("p50"), LATENCY.at("p99"), TTFT.at("p50"))


def _phases(s: Mapping[str, Any]) -> str:
    phases = s.get("phases") or []
    if len(phases) <= 1:
        return ""
    rows = []
    for ph in phases:
        what = (
            ", ".join(
                f"stage {c.get('to', 0) + 1}" if c.get("what") == "stage" else change_text(c, arrow="→")
                for c in ph.get("settings") or []
            )
            or "start"
        )
        rows.append(
            [
                f"{float(ph.get('t_start') or 0):.1f}–{float(ph.get('t_end') or 0):.1f} s",
                f"{int(_g(ph, 'requests', 'ok') or 0):,}",
                f"{_v(ph, REQUESTS_PER_S):.2f}",
                *(fmt_num(_v(ph, f)) for f in _PHASE_TIMINGS),
                _settled(ph),
                what,
            ]
        )
    head = ["phase", "ok", REQUESTS_PER_S.short, *(f.label for f in _PHASE_TIMINGS), "settled", "changed"]
    return _section("phases", "Phases", "", [_table(head, rows)])


def _settled(ph: Mapping[str, Any]) -> str:
    """When a phase settled (seconds after it began), "no", or "-" for a summary without it."""
    at = ph.get("settled_at_s")
    if isinstance(at, int | float):
        return f"at {at:.1f} s"
    return "no" if "ci" in ph else "-"


def write_compare_html(c: Mapping[str, Any], out: str | os.PathLike[str]) -> Path:
    """`oxconsole report A.jsonl B.jsonl --html PATH`: the comparison as one self-contained page:
    the figures' table, then the runs' distributions and time series overlaid (`overlay.py`)."""
    from oxconsole.reports.overlay import compare_charts

    names = [str(r.get("label") or r["name"] or r["path"]) for r in c["runs"]]
    head = ["figure", names[0]]
    for n in names[1:]:
        head += [n, "Δ%"]
    rows = []
    for row in c["figures"]:
        num = money_cell if str(row["figure"]).startswith("cost") else _num
        cells = [str(row["label"]), num(row["values"][0])]
        for v, d, noise in zip(row["values"][1:], row["delta_pct"][1:], row["within_noise"][1:], strict=True):
            mark = " ~" if noise else " *" if noise is False else ""
            cells += [num(v), "-" if d is None else f"{d:+.1f}%{mark}"]
        rows.append(cells)
    note = (
        f"Δ% against {escape(names[0])}. ~ within noise ({c['confidence']:.0%} bootstrap intervals overlap), "
        "* beyond it."
    )
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>oxconsole compare</title><style>{CSS}</style></head><body><main>"
        f'<section id="compare"><h1>Compared runs</h1><p class="note">{note}</p>'
        f"{_table(head, rows)}{_trials_said(c)}</section>"
        f"{compare_charts([r['path'] for r in c['runs']], names)}"
        "</main></body></html>\n"
    )
    dest = Path(out)
    dest.write_text(page, encoding="utf-8")
    return dest


def _trials_said(c: Mapping[str, Any]) -> str:
    """The comparison of the runs' trials, in words (none unless two runs had trials)."""
    said = c.get("trials") or []
    if not said:
        return ""
    items = "".join(f"<li>{escape(str(t))}</li>" for t in said)
    return f"<h3>Over the trials (95% t-intervals of each run's trials)</h3><ul>{items}</ul>"


def _num(v: Any) -> str:
    return "-" if v is None else f"{float(v):,.2f}"
