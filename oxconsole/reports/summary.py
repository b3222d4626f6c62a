"""The run summary as text or JSON, from a finished run or from its results journal alone.

Why this module exists: `oxconsole report RESULTS.jsonl` must reproduce a run's summary without the
engine, the workload file or the console (the journal is the record of what happened, possibly
from a crashed or resumed run), and the headless runner prints the same table at the end of a
run. The journal is streamed twice, holding 8 bytes an id in between, so a journal of millions of
lines runs in constant memory. No UI libraries: plain text that fits 80 columns.
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.base.idset import repeated
from oxconsole.journal.identify import NotAJournal, not_a_journal, sniff
from oxconsole.journal.manifest import (
    RUN_REQUESTS,
    RUN_SECTIONS,
    read_manifest,
    run_sections,
    settle_tolerance_of,
)
from oxconsole.journal.reading import JournalIssues, read_journal
from oxconsole.journal.records import RequestRecord
from oxconsole.journal.sessions import SessionSpans, sessions_of
from oxconsole.journal.trialstate import TrialState
from oxconsole.metrics.aggregate import RunStats, Tally, build_summary, phase_summary
from oxconsole.metrics.confidence import Replay
from oxconsole.metrics.goodput import slo_target_of
from oxconsole.metrics.plans import project_costs, stored_plans, unused_overrides
from oxconsole.metrics.spread import TrialTally
from oxconsole.metrics.stages import StageLog, journal_stages
from oxconsole.reports.server import with_server
from oxconsole.reports.summarytable import render_summary, table_width

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = [
    "JournalIssues",
    "NotAJournal",
    "read_journal",
    "render_summary",
    "report_main",
    "summary_from_journal",
    "whole_journal_summary",
]


def summary_from_journal(
    path: str | os.PathLike[str],
    name: str | None = None,
    issues: JournalIssues | None = None,
    plans: Mapping[str, PricePlan] | None = None,
) -> dict[str, Any]:
    """Rebuild the run summary from a journal alone.

    The name is the one the run had (from the journal's manifest), else the journal's folder's.
    When an id appears more than once (a resumed run appends), its last record counts. The
    duration is the running time of the sessions that wrote the journal, from its manifest
    (`journal/sessions.py`); without one, from the earliest ``t_scheduled`` to the latest
    ``t_sent + latency``. What no record holds (changes and their phases, stage times, failed
    attempts, requests not sent) is taken from the manifest, where the run's end kept it
    (`store_run_sections`); without it, ``changes`` are empty and there is one phase.
    Raises NotAJournal when the file holds lines but no record a run writes.
    """
    p = Path(path)
    iss = issues if issues is not None else JournalIssues()
    sniff(p)
    manifest = read_manifest(p)
    sessions = sessions_of(manifest)
    spans = SessionSpans(sessions)
    twice = _scan(p, iss, spans)
    if not iss.records and iss.first_problem is not None:
        raise NotAJournal(not_a_journal(p, *iss.first_problem))
    kept = run_sections(manifest, sessions[-1].started_at if sessions else None)
    phases = _kept_phases(kept) if spans.count() == 1 else []
    replay = Replay(spans.clock(), settle_tolerance_of(manifest), [ph[0] for ph in phases[1:]])
    trials = TrialTally(spans.slot)
    overall, models, stages = _tally(p, twice, replay, trials)
    started_at = spans.started_at()
    duration = spans.running_s() - spans.warmup_s()  # rates leave warm-up stages out, as the run's
    if started_at is None:
        started_at = p.stat().st_mtime
    if name is None:
        name = manifest.get("name") if isinstance(manifest.get("name"), str) else None
    if name is None:
        name = p.resolve().parent.name or p.stem
    target = slo_target_of(manifest)
    summary = build_summary(
        name=name,
        started_at=started_at,
        duration_s=duration,
        overall=overall,
        models=models.items(),
        changes=[],
        phases=[phase_summary(overall, 0.0, duration, [], target)],
        sessions=max(1, spans.count()),
        slo_target=target,
        plans=stored_plans(p, manifest) if plans is None else plans,
    )
    summary = journal_stages(summary, stages, spans.running_s())
    blocks, phase_blocks = replay.finish(duration, [ph[1] for ph in phases])
    summary.update(blocks)
    state = TrialState.of(manifest)
    block = trials.block(spans.lengths(), None if state is None else state.done)
    if block is not None:
        summary["trials"] = block
    summary = with_run_sections(summary, kept)
    if len(phase_blocks) == len(summary["phases"]):  # else the run's own, as kept
        for ph, block in zip(summary["phases"], phase_blocks, strict=True):
            ph.update(block)
    return with_server(summary, p)


def _kept_phases(kept: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(t_start, t_end) of each phase the run's end kept, when every one has both; else none."""
    phases = kept.get("phases")
    out: list[tuple[float, float]] = []
    for ph in phases if isinstance(phases, list) else ():
        a, b = (ph.get(k) if isinstance(ph, Mapping) else None for k in ("t_start", "t_end"))
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return []
        out.append((float(a), float(b)))
    return out


def with_run_sections(summary: dict[str, Any], kept: Mapping[str, Any]) -> dict[str, Any]:
    """`summary` (from the journal) with what its run's end kept beside it (`store_run_sections`):
    the run's own changes, phases, stage times, attempt errors, requests not sent and the
    cascade's steps in force."""
    for key in RUN_SECTIONS:
        if key in kept:
            summary[key] = kept[key]
    requests = kept.get("requests")
    if isinstance(requests, Mapping):
        summary["requests"].update((k, requests[k]) for k in RUN_REQUESTS if k in requests)
        project_costs(summary, summary["requests"].get("not_sent", 0))
    steps, cascade = kept.get("cascade_steps"), summary.get("cascade")
    if isinstance(steps, list) and isinstance(cascade, dict):
        cascade["steps"] = steps
    return summary


def _scan(p: Path, issues: JournalIssues, spans: SessionSpans) -> set[int]:
    """Pass 1: the hashes of ids that appear more than once, and each record's times to `spans`.
    Each id is held as an 8-byte hash (not a dict of a million id strings) until the repeats are
    known."""
    keys = array("q")
    key = keys.append
    for rec in read_journal(p, issues):
        key(hash(rec.id))
        spans.add(rec.t_scheduled, rec.t_sent + (rec.latency_ms or 0.0) / 1000.0)
    return repeated(keys)


def _tally(
    p: Path, twice: set[int], replay: Replay, trials: TrialTally
) -> tuple[RunStats, dict[str, RunStats], StageLog]:
    """Pass 2: the whole run's and each model's figures. Records of ids whose hash repeats (few:
    resumed ids) are held until the end so that the last one of each id counts (this second read
    reports nothing new). The intervals and the steady window (`replay`) need the records in
    journal order: fed here, or, when some ids repeat, by a third read that skips every record
    but the last of its id. Each trial's figures go to `trials`."""
    tally = Tally()
    stages = StageLog()
    held: dict[str, RequestRecord] = {}
    seen: dict[str, int] = {}
    for rec in read_journal(p):
        if twice and hash(rec.id) in twice:
            rec.text = None
            held.pop(rec.id, None)  # re-inserted: the dict keeps journal order of last records
            held[rec.id] = rec
            seen[rec.id] = seen.get(rec.id, 0) + 1
            continue
        if not twice:
            replay.add(rec)
        tally.count(rec)
        trials.add(rec)
        if rec.stage is not None:
            stages.record(rec)
    for rec in held.values():
        tally.count(rec)
        trials.add(rec)
        if rec.stage is not None:
            stages.record(rec)
    if twice:
        for rec in read_journal(p):
            if hash(rec.id) in twice:
                seen[rec.id] -= 1
                if seen[rec.id]:
                    continue  # a later record of this id counts
            replay.add(rec)
    return tally.overall, tally.models, stages


SESSION_ONLY = ("changes", "phases")
"""Summary keys a resumed run's whole summary takes from its last session: what the journal does
not hold (changes and phases, with `t` counted from that session's start)."""
SESSION_ONLY_REQUESTS = ("not_sent",)
"""`requests` keys only the last session knows (what it did not send)."""


def whole_journal_summary(session: Mapping[str, Any], path: str | os.PathLike[str]) -> dict[str, Any]:
    """The summary of a resumed run: the figures of its whole journal, every session, exactly as
    `oxconsole report` computes them; with what only the last session knows (its changes and
    phases, loop lag, GC, cool-downs, requests not sent). Raises OSError or NotAJournal."""
    whole = summary_from_journal(path, name=session.get("name"))
    out: dict[str, Any] = {**session, **whole}
    for key in SESSION_ONLY:
        if key in session:
            out[key] = session[key]
    mine = session.get("requests") or {}
    out["requests"] = {**mine, **whole["requests"]}
    for key in SESSION_ONLY_REQUESTS:
        if key in mine:
            out["requests"][key] = mine[key]
    project_costs(out, out["requests"].get("not_sent", 0))
    return out


def report_main(
    path: str,
    as_json: bool,
    plans: Mapping[str, PricePlan] | None = None,
    sweep: tuple[str, dict[str, Any]] | None = None,
) -> int:
    """`oxconsole report RESULTS.jsonl [--json] [--plans FILE]`: print the summary (priced under
    `plans`, else under the run's own); for a sweep's journal (`sweep`: its points table as text
    and its sweep object, `reports/sweepcurve.py`), the table after it, or the object as its `sweep`
    key. 0, or 2 if unreadable."""
    issues = JournalIssues()
    try:
        summary = summary_from_journal(path, issues=issues, plans=plans)
    except OSError as e:
        reason = e.strerror or str(e)
        print(f"oxconsole report: {path}: cannot read the results journal: {reason}", file=sys.stderr)
        return 2
    except NotAJournal as e:
        print(f"oxconsole report: {e}", file=sys.stderr)
        return 2
    for msg in [*issues.messages(path), *unused_overrides(plans, summary)]:
        print(f"oxconsole report: warning: {msg}", file=sys.stderr)
    if as_json:
        if sweep is not None:
            summary["sweep"] = sweep[1]
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        table = render_summary(summary, table_width(sys.stdout))
        sys.stdout.write(table + (sweep[0] if sweep is not None else ""))
    sys.stdout.flush()
    return 0
