"""Every kind of model in the shareable reports: the text summary's media line, the HTML report's
section, and the compared runs' figures.

Why this module exists: a run of vision, speech or transcription models is read in images and
seconds of audio, not only in requests; the summary holds them (`media`: totals, `per_s`, `rtf`,
per model), and every report shows them only for runs that have them, so a text run's report is
unchanged. The figures and their labels are listed once here (`FIGURES`) for the three readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from oxconsole.base.figures import MEDIA_COMPARED, MEDIA_TOTALS, RTF, Figure
from oxconsole.base.units import fmt_num
from oxconsole.metrics.media import has_media

__all__ = ["FIGURES", "media_figures", "media_rows", "media_section", "media_summary_lines"]

FIGURES: tuple[tuple[str, str], ...] = tuple((f.key, f.label) for f in MEDIA_COMPARED)
"""The figures `report A B ...` adds for runs with media, as `oxconsole.base.figures` declares
them (labels fit its 16 columns)."""

RTF_SHOWN = (RTF.at("p50"), RTF.at("p99"))


def _decimals(f: Figure) -> int:
    """Seconds of audio to a tenth, counts whole."""
    return 1 if f.unit == "s" else 0


def _unit(f: Figure) -> str:
    return f" {f.unit}" if f.unit else ""


def media_figures(s: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures a comparison adds for a run (none for a run without media)."""
    if not has_media(s):
        return {}
    return {f.key: f.value(s) for f in MEDIA_COMPARED}


def media_rows(runs: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(figure, label) rows of the kinds any compared run has (a figure no run has is left out)."""
    runs = list(runs)
    return tuple((k, label) for k, label in FIGURES if any(r.get(k) for r in runs))


def media_summary_lines(s: Mapping[str, Any]) -> list[str]:
    """The text summary's media line (none without media): each total present, with its rate,
    then the real-time factor: `media     images in 12 (2.40/s)  audio in 45.0 s (9.00 s/s)  RTF
    p50 0.12 p99 0.31`."""
    if not has_media(s):
        return []
    parts = []
    for f in MEDIA_TOTALS:
        v = f.value(s)
        if not v:
            continue
        unit = _unit(f)
        rate = f.per_second().value(s)
        shown = f"{v:,.{_decimals(f)}f}{unit}"
        parts.append(f"{f.label} {shown}" + (f" ({fmt_num(rate, 2)}{unit}/s)" if rate else ""))
    p50, p99 = (q.value(s) for q in RTF_SHOWN)
    if p50 is not None:
        parts.append(f"{RTF.label} p50 {fmt_num(p50, 2)} p99 {fmt_num(p99, 2)}")
    if not parts:
        return []
    lines: list[str] = []
    line = "media     " + parts[0]
    for part in parts[1:]:  # wrapped at the table's 80 columns, continued under the first part
        if len(line) + 2 + len(part) > 80:
            lines.append(line)
            line = " " * 10 + part
        else:
            line += "  " + part
    return [*lines, line]


def _row(name: str, s: Mapping[str, Any]) -> list[str]:
    return [
        name,
        *(fmt_num(f.value(s), _decimals(f)) for f in MEDIA_TOTALS),
        *(fmt_num(q.value(s), 3) for q in RTF_SHOWN),
    ]


def media_section(s: Mapping[str, Any]) -> str:
    """The HTML report's "Images, audio and documents" section: the run and each model with media
    (empty for a run without them)."""
    if not has_media(s):
        return ""
    head = ["", *(f.header for f in (*MEDIA_TOTALS, *RTF_SHOWN))]
    rows = [_row("whole run", s)]
    models = s.get("models") or {}
    rows += [_row(str(n), m) for n, m in models.items() if isinstance(m, Mapping) and has_media(m)]
    per_s = ", ".join(
        f"{f.label} {fmt_num(rate, 2)}{_unit(f)}/s" for f in MEDIA_TOTALS if (rate := f.per_second().value(s))
    )
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    note = (
        "Totals of the requests that ended ok. RTF (real-time factor) is a request's latency over "
        "its audio's seconds: the audio sent for a transcription, the audio received for speech; "
        f"below 1 is faster than real time. Per second over the run: {per_s or 'none'}."
    )
    return (
        '<section id="media"><h2>Images, audio and documents</h2>'
        f'<p class="note">{escape(note)}</p><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody>'
        "</table></section>"
    )
