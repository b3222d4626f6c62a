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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.idset import repeated
from oxconsole.journal.identify import NotAJournal, not_a_journal, not_a_record, sniff
from oxconsole.journal.manifest import read_manifest
from oxconsole.journal.records import RUN_TIMES, RequestRecord, has_run_times
from oxconsole.journal.sessions import SessionSpans, sessions_of
from oxconsole.metrics.aggregate import RunStats, Tally, build_summary, phase_summary
from oxconsole.metrics.goodput import slo_target_of
from oxconsole.metrics.plans import project_costs, stored_plans, unused_overrides
from oxconsole.metrics.stages import StageLog, journal_stages
from oxconsole.summarytable import render_summary, table_width

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


@dataclass(slots=True)
class JournalIssues:
    """What `read_journal` skipped: filled in as the journal is read."""

    torn_last: bool = False
    """The last line was incomplete or invalid (a crash while writing it): skipped."""
    torn_line: int = 0
    invalid: int = 0
    """Invalid lines before the last one (skipped too; should not happen)."""
    invalid_lines: list[int] = field(default_factory=list)
    """Line numbers of the first few invalid lines."""
    records: int = 0
    no_times: int = 0
    """Records without the times a run writes (`RUN_TIMES`): typed or injected by hand, ignored."""
    first_problem: tuple[int, str] | None = None
    """The first line that is not a record, and why (to tell a file that is not a journal)."""

    def messages(self, path: str | os.PathLike[str]) -> list[str]:
        out: list[str] = []
        if self.torn_last:
            out.append(f"{os.fspath(path)}: line {self.torn_line}: skipped an incomplete last line")
        if self.invalid:
            where = ", ".join(map(str, self.invalid_lines))
            more = ", ..." if self.invalid > len(self.invalid_lines) else ""
            out.append(f"{os.fspath(path)}: skipped {self.invalid} invalid line(s) (line {where}{more})")
        if self.no_times:
            times = " and ".join(RUN_TIMES)
            out.append(
                f"{os.fspath(path)}: ignored {self.no_times} record(s) without run times ({times}): "
                "not written by a run"
            )
        return out


NO_TIMES = "a record without run times"


def _parse(line: bytes) -> RequestRecord | str:
    """The record on a journal line, or why the line holds none (`NO_TIMES`: a record, ignored)."""
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "binary data" if b"\0" in line else "not JSON"
    problem = not_a_record(d)
    if problem is not None:
        return problem
    if not has_run_times(d):
        return NO_TIMES
    try:
        return RequestRecord.from_json_dict(d)
    except (ValueError, TypeError, KeyError):
        return "a JSON object with values of the wrong type"


def read_journal(
    path: str | os.PathLike[str],
    issues: JournalIssues | None = None,
    on_skip: Callable[[int, bool], None] | None = None,
) -> Iterator[RequestRecord]:
    """Stream the records of a results journal, in file order, in constant memory.

    Invalid lines are skipped: a bad *last* line (torn by a crash) sets ``issues.torn_last``,
    any other bad line counts in ``issues.invalid``; ``on_skip(line_no, is_last)`` is called for
    each. Records without the times a run writes are ignored (``issues.no_times``). Blank lines
    are ignored. Raises OSError when the file cannot be opened or read.
    """
    iss = issues if issues is not None else JournalIssues()
    pending = 0  # line number of an invalid line not yet known to be the last one

    def middle(line_no: int) -> None:
        iss.invalid += 1
        if len(iss.invalid_lines) < 5:
            iss.invalid_lines.append(line_no)
        if on_skip is not None:
            on_skip(line_no, False)

    with open(path, "rb") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if pending:
                middle(pending)
                pending = 0
            rec = _parse(line)
            if rec is NO_TIMES:
                iss.no_times += 1
                continue
            if isinstance(rec, str):
                if iss.first_problem is None:
                    iss.first_problem = (line_no, rec)
                pending = line_no
                continue
            iss.records += 1
            yield rec
    if pending:
        iss.torn_last = True
        iss.torn_line = pending
        if on_skip is not None:
            on_skip(pending, True)


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
    ``t_sent + latency``. ``changes`` are not journaled, so they are empty and there is one phase.
    Raises NotAJournal when the file holds lines but no record a run writes.
    """
    p = Path(path)
    iss = issues if issues is not None else JournalIssues()
    sniff(p)
    manifest = read_manifest(p)
    spans = SessionSpans(sessions_of(manifest))
    twice = _scan(p, iss, spans)
    if not iss.records and iss.first_problem is not None:
        raise NotAJournal(not_a_journal(p, *iss.first_problem))
    overall, models, stages = _tally(p, twice)
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
    return journal_stages(summary, stages, spans.running_s())


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


def _tally(p: Path, twice: set[int]) -> tuple[RunStats, dict[str, RunStats], StageLog]:
    """Pass 2: the whole run's and each model's figures. Records of ids whose hash repeats (few:
    resumed ids) are held until the end so that the last one of each id counts (this second read
    reports nothing new)."""
    tally = Tally()
    stages = StageLog()
    held: dict[str, RequestRecord] = {}

    for rec in read_journal(p):
        if twice and hash(rec.id) in twice:
            rec.text = None
            held.pop(rec.id, None)  # re-inserted: the dict keeps journal order of last records
            held[rec.id] = rec
            continue
        tally.count(rec)
        if rec.stage is not None:
            stages.record(rec)
    for rec in held.values():
        tally.count(rec)
        if rec.stage is not None:
            stages.record(rec)
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


def report_main(path: str, as_json: bool, plans: Mapping[str, PricePlan] | None = None) -> int:
    """`oxconsole report RESULTS.jsonl [--json] [--plans FILE]`: print the summary (priced under
    `plans`, else under the run's own); 0, or 2 if unreadable."""
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
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_summary(summary, table_width(sys.stdout)))
    sys.stdout.flush()
    return 0
