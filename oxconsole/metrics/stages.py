"""Each `[[stages]]` stage's figures: the summary's `stages` list, live and from a journal alike.

Why this module exists: a load shape is judged stage by stage (what did 200 in flight give, what
did the burst do to p99?). Phases split the run at every change, a ramp's steps included, so a
stage's figures are kept apart: every record carries the stage it was *sent* in (`stage`, and
`warmup` in a warm-up stage), and is counted into that stage here. `oxconsole report` counts a
journal's records the same way, so both give the same per-stage figures; the stage's times and
settings are known only to the run (a report shows `t_start` etc. as null).

Warm-up records are counted here only, never in the run's or the models' figures: the summary's
`requests`, rates and percentiles leave them out, and its rates are over the time after the
warm-up stages (`measured_s`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oxconsole.base.figures import LATENCY, OK, REQUESTS_PER_S, TTFT, Column, quantile_column
from oxconsole.base.units import fmt_duration
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.aggregate import SPAN_TIMINGS, RunStats, timing, timing_blocks

__all__ = ["StageLog", "StageSpan"]


@dataclass
class StageSpan:
    """One stage as the run went through it: when it began (and ended), and its settings."""

    index: int
    t_start: float
    warmup: bool
    ramp: bool
    planned_s: float
    concurrency: int | None = None
    """At the stage's end (a ramp's target); None until the run knows it."""
    rate: float | None = None
    t_end: float | None = None
    stats: RunStats = field(default_factory=RunStats)


class StageLog:
    """The stages begun so far and the records counted into each (by the stage they were sent in)."""

    def __init__(self) -> None:
        self.spans: dict[int, StageSpan] = {}
        self.current: StageSpan | None = None
        self.count_of = 0
        """How many stages the run has (0 = no stages)."""
        self.total_s = 0.0
        """How long they last together, as planned."""

    def begin(self, span: StageSpan, t: float, count: int, total_s: float) -> None:
        """Stage `span.index` (of `count`, lasting `total_s` together) begins at `t`: the one
        before ends there."""
        self.total_s = total_s
        if self.current is not None and self.current.t_end is None:
            self.current.t_end = t
        self.spans[span.index] = span
        self.current = span
        self.count_of = count

    def end(self, t: float) -> None:
        if self.current is not None and self.current.t_end is None:
            self.current.t_end = t

    def record(self, rec: RequestRecord) -> None:
        """A finished record of a run with stages (`rec.stage` is set). O(1)."""
        assert rec.stage is not None
        span = self.spans.get(rec.stage)
        if span is None:  # from a journal: the stage's times are not known
            span = self.spans[rec.stage] = StageSpan(rec.stage, 0.0, rec.warmup, False, 0.0)
        span.stats.record(rec)

    def warmup_s(self, now: float) -> float:
        """Seconds spent in warm-up stages so far."""
        return sum(_end(s, now) - s.t_start for s in self.spans.values() if s.warmup and s.planned_s)

    def summary(self, now: float, *, known_times: bool = True) -> list[dict[str, Any]]:
        return [stage_block(s, now, known_times) for _, s in sorted(self.spans.items())]

    def now(self, now: float) -> dict[str, Any] | None:
        """The stage now, for the console: which of how many, since when, for how long; in a
        warm-up stage, its requests done and their latency (`done`, `latency_ms`)."""
        s = self.current
        if s is None:
            return None
        out: dict[str, Any] = {
            "index": s.index,
            "count": self.count_of,
            "t_start": round(s.t_start, 3),
            "duration_s": s.planned_s,
            "warmup": s.warmup,
            "ramp": s.ramp,
            "total_s": self.total_s,
        }
        if s.warmup:  # the run's figures leave warm-up out: progress shows the stage's own
            out["done"] = s.stats.total
            out[LATENCY.key] = timing(s.stats.hist(LATENCY.key))
        return out

    def into(
        self,
        summary: dict[str, Any],
        duration_s: float,
        *,
        known_times: bool = True,
        warmup_s: float | None = None,
    ) -> dict[str, Any]:
        """`summary` (its rates over the time after warm-up) with the run's whole `duration_s`, its
        `stages` and, after warm-up stages, `warmup`: the requests and seconds left out."""
        if not self.spans:
            return summary
        summary["duration_s"] = round(duration_s, 3)
        summary["stages"] = self.summary(duration_s, known_times=known_times)
        warm = [s for s in self.spans.values() if s.warmup]
        if warm:
            summary["warmup"] = {
                "requests": sum(s.stats.total for s in warm),
                "duration_s": round(self.warmup_s(duration_s) if warmup_s is None else warmup_s, 3),
            }
        return summary


def _end(s: StageSpan, now: float) -> float:
    return s.t_end if s.t_end is not None else max(now, s.t_start)


def stage_block(s: StageSpan, now: float, known_times: bool = True) -> dict[str, Any]:
    """One entry of the summary's `stages`: `t` (= `t_start`, where html reports draw it) and
    `name` for markers, its times and settings, and the figures of the requests sent in it (the
    phase blocks: requests, throughput over its own time, latency and TTFT)."""
    st = s.stats
    t_end = _end(s, now)
    span = t_end - s.t_start if known_times else 0.0
    block: dict[str, Any] = {
        "index": s.index,
        "name": str(s.index + 1) + (" warm-up" if s.warmup else ""),
    }
    if known_times:  # where an html report draws the stage's rule; a journal does not know it
        block["t"] = round(s.t_start, 3)
    return block | {
        "t_start": round(s.t_start, 3) if known_times else None,
        "t_end": round(t_end, 3) if known_times else None,
        "concurrency": s.concurrency,
        "rate": s.rate,
        "ramp": s.ramp,
        "warmup": s.warmup,
        "requests": st.requests_block(),
        "throughput": st.throughput_block(span if known_times else None),
        **timing_blocks(st, SPAN_TIMINGS),
    }


def journal_stages(summary: dict[str, Any], log: StageLog, running_s: float) -> dict[str, Any]:
    """A summary rebuilt from a journal (`oxconsole report`), with the `stages` its records name
    (figures only: the stages' times and settings are not journaled) and its whole running time;
    its rates are over the time after warm-up, as the run's own were."""
    return log.into(summary, running_s, known_times=False, warmup_s=running_s - summary["duration_s"])


def fold_change(
    c: dict[str, Any], finished: int, since: float, window: float, has_settings: bool, had_phases: bool
) -> bool:
    """Whether change `c`, `since` seconds into the current phase, joins it instead of starting one:
    several changes within `window` seconds before any request finished (weights edited together,
    a boundary's settings). A stage boundary (`what` = "stage") always starts a phase (a warm-up
    stage counts no request in its phase, yet ends there); the first stage's settings, applied as
    the run starts, join the first phase."""
    if c["what"] == "stage" or finished or since >= window:
        return False
    return has_settings or (c.get("by") == "stage" and not had_phases)


def stage_text(stage: Mapping[str, Any], elapsed_s: float) -> str:
    """The stage now in words, for the console's header and the headless progress line:
    ``stage 2/4 ramp 12s left`` (1-based, as people count; the summary's `index` is 0-based)."""
    kind = " warm-up" if stage.get("warmup") else " ramp" if stage.get("ramp") else ""
    left = max(0.0, float(stage["t_start"]) + float(stage["duration_s"]) - elapsed_s)
    return f"stage {int(stage['index']) + 1}/{stage['count']}{kind} {fmt_duration(left)} left"


STAGE_END_SLACK_S = 0.1
"""A last stage that ran this close to its planned length ran to its end (the stage clock and
the run's end are a loop iteration or two apart)."""


def judge_stages(summary: dict[str, Any], planned_s: Sequence[float]) -> None:
    """After a run with `[[stages]]` (`planned_s`: each stage's length): stages that ran to their
    end are a complete run, so prompts they never needed are not "not sent" (no `--resume` to
    offer); prompts that ran out before the last stage's end are said in `stages_end`
    (``{"complete": false, "stage", "t", "planned_s", "reason": "prompts ran out"}``)."""
    stages = summary.get("stages") or []
    if not planned_s or not stages:
        return
    last = stages[-1]
    t0, t1 = last.get("t_start"), last.get("t_end")
    if t0 is None or t1 is None:
        return
    requests = summary.setdefault("requests", {})
    complete = int(last.get("index") or 0) >= len(planned_s) - 1 and (
        float(t1) - float(t0) >= planned_s[-1] - STAGE_END_SLACK_S
    )
    if complete:
        summary["stages_end"] = {"complete": True}
        if requests.get("not_sent"):
            requests["not_sent"] = 0
    elif requests.get("not_sent") == 0:  # nothing left to send, and the stages had not ended
        summary["stages_end"] = {
            "complete": False,
            "stage": int(last.get("index") or 0) + 1,
            "t": round(float(t1), 3),
            "planned_s": round(sum(planned_s), 3),
            "reason": "prompts ran out",
        }


def stage_end_line(end: Mapping[str, Any] | None) -> list[str]:
    """The words under the stage table for stages that did not all run (`judge_stages`)."""
    if not end or end.get("complete") is not False:
        return []
    t, planned = float(end.get("t") or 0), float(end.get("planned_s") or 0)
    why = end.get("reason", "run ended")
    stage = end.get("stage")
    return [f"the {why} in stage {stage} at {t:.1f}s: the run ended before its stages' {planned:g}s"]


SPAN_COLUMNS: tuple[Column, ...] = (
    Column(OK, 7),
    Column(REQUESTS_PER_S, 8, 2),
    quantile_column(LATENCY, "p50", 9),
    quantile_column(LATENCY, "p99", 9),
    quantile_column(TTFT, "p50", 9),
)
"""The figures of a span of the run (a stage, a phase) in the summary table: 7 + 8 + 3 * 9 = 42
columns, the rest for what set it."""


def span_head() -> str:
    return "".join(c.title() for c in SPAN_COLUMNS)


def span_cells(block: Mapping[str, Any]) -> str:
    """A stage's or a phase's figures under `span_head`."""
    return "".join(c.cell(block) for c in SPAN_COLUMNS)


def stage_table(stages: Sequence[Mapping[str, Any]], end: Mapping[str, Any] | None = None) -> list[str]:
    """The summary's `stages` as text rows (at most 80 columns, the settings wrapped in their
    column): each stage's figures and settings; then why the stages did not all run, if so."""
    if not stages:
        return []
    lines = ["", f"{'stage':<14}{span_head()}  settings"]
    for st in stages:
        t0, t1 = st.get("t_start"), st.get("t_end")
        span = f" {float(t0):.0f}-{float(t1):.0f}s" if t0 is not None and t1 is not None else ""
        settings = ["warm-up"] if st.get("warmup") else []
        if st.get("concurrency") is not None:
            settings.append(f"{'ramp to ' if st.get('ramp') else ''}{st['concurrency']} in flight")
        if st.get("rate"):
            settings.append(f"{st['rate']:g}/s")
        row = f"{(str(int(st.get('index') or 0) + 1) + span)[:13]:<14}{span_cells(st)}"
        wrapped = _wrap(", ".join(settings), 80 - len(row) - 2)
        lines.append(f"{row}  {wrapped[0]}".rstrip())
        lines += [" " * (len(row) + 2) + more for more in wrapped[1:]]
    return lines + stage_end_line(end)


def _wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` (words longer than that stand alone)."""
    import textwrap

    return textwrap.wrap(text, max(8, width), break_on_hyphens=False) or [""]
