"""Reasoning and cached prompts in the shareable reports: the HTML report's section, the text
summary's rows, and the compared runs' figures.

Why this module exists: a reasoning model's report must say how long users waited for the answer
(TTFOT) beside TTFT, how much of the output was reasoning, and how much of the input the
server's cache served; the summary holds it all (`ttfot_ms`, `tokens.reasoning`, `tokens.cached`,
`cache_hit_rate`, per model), and every report shows it only for runs that have it, so a plain
run's report is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from oxconsole.base.units import fmt_num
from oxconsole.metrics.reasoning import has_reasoning, output_share, pct_cell

__all__ = ["reasoning_figures", "reasoning_rows", "reasoning_section"]

FIGURES: tuple[tuple[str, str], ...] = (
    ("ttfot_ms.p50", "TTFOT p50"),
    ("ttfot_ms.p99", "TTFOT p99"),
    ("reasoning_share", "reasoning %"),
    ("cache_hit_rate", "cache hit %"),
)
"""The figures `report A B ...` adds for runs with reasoning or cached tokens (labels fit its 16
columns)."""


def _p(s: Mapping[str, Any], key: str, q: str) -> float | None:
    t = s.get(key)
    v = t.get(q) if isinstance(t, Mapping) else None
    return float(v) if isinstance(v, int | float) else None


def reasoning_figures(s: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures a comparison adds for a run (none for a run without reasoning or a cache)."""
    if not has_reasoning(s):
        return {}
    share = output_share(s)
    rate = s.get("cache_hit_rate")
    return {
        "ttfot_ms.p50": _p(s, "ttfot_ms", "p50"),
        "ttfot_ms.p99": _p(s, "ttfot_ms", "p99"),
        "reasoning_share": None if share is None else 100.0 * share,
        "cache_hit_rate": 100.0 * rate if isinstance(rate, int | float) else None,
    }


def reasoning_rows(runs: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(figure, label) rows when any compared run has them."""
    return FIGURES if any("ttfot_ms.p50" in figs for figs in runs) else ()


def _row(name: str, s: Mapping[str, Any]) -> list[str]:
    tokens = s.get("tokens") or {}
    rate = s.get("cache_hit_rate")
    return [
        name,
        fmt_num(_p(s, "ttft_ms", "p50")),
        fmt_num(_p(s, "ttfot_ms", "p50")),
        fmt_num(_p(s, "ttfot_ms", "p99")),
        f"{tokens['reasoning']:,}" if "reasoning" in tokens else "–",
        pct_cell(output_share(s)),
        f"{tokens['cached']:,}" if "cached" in tokens else "–",
        pct_cell(rate if isinstance(rate, int | float) else None),
        f"{s.get('tool_calls') or 0:,}",
    ]


def reasoning_section(s: Mapping[str, Any]) -> str:
    """The HTML report's "Reasoning and cached prompts" section: the run and each model (empty
    for a run without them)."""
    if not has_reasoning(s):
        return ""
    head = ["", "TTFT p50 ms", "TTFOT p50 ms", "TTFOT p99 ms", "reasoning tok", "of output", "cached tok",
            "cache hit", "tool calls"]  # fmt: skip
    rows = [_row("whole run", s)]
    models = s.get("models") or {}
    if len(models) > 1:
        rows += [_row(str(n), m) for n, m in models.items() if isinstance(m, Mapping) and has_reasoning(m)]
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    note = (
        "TTFT is the first token of any kind; TTFOT the first answer token, after the reasoning. "
        "Reasoning tokens are counted inside the output tokens, cached tokens inside the input."
    )
    return (
        '<section id="reasoning"><h2>Reasoning and cached prompts</h2>'
        f'<p class="note">{escape(note)}</p><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody>'
        "</table></section>"
    )
