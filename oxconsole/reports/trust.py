"""How far to trust a summary's figures, in words: the steady window, settled and the 95%
intervals, and the trials' spread; for the summary table, the HTML report and `report A B`.

Why this module exists: the three places that show a summary read the same blocks (`steady`,
`settled_at_s` and `ci`, `trials`: docs/statistics.md) and must say them alike; what each figure
is called and how it is written is decided here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from oxconsole.base.figures import STATISTICS, Figure
from oxconsole.base.units import fmt_num
from oxconsole.metrics.spread import TRIAL_FIGURES, overlap

__all__ = [
    "STAT_FIGURES",
    "confidence_lines",
    "confidence_section",
    "interval_text",
    "steady_text",
    "trial_rows",
    "trials_lines",
    "trials_verdicts",
]

STAT_FIGURES: dict[str, Figure] = {f.key: f for f in STATISTICS}
"""The figures the `ci` and `trials` blocks hold (summary keys), with their labels and units."""


def _decimals(key: str) -> int:
    return 2 if key.startswith("throughput") else 1


def interval_text(key: str, ci: Any) -> str | None:
    """``TTFT p50 58.2-59.7 ms`` from a `ci` entry; None when it is null (no interval yet)."""
    if not isinstance(ci, list | tuple) or len(ci) != 2:
        return None
    f = STAT_FIGURES.get(key)
    label, unit = (f.short, f.unit) if f is not None else (key, "")
    d = _decimals(key)
    return f"{label} {fmt_num(ci[0], d)}-{fmt_num(ci[1], d)}" + (f" {unit}" if unit else "")


def steady_text(steady: Any) -> str | None:
    """``189.91 req/s  1,899.1 output tok/s  in 0.0-23.0 s``; None without a window."""
    if not isinstance(steady, Mapping):
        return None
    return (
        f"{fmt_num(steady.get('requests_per_s'), 2)} req/s  "
        f"{fmt_num(steady.get('output_tokens_per_s'), 1)} output tok/s  "
        f"in {fmt_num(steady.get('from_s'), 1)}-{fmt_num(steady.get('to_s'), 1)} s"
    )


def confidence_lines(s: Mapping[str, Any]) -> list[str]:
    """The table's `steady`, `settled` and `95% ci` lines (none for a summary without the blocks)."""
    lines = []
    steady = steady_text(s.get("steady"))
    if steady is not None:
        lines.append(f"steady    {steady} (the plateau)")
    ci = s.get("ci")
    if isinstance(ci, Mapping):
        at = s.get("settled_at_s")
        lines.append("settled   " + (f"at {fmt_num(at, 1)} s" if isinstance(at, int | float) else "no"))
        shown = [t for k, v in ci.items() if (t := interval_text(str(k), v)) is not None]
        if shown:
            lines.append("95% ci    " + "  ".join(shown))
    return lines


def trial_rows(block: Any) -> list[tuple[str, Mapping[str, Any]]]:
    """(summary key, its figures) of each figure a `trials` block holds, in `TRIAL_FIGURES` order."""
    if not isinstance(block, Mapping):
        return []
    return [(k, block[k]) for k in TRIAL_FIGURES if isinstance(block.get(k), Mapping)]


def trials_lines(s: Mapping[str, Any]) -> list[str]:
    """The trials table (20 + 10 + 10 + 8 + 22 = 70 columns); none for a single run."""
    block = s.get("trials")
    rows = trial_rows(block)
    if not rows or not isinstance(block, Mapping):
        return []
    n = block.get("n")
    lines = ["", f"{f'trials: {n} runs':<20}{'mean':>10}{'stddev':>10}{'cv':>8}{'95% interval':>22}"]
    for key, t in rows:
        f = STAT_FIGURES[key]
        d = _decimals(key)
        cv = t.get("cv")
        ci = t.get("ci")
        span = f"{fmt_num(ci[0], d)}-{fmt_num(ci[1], d)}" if isinstance(ci, list) and len(ci) == 2 else "-"
        lines.append(
            f"{f.header:<20}{fmt_num(t.get('mean'), d):>10}{fmt_num(t.get('stddev'), d):>10}"
            f"{(fmt_num(100 * cv, 1) + '%') if isinstance(cv, int | float) else '-':>8}{span:>22}"
        )
    return lines


