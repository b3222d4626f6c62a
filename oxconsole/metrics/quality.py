"""What `[quality]` and the cascade did to a run: valid answers, per model asked, escalations, and
what one valid answer costs.

Why this module exists: the live collector, the summary, its phases and `oxconsole report` count
the same records with one class (`QualityCounts`, O(1) a record: a few integer updates, a short
loop over the answers that did not stand), so a summary from the journal equals the run's. A
record's `valid` is its standing answer's verdict; its `answers` hold the answers that did not
stand (each failed, or the cascade would not have moved on) and the judge requests, with the
tokens each model was billed: each is counted at the model that answered it, in its row and its
bill (`aggregate.count_answers`), so a price plan prices every request the cascade made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import COST_PER_VALID, LATENCY
from oxconsole.base.safetext import shown
from oxconsole.base.units import fmt_money, fmt_ms
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.snapshot import quality_view

__all__ = [
    "QualityCounts",
    "add_per_valid",
    "has_cascade",
    "live_quality",
    "quality_entry",
    "quality_lines",
    "with_steps",
]


class _Model:
    __slots__ = ("asked", "valid")

    def __init__(self) -> None:
        self.asked = 0
        """Answers this model gave that were judged."""
        self.valid = 0


class QualityCounts:
    """Valid answers among the judged ones, per model asked, and where the cascade left them."""

    __slots__ = (
        "check_errors",
        "check_timeouts",
        "escalated",
        "final",
        "judge_errors",
        "judged",
        "latency",
        "models",
        "valid",
    )

    def __init__(self) -> None:
        self.judged = 0
        """Records whose standing answer was judged (ok records of a run with `[quality]`)."""
        self.valid = 0
        self.check_timeouts = 0
        """Answers (standing or not) whose checks were stopped at their deadline: invalid."""
        self.check_errors = 0
        """Answers whose check raised: invalid."""
        self.judge_errors = 0
        """Ok records whose judge request failed: their answer stands unjudged (not in `judged`)."""
        self.escalated = 0
        """Records the cascade moved on at least once."""
        self.final: dict[str, int] = {}
        """Judged records by the model whose answer stands."""
        self.models: dict[str, _Model] = {}
        self.latency = LogHistogram()
        """Milliseconds from the first answer's send to the last byte of the one that stands
        (`cascade_ms`, else `latency_ms`): what a valid answer took, escalations included."""

    def _of(self, name: str) -> _Model:
        m = self.models.get(name)
        if m is None:
            m = self.models[name] = _Model()
        return m

    def count(self, rec: RequestRecord) -> None:
        """One record of a run with `[quality]` (the caller checks `valid` or `answers` is set)."""
        if rec.escalations:
            self.escalated += 1
        for a in rec.answers or ():
            if a.get("judge") is not True:
                m = self._of(str(a.get("model")))
                m.asked += 1
                m.valid += a.get("valid") is True
                self.check_timeouts += a.get("check_timeout") is True
                self.check_errors += isinstance(a.get("check_error"), str)
        if rec.valid is None:
            self.judge_errors += rec.judge_error is not None and rec.status == "ok"
            return
        self.check_timeouts += rec.check_timeout
        self.check_errors += rec.check_error is not None
        ms = rec.cascade_ms if rec.cascade_ms is not None else rec.latency_ms
        if ms is not None:
            self.latency.record(ms)
        self.judged += 1
        self.valid += rec.valid
        self.final[rec.model] = self.final.get(rec.model, 0) + 1
        m = self._of(rec.model)
        m.asked += 1
        m.valid += rec.valid

    def block(self) -> dict[str, Any]:
        """The summary's `quality` block."""
        return {
            "valid": self.valid,
            "fraction": _share(self.valid, self.judged),
            "judged": self.judged,
            "check_timeouts": self.check_timeouts,
            "check_errors": self.check_errors,
            "judge_errors": self.judge_errors,
            LATENCY.key: dict(self.latency.summary())
            if self.latency.n
            else dict.fromkeys(self.latency.summary()),
            "models": {
                name: {"asked": m.asked, "valid": m.valid, "fraction": _share(m.valid, m.asked)}
                for name, m in sorted(self.models.items())
                if m.asked
            },
        }

    def cascade_block(self) -> dict[str, Any]:
        """The summary's `cascade` block: requests moved on, and where the judged ones ended."""
        return {"escalated": self.escalated, "final": dict(sorted(self.final.items()))}


