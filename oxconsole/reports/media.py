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

from oxconsole.base.units import fmt_num
from oxconsole.metrics.media import MEDIA_TOTALS, has_media

__all__ = ["FIGURES", "media_figures", "media_rows", "media_section", "media_summary_lines"]

FIGURES: tuple[tuple[str, str], ...] = (
    ("media.per_s.images_in", "images in/s"),
    ("media.per_s.images_out", "images out/s"),
    ("media.per_s.audio_in_s", "audio in s/s"),
    ("media.per_s.audio_out_s", "audio out s/s"),
    ("media.per_s.documents", "documents/s"),
    ("media.rtf.p50", "RTF p50"),
    ("media.rtf.p99", "RTF p99"),
)
"""The figures `report A B ...` adds for runs with media (labels fit its 16 columns)."""

_WORDS = {
    "images_in": ("images in", "", 0),
    "image_pixels": ("pixels in", "", 0),
    "audio_in_s": ("audio in", " s", 1),
    "audio_out_s": ("audio out", " s", 1),
    "images_out": ("images out", "", 0),
    "documents": ("documents", "", 0),
}
"""Each total's words in the text summary: label, unit, decimals."""


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _at(s: Mapping[str, Any], dotted: str) -> float | None:
    cur: Any = s
    for k in dotted.split("."):
        cur = cur.get(k) if isinstance(cur, Mapping) else None
    return _num(cur)


def media_figures(s: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures a comparison adds for a run (none for a run without media)."""
    if not has_media(s):
        return {}
    return {key: _at(s, key) for key, _ in FIGURES}


def media_rows(runs: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(figure, label) rows of the kinds any compared run has (a figure no run has is left out)."""
    runs = list(runs)
    return tuple((k, label) for k, label in FIGURES if any(r.get(k) for r in runs))


def media_summary_lines(s: Mapping[str, Any]) -> list[str]:
    """The text summary's media line (none without media): each total present, with its rate,
    then the real-time factor: `media     images in 12 (2.40/s)  audio in 45.0 s (9.00 s/s)  RTF
    p50 0.12 p99 0.31`."""
    m = s.get("media")
    if not isinstance(m, Mapping):
        return []
    per_s = m.get("per_s") if isinstance(m.get("per_s"), Mapping) else {}
    parts = []
    for key in MEDIA_TOTALS:
        v = _num(m.get(key))
        if not v:
            continue
        label, unit, decimals = _WORDS[key]
        rate = _num(per_s.get(key)) if isinstance(per_s, Mapping) else None
        shown = f"{v:,.{decimals}f}{unit}"
        parts.append(f"{label} {shown}" + (f" ({fmt_num(rate, 2)}{unit}/s)" if rate else ""))
    rtf = m.get("rtf") if isinstance(m.get("rtf"), Mapping) else {}
    if isinstance(rtf, Mapping) and _num(rtf.get("p50")) is not None:
        parts.append(f"RTF p50 {fmt_num(rtf.get('p50'), 2)} p99 {fmt_num(rtf.get('p99'), 2)}")
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
    m = s.get("media") or {}
    rtf = m.get("rtf") or {}
    return [
        name,
        *(fmt_num(_num(m.get(k)), 1 if k.endswith("_s") else 0) for k in MEDIA_TOTALS),
        fmt_num(_num(rtf.get("p50")), 3),
        fmt_num(_num(rtf.get("p99")), 3),
    ]


def media_section(s: Mapping[str, Any]) -> str:
    """The HTML report's "Images, audio and documents" section: the run and each model with media
    (empty for a run without them)."""
    if not has_media(s):
        return ""
    head = ["", "images in", "pixels in", "audio in s", "audio out s", "images out", "documents",
            "RTF p50", "RTF p99"]  # fmt: skip
    rows = [_row("whole run", s)]
    models = s.get("models") or {}
    rows += [_row(str(n), m) for n, m in models.items() if isinstance(m, Mapping) and has_media(m)]
    rates = s["media"].get("per_s") or {}
    per_s = ", ".join(
        f"{_WORDS[k][0]} {fmt_num(_num(rates.get(k)), 2)}{_WORDS[k][1]}/s"
        for k in MEDIA_TOTALS
        if _num(rates.get(k))
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
