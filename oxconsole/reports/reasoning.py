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

from oxconsole.base.figures import (
    CACHE_HIT_RATE,
    COMPARED,
    REASONING_SHARE,
    TTFOT,
    TTFT,
    Figure,
    has_reasoning,
    percent,
)
from oxconsole.base.units import fmt_num
from oxconsole.metrics.reasoning import output_share

__all__ = ["reasoning_figures", "reasoning_rows", "reasoning_section"]

FIGURES: tuple[tuple[str, str], ...] = tuple((f.id, f.header) for f in COMPARED["reasoning"])
"""The figures `report A B ...` adds for runs with reasoning or cached tokens (labels fit its 16
columns)."""


def _p(s: Mapping[str, Any], f: Figure, q: str) -> float | None:
    return f.at(q).value(s)


def reasoning_figures(s: Mapping[str, Any]) -> dict[str, float | None]:
    """The figures a comparison adds for a run (none for a run without reasoning or a cache)."""
    if not has_reasoning(s):
        return {}
    values = {REASONING_SHARE.id: output_share(s), CACHE_HIT_RATE.id: CACHE_HIT_RATE.value(s)}
    return {f.id: f.scaled(values[f.id] if f.id in values else f.value(s)) for f in COMPARED["reasoning"]}


def reasoning_rows(runs: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str], ...]:
    """(figure, label) rows when any compared run has them."""
    return FIGURES if any(FIGURES[0][0] in figs for figs in runs) else ()


def _row(name: str, s: Mapping[str, Any]) -> list[str]:
    tokens = s.get("tokens") or {}
    return [
        name,
        fmt_num(_p(s, TTFT, "p50")),
        fmt_num(_p(s, TTFOT, "p50")),
        fmt_num(_p(s, TTFOT, "p99")),
        f"{tokens['reasoning']:,}" if "reasoning" in tokens else "–",
        percent(output_share(s)),
        f"{tokens['cached']:,}" if "cached" in tokens else "–",
        percent(CACHE_HIT_RATE.value(s)),
        f"{s.get('tool_calls') or 0:,}",
    ]


def reasoning_section(s: Mapping[str, Any]) -> str:
    """The HTML report's "Reasoning and cached prompts" section: the run and each model (empty
    for a run without them)."""
    if not has_reasoning(s):
        return ""
    head = ["", *(f.at(q).header for f, q in ((TTFT, "p50"), (TTFOT, "p50"), (TTFOT, "p99"))),
            "reasoning tok", "of output", "cached tok", CACHE_HIT_RATE.label, "tool calls"]  # fmt: skip
    rows = [_row("whole run", s)]
    models = s.get("models") or {}
    if len(models) > 1:
        rows += [_row(str(n), m) for n, m in models.items() if isinstance(m, Mapping) and has_reasoning(m)]
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    note = (
        f"{TTFT.label} is the first token of any kind; {TTFOT.label} the first answer token, after the "
        "reasoning. Reasoning tokens are counted inside the output tokens, cached tokens inside the input."
    )
    return (
        '<section id="reasoning"><h2>Reasoning and cached prompts</h2>'
        f'<p class="note">{escape(note)}</p><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody>'
        "</table></section>"
    )