def live_quality(q: QualityCounts | None, steps: tuple[str, ...] | None) -> dict[str, Any] | None:
    """The snapshot's `quality`: the summary's figures so far, each model's escalations (answers
    it gave that did not stand) and the cascade's steps in force; None without `[quality]`."""
    if steps is None:
        return None
    q = q or QualityCounts()
    return quality_view(
        judged=q.judged,
        valid=q.valid,
        fraction=_share(q.valid, q.judged),
        escalated=q.escalated,
        steps=steps,
        models=[(n, m.asked, m.valid, _share(m.valid, m.asked)) for n, m in q.models.items() if m.asked],
        stood=q.final,
    )


def quality_entry(q: QualityCounts | None) -> dict[str, Any]:
    """`quality` and `cascade` for a summary or a phase (nothing when the run has no `[quality]`)."""
    if q is None or not (q.judged or q.models or q.judge_errors):
        return {}
    return {"quality": q.block(), "cascade": q.cascade_block()}


def with_steps(block: dict[str, Any], steps: tuple[str, ...] | None) -> dict[str, Any]:
    """`block` (a summary or a phase) with its `cascade` block's `steps`: the cascade's steps in
    force (at the end of the run, or through the phase), so that a reader need not guess them."""
    cascade = block.get("cascade")
    if isinstance(cascade, dict) and steps is not None:
        cascade["steps"] = list(steps)
    return block


def add_per_valid(cost: dict[str, Any], q: QualityCounts | None) -> None:
    """`cost.per_valid` and each plan's `per_valid`: the total over the valid answers (None before
    any), beside `per_task`."""
    if q is None or not (q.judged or q.models or q.judge_errors):
        return
    cost["per_valid"] = _per(cost.get("total"), q.valid)
    for plan in (cost.get("plans") or {}).values():
        plan["per_valid"] = _per(plan.get("total"), q.valid)


def quality_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary table's lines on valid answers, the cascade and $ per valid answer (none
    without `[quality]`)."""
    q = summary.get("quality")
    if not isinstance(q, Mapping):
        return []
    valid, judged = int(q.get("valid") or 0), int(q.get("judged") or 0)
    head = f"quality   {valid:,} valid of {judged:,} ({_pct(q.get('fraction'))})"
    lat = LATENCY.of(q) or {}
    cascaded = has_cascade(summary)
    if lat.get("p50") is not None and not cascaded:  # with a cascade: a row of the timings table
        head += f" · answer p50 {fmt_ms(lat['p50'])} p99 {fmt_ms(lat.get('p99'))}"
    for name, m in (q.get("models") or {}).items():
        head += (
            f" · {shown(str(name), one_line=True)} {_pct(m.get('fraction'))} of {int(m.get('asked') or 0):,}"
        )
    faults = [
        f"{int(q.get(key) or 0):,} {label}"
        for key, label in (
            ("judge_errors", "unjudged (judge errors)"),
            ("check_timeouts", "checks stopped at their deadline"),
            ("check_errors", "checks that raised"),
        )
        if q.get(key)
    ]
    c = summary.get("cascade") or {}
    cascade = f"cascade   {int(c.get('escalated') or 0):,} escalated"
    final = ", ".join(f"{shown(str(n), one_line=True)} {int(k):,}" for n, k in (c.get("final") or {}).items())
    cost = summary.get("cost") or {}
    per = [COST_PER_VALID.text(COST_PER_VALID.of(summary))]
    per += [
        f"{shown(str(n), one_line=True)} {fmt_money(p.get('per_valid'))}"
        for n, p in (cost.get("plans") or {}).items()
    ]
    lines = [head]
    if faults:  # answers the checks or the judge could not decide on, said beside the verdicts
        lines.append("          " + ", ".join(faults))
    if cascaded:  # `[quality]` alone judges answers; nothing moves on, so no cascade line
        lines.append(cascade + (f" · ended: {final}" if final else ""))
    return [*lines, "per valid " + " · ".join(per)]


def has_cascade(summary: Mapping[str, Any]) -> bool:
    """The run sent answers on to a next model, or could: its cascade has two steps or more, or
    some request escalated (a summary rebuilt from a journal may not know the steps)."""
    c = summary.get("cascade")
    if not isinstance(c, Mapping):
        return False
    steps = c.get("steps")
    return (isinstance(steps, list) and len(steps) > 1) or bool(c.get("escalated"))


def _pct(v: Any) -> str:
    return f"{100.0 * float(v or 0.0):.1f}%"


def _per(total: Any, valid: int) -> float | None:
    if not valid or not isinstance(total, int | float):
        return None
    return round(total / valid, 12)


def _share(n: int, of: int) -> float:
    return round(n / of, 6) if of else 0.0