def trials_verdicts(a: Mapping[str, Any], b: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """`report A B` on two runs with trials: per figure, whether B's interval is apart from A's,
    in words (`metrics/spread.overlap`); none unless both have a `trials` block."""
    ta, tb = dict(trial_rows(a.get("trials"))), dict(trial_rows(b.get("trials")))
    out = []
    for key in TRIAL_FIGURES:
        if key not in ta or key not in tb:
            continue
        ia, ib = ta[key].get("ci"), tb[key].get("ci")
        _, sentence = overlap(
            None if ia is None else (float(ia[0]), float(ia[1])),
            None if ib is None else (float(ib[0]), float(ib[1])),
            figure=STAT_FIGURES[key].header,
            names=(names[0], names[1]),
        )
        out.append(sentence)
    return out


def _value(s: Mapping[str, Any], key: str) -> Any:
    metric, _, q = key.partition(".")
    block = s.get(metric)
    return block.get(q) if isinstance(block, Mapping) else None


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return (
        "<table><thead><tr>"
        + "".join(f"<th>{escape(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</tbody></table>"
    )


def confidence_section(s: Mapping[str, Any]) -> str:
    """The HTML report's "How far to trust the figures": the steady window, when the run settled
    and each figure's 95% interval, and the trials' spread; nothing for a summary without them."""
    parts = []
    steady = steady_text(s.get("steady"))
    if steady is not None:
        parts.append(
            f"<p>Steady window: {escape(steady)}, where the requests in flight stayed at 90% or more "
            "of their plateau (ramp-up and drain left out).</p>"
        )
    ci = s.get("ci")
    if isinstance(ci, Mapping):
        at = s.get("settled_at_s")
        said = f"settled at {fmt_num(at, 1)} s" if isinstance(at, int | float) else "never settled"
        parts.append(f"<p>The run {escape(said)} (its judged intervals within the settle tolerance).</p>")
        rows = []
        for key, v in ci.items():
            f = STAT_FIGURES.get(str(key))
            d = _decimals(str(key))
            span = "-" if not isinstance(v, list) else f"{fmt_num(v[0], d)} – {fmt_num(v[1], d)}"
            rows.append([str(key) if f is None else f.header, fmt_num(_value(s, str(key)), d), span])
        parts.append(_html_table(["figure", "value", "95% interval"], rows))
    rows = []
    for key, t in trial_rows(s.get("trials")):
        d = _decimals(key)
        cv, iv = t.get("cv"), t.get("ci")
        rows.append(
            [
                STAT_FIGURES[key].header,
                fmt_num(t.get("mean"), d),
                fmt_num(t.get("stddev"), d),
                "-" if not isinstance(cv, int | float) else f"{100 * cv:.1f}%",
                "-" if not isinstance(iv, list) else f"{fmt_num(iv[0], d)} – {fmt_num(iv[1], d)}",
            ]
        )
    if rows:
        n = (s.get("trials") or {}).get("n")
        parts.append(f"<h3>{escape(f'{n} trials')} (the same workload and seed, fresh connections)</h3>")
        parts.append(_html_table(["figure", "mean", "stddev", "cv", "95% t-interval"], rows))
    if not parts:
        return ""
    return (
        '<section id="confidence"><h2>How far to trust the figures</h2><p class="note">95% intervals: '
        "order statistics for percentiles, batch means for requests/s, Student's t over trials "
        "(docs/statistics.md).</p>" + "".join(parts) + "</section>"
    )
