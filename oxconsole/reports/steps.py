"""The HTML report's steps: each burst's figures on its marker and in a table, and their rows in
a comparison.

Why this module exists: a step's penalty and recovery are the figures a burst is judged by; the
charts already mark every change, so a step's marker carries its figures, a table lists them,
and `report --compare` puts each run's steps side by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from oxconsole.base.figures import TTFT
from oxconsole.metrics.stepresponse import step_sentence

__all__ = ["step_label", "step_rows", "step_values", "steps_section"]


def _steps(s: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [st for st in s.get("steps") or () if isinstance(st, Mapping)]


def step_label(s: Mapping[str, Any], c: Mapping[str, Any]) -> str:
    """The figures a change's marker adds when the change is a step: " · +1.8 s, 12 s"."""
    for st in _steps(s):
        if st.get("t") == c.get("t") and st.get("what") == c.get("what") and st.get("to") == c.get("to"):
            pen, rec = st.get("penalty_ms"), st.get("recovery_s")
            pen_s = "?" if not isinstance(pen, int | float) else f"{pen / 1000:+.1f} s"
            rec_s = "not recovered" if not isinstance(rec, int | float) else f"recovered {rec:.1f} s"
            return f" · {TTFT.label} {pen_s}, {rec_s}"
    return ""


def _cell(v: Any, fmt: str) -> str:
    return "–" if not isinstance(v, int | float) else format(v, fmt)


def steps_section(s: Mapping[str, Any]) -> str:
    """A table of the run's steps (nothing when it had none)."""
    steps = _steps(s)
    if not steps:
        return ""
    head = (
        "t (s)",
        "what",
        "from → to",
        "by",
        f"{TTFT.label} before",
        "after (ms)",
        "penalty (ms)",
        "recovery (s)",
    )
    rows = []
    for st in steps:
        cells = (
            _cell(st.get("t"), ".1f"),
            str(st.get("what", "")),
            f"{st.get('from')} → {st.get('to')}",
            str(st.get("by", "")),
            _cell(st.get("ttft_before_ms"), ",.1f"),
            _cell(st.get("ttft_after_ms"), ",.1f"),
            _cell(st.get("penalty_ms"), "+,.1f"),
            _cell(st.get("recovery_s"), ".1f"),
        )
        rows.append("<tr>" + "".join(f"<td>{escape(x)}</td>" for x in cells) + "</tr>")
    said = "".join(f"<li>{escape(step_sentence(st))}</li>" for st in steps)
    return (
        '<section id="steps"><h2>Steps</h2><p class="note">Each change that at least doubled '
        f"concurrency or rate: {TTFT.at('p50').label} of the requests sent in the 10 s before and the "
        "first 10 s after, the penalty, and how long until the rolling p50 of 20 requests came within 10% of "
        "the step's last 10 s (docs/bursts.md).</p>"
        f"<ul>{said}</ul><table><thead><tr>"
        + "".join(f"<th>{escape(h)}</th>" for h in head)
        + f"</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def step_values(s: Mapping[str, Any]) -> dict[str, float | None]:
    """A comparison's step figures of one run: `steps.N.penalty_ms` and `steps.N.recovery_s`."""
    out: dict[str, float | None] = {}
    for i, st in enumerate(_steps(s)):
        for key in ("penalty_ms", "recovery_s"):
            v = st.get(key)
            out[f"steps.{i}.{key}"] = float(v) if isinstance(v, int | float) else None
    return out


def step_rows(figures: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(key, label) of the step rows some run of a comparison has, step by step."""
    keys = {k for f in figures for k in f if k.startswith("steps.")}
    n = 1 + max((int(k.split(".")[1]) for k in keys), default=-1)
    rows = []
    for i in range(n):
        rows += [
            (f"steps.{i}.penalty_ms", f"step {i + 1} penalty ms"),
            (f"steps.{i}.recovery_s", f"step {i + 1} recovery s"),
        ]
    return rows
