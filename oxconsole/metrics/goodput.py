"""Goodput: how many finished requests met the `[slo]`, as a rate and a share, against its target.

Why this module exists: the summary (whole run, each model, each phase), `oxconsole report`, the
live snapshot, the console and the exit code must all say the same thing about goodput. The
counting itself is two counters in `RunStats` (`good`, `judged`: records that carry `slo_ok`);
this module turns counts into the summary's `goodput` block and the snapshot's `Goodput`, and
reads a summary's verdict for the exit code. It imports nothing of the collector's.

`fraction` is good / judged: with `[slo]` every finished request is judged, so it is good /
finished (records written before `[slo]` was added to a resumed run carry no `slo_ok` and are
left out). `target` is None where it is not known (`report` on a journal whose manifest does not
keep it): then `met` is None too, and nothing fails on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oxconsole.base.figures import GOOD_FRACTION, GOODPUT, REQUESTS_PER_S

__all__ = [
    "Goodput",
    "goodput_entry",
    "goodput_lines",
    "progress_part",
    "slo_missed",
    "slo_note",
    "slo_target_of",
]


def fraction_of(good: int, judged: int) -> float | None:
    """good / judged, rounded as the summary keeps it; None when nothing was judged."""
    return round(good / judged, 4) if judged else None


def met(fraction: float | None, target: float | None) -> bool | None:
    """Whether the share reached the target; None when either is unknown."""
    if fraction is None or target is None:
        return None
    return fraction >= target


def goodput_entry(good: int, judged: int, duration_s: float, target: float | None) -> dict[str, Any]:
    """`{"goodput": {...}}` to merge into a summary block, or `{}` when there is no SLO (no
    target and no judged record)."""
    if target is None and not judged:
        return {}
    fraction = fraction_of(good, judged)
    return {
        "goodput": {
            GOODPUT.leaf: round(good / duration_s, 3) if duration_s > 0 else 0.0,
            GOOD_FRACTION.leaf: fraction,
            "target": target,
            "met": met(fraction, target),
        }
    }


def goodput_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary table's goodput lines (none without `[slo]`): `goodput   5.20 req/s  93.1% good
    target 95%  below target`, then each model's share when there are several."""
    g = summary.get("goodput")
    if not isinstance(g, Mapping):
        return []
    text = (
        f"goodput   {GOODPUT.value(summary) or 0.0:,.2f} {REQUESTS_PER_S.short}  "
        f"{_share(GOOD_FRACTION.of(summary))} {GOOD_FRACTION.label}"
    )
    if g.get("target") is not None:
        text += f"  target {100 * g['target']:g}%"
        verdict = g.get("met")
        text += "  met" if verdict is True else "  below target" if verdict is False else ""
    models = summary.get("models") or {}
    shares = [
        f"{name} {_share(m['goodput'].get('fraction'))}"
        for name, m in models.items()
        if isinstance(m, Mapping) and isinstance(m.get("goodput"), Mapping)
    ]
    return [text, "  by model  " + "  ".join(shares)] if len(shares) > 1 else [text]


def _share(frac: Any) -> str:
    """A share as a percentage with one decimal (94.9% must not read as a 95% target met); 0% and
    100% without; – for none."""
    if not isinstance(frac, int | float):
        return "–"
    return f"{100 * frac:.0f}%" if frac in (0, 1) else f"{100 * frac:.1f}%"


def slo_missed(summary: Mapping[str, Any]) -> bool:
    """The summary says the run's goodput fell below its target (the run exits 3)."""
    g = summary.get("goodput")
    return isinstance(g, Mapping) and g.get("met") is False


def slo_note(summary: Mapping[str, Any]) -> str | None:
    """What the end of a run says when its goodput fell below the target (it exits 3 unless
    something more serious happened); None otherwise."""
    if not slo_missed(summary):
        return None
    g = summary["goodput"]
    return (
        f"[slo] not met: {_share(g.get('fraction'))} of finished requests were good, "
        f"the target is {100 * float(g.get('target') or 0):g}%"
    )


def slo_target_of(manifest: Mapping[str, Any]) -> float | None:
    """The SLO target a journal's manifest keeps (`"slo": {"target": ...}`), or None."""
    slo = manifest.get("slo")
    t = slo.get("target") if isinstance(slo, Mapping) else None
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t <= 1:
        return None
    return float(t)


@dataclass(frozen=True, slots=True)
class Goodput:
    """Goodput in a snapshot: what the console shows beside throughput."""

    target: float | None
    """The share that must be good (None: not known)."""
    good: int
    judged: int
    req_per_s: float
    """Good requests per second over the whole run."""
    req_per_s_10s: float
    """Good requests per second over the rolling window."""
    phase_good: int = 0
    phase_judged: int = 0

    @property
    def fraction(self) -> float | None:
        return fraction_of(self.good, self.judged)

    @property
    def met(self) -> bool | None:
        return met(self.fraction, self.target)

    @classmethod
    def from_dict(cls, d: Any) -> Goodput | None:
        if not isinstance(d, Mapping):
            return None
        t = d.get("target")
        return cls(
            target=None if t is None else float(t),
            good=int(d.get("good") or 0),
            judged=int(d.get("judged") or 0),
            req_per_s=float(d.get("req_per_s") or 0.0),
            req_per_s_10s=float(d.get("req_per_s_10s") or 0.0),
            phase_good=int(d.get("phase_good") or 0),
            phase_judged=int(d.get("phase_judged") or 0),
        )

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> Goodput | None:
        """A finished run's goodput as far as its summary tells it (counts from the share)."""
        g = summary.get("goodput")
        if not isinstance(g, Mapping):
            return None
        judged = int((summary.get("requests") or {}).get("total") or 0)
        frac = g.get("fraction")
        good = round(float(frac) * judged) if frac is not None else 0
        t = g.get("target")
        rate = GOODPUT.value(summary) or 0.0
        return cls(None if t is None else float(t), good, judged, rate, 0.0, good, judged)


def progress_part(g: Goodput) -> str:
    """The headless progress line's part: `good 9.1/s 93% < 95%` (the target shown when missed)."""
    frac = g.fraction
    text = f"good {g.req_per_s_10s:.1f}/s {_share(frac)}"
    if g.met is False and g.target is not None:
        text += f" < {100 * g.target:g}%"
    return text
