"""The summary a run ends with: the collector's, or, when the journal failed, the journal file's.

Why this module exists: a run must never report results it did not save. When a journal write or
fsync fails (disk full, quota, I/O error), the collector has already counted records whose lines
were lost: those finishing in the loop iteration of the failed write, and every request cancelled
after it. So the summary of such a run is rebuilt from the lines this run's journal really wrote
(`saved_records`, from where this session began), with the arithmetic `oxconsole report` uses
(`Tally` and `build_summary` in metrics/aggregate; `report.py` itself is a layer above the
engine). The live run's name, start, duration and changes are kept; like a report, it has one
phase. `saved: false` and `save_error` (which file, and why) say what happened.
"""

from __future__ import annotations

from typing import Any

from oxconsole.engine.outcome import count_not_sent
from oxconsole.journal.journal import Journal, saved_records
from oxconsole.metrics.aggregate import Tally, build_summary, phase_summary
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.confidence import Replay
from oxconsole.metrics.plans import project_costs

__all__ = ["run_summary"]


def run_summary(
    name: str,
    duration_s: float,
    collector: Collector,
    journal: Journal | None,
    *,
    total_expected: int | None,
    dispatch_complete: bool,
    skipped: int,
    cooldowns: list[dict[str, Any]],
) -> dict[str, Any]:
    """The run's summary (`runner.Engine`'s): the collector's, or the saved
    lines' when the journal failed; with what was not sent, ids skipped on --resume, cool-downs."""
    summary = _figures(name, duration_s, collector, journal)
    warm = (summary.get("warmup") or {}).get("requests", 0)  # [[stages]] warm-up: sent, not counted
    summary["requests"]["not_sent"] = count_not_sent(
        total_expected, summary["requests"]["total"] + warm, dispatch_complete
    )
    project_costs(summary, summary["requests"]["not_sent"])
    if skipped:
        summary["resumed_skipped"] = skipped
    summary["cooldowns"] = cooldowns
    return summary


def _figures(name: str, duration_s: float, collector: Collector, journal: Journal | None) -> dict[str, Any]:
    if journal is None or journal.failure is None:
        return collector.summary(name, duration_s)
    tally = Tally()
    start = collector.started_at
    replay = Replay(lambda _, t: t - start, collector.confidence.tolerance)
    for rec in saved_records(journal.path, journal.start):
        rec.text = None
        replay.add(rec)
        tally.count(rec)
    overall = tally.overall
    summary = build_summary(
        name=name,
        started_at=collector.started_at,
        duration_s=duration_s,
        overall=overall,
        models=tally.models.items(),
        changes=collector.changes,
        phases=[phase_summary(overall, 0.0, duration_s, [], collector.slo_target)],
        slo_target=collector.slo_target,
        plans=collector.plans,
    )
    blocks, (phase,) = replay.finish(duration_s, [duration_s])
    summary.update(blocks)
    summary["phases"][0].update(phase)
    summary["saved"] = False
    summary["save_error"] = journal.failure
    return summary
