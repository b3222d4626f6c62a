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
import textwrap
from array import array
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.idset import repeated
from oxconsole.journal.identify import NotAJournal, not_a_journal, not_a_record, sniff
from oxconsole.journal.meta import read_manifest
from oxconsole.journal.records import RUN_TIMES, RequestRecord, has_run_times
from oxconsole.journal.sessions import SessionSpans, sessions_of
from oxconsole.metrics.aggregate import RunStats, Tally, build_summary, phase_summary
from oxconsole.metrics.format import change_text
from oxconsole.metrics.goodput import goodput_lines, slo_target_of
from oxconsole.metrics.plans import project_costs
from oxconsole.metrics.plantable import plan_lines, stored_plans, unused_overrides
from oxconsole.metrics.stages import StageLog, journal_stages, stage_table

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan
from oxconsole.metrics.packing import packing_lines

__all__ = [
    "JournalIssues",
    "NotAJournal",
    "read_journal",
    "render_summary",
    "report_main",
    "summary_from_journal",
    "whole_journal_summary",
]

WIDTH = 80


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


# -- text ------------------------------------------------------------------------------------


NONE = "–"
"""Shown for a figure nothing measured (every request failed, no stream): never a made-up 0.0."""


def _num(v: Any, decimals: int = 1) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return NONE
    if abs(x) >= 100_000:
        return f"{x:,.0f}"
    return f"{x:,.{decimals}f}"


def _money(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return NONE
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.2f}"
    if abs(x) >= 1:
        return f"{x:.4f}"
    return f"{x:.6f}"


def _fit(s: str, width: int = WIDTH) -> str:
    s = s.rstrip()
    return s if len(s) <= width else s[: width - 1] + "…"


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


def _duration(s: float) -> str:
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{sec:02d}s"


def _g(d: Mapping[str, Any], *keys: str) -> Any:
    cur: Any = d
    for k in keys:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(k)
    return cur


def render_summary(summary: Mapping[str, Any]) -> str:
    """The summary as a plain-text table, no line longer than 80 columns."""
    s = summary
    lines = _totals_lines(s)
    lines += [_fit(x) for x in packing_lines(dict(s))]
    lines += _timing_lines(s)
    lines += _model_lines(s.get("models") or {})
    lines += _fallback_lines(s.get("models") or {})
    lines += _error_lines(s.get("errors") or {}, s.get("attempt_errors") or {})
    lines += _error_detail_lines(s.get("error_details") or {})
    lines += plan_lines(s)
    lines += _phase_lines(s.get("phases") or [], s.get("changes") or [])
    lines += stage_table(s.get("stages") or [])
    return "\n".join(lines) + "\n"


def _totals_lines(s: Mapping[str, Any]) -> list[str]:
    """Name, duration and start; requests, rates, tokens (how many estimated) and cost."""
    req = s.get("requests") or {}
    thr = s.get("throughput") or {}
    tok = s.get("tokens") or {}
    src = s.get("tokens_source") or {}
    estimated = " (estimated)" if src.get("estimate") else ""
    if src.get("estimate") and src.get("usage"):
        estimated = f" ({src['estimate']} of {src['estimate'] + src['usage']} estimated)"
    title = f"{s.get('name', '')}  ·  {_duration(float(s.get('duration_s') or 0.0))}"
    if (req.get("sessions") or 1) > 1:
        title += f" over {req['sessions']} sessions"
    if s.get("started_at"):
        title += f"  ·  started {s['started_at']}"
    not_sent = req.get("not_sent", 0)
    unsent = f"  {not_sent:,} not sent" if not_sent else "  stopped early" if not_sent is None else ""
    return [
        _fit(title),
        *_not_saved_lines(s),
        _fit(
            f"requests  {req.get('total', 0):,} total  {req.get('ok', 0):,} ok  "
            f"{req.get('error', 0):,} error  {req.get('retried', 0):,} retried{unsent}"
            + (f"  {req['fallbacks']:,} fell back" if req.get("fallbacks") else "")
        ),
        _fit(
            f"rate      {_num(thr.get('requests_per_s'), 2)} {'tasks/s' if s.get('packing') else 'req/s'}  "
            f"{_num(thr.get('output_tokens_per_s'), 1)} output tok/s"
        ),
        *(_fit(g) for g in goodput_lines(s)),
        _fit(f"tokens    in {tok.get('input', 0):,}  out {tok.get('output', 0):,}{estimated}"),
        _fit(f"cost      {_money(_g(s, 'cost', 'total'))}"),
    ]


def _not_saved_lines(s: Mapping[str, Any]) -> list[str]:
    """A run whose journal failed says so before any figure (`saved: false`)."""
    if s.get("saved") is not False:
        return []
    return [
        "NOT SAVED: the results journal could not be written; the run stopped at once.",
        _fit(f"  {s.get('save_error')}"),
        "  The figures below count only the requests written to the journal.",
    ]


def _timing_lines(s: Mapping[str, Any]) -> list[str]:
    """The latency table (10 + 6 * 11 = 76 columns), then the client's own loop lag and GC."""
    lines = [""]
    cols = ("mean", "p50", "p90", "p95", "p99", "max")
    lines.append(f"{'ms':<10}" + "".join(f"{c:>11}" for c in cols))
    for label, key in (
        ("TTFT", "ttft_ms"),
        ("ITL", "itl_ms"),
        ("latency", "latency_ms"),
        ("queue", "queue_ms"),
    ):
        row = s.get(key) or {}
        lines.append(_fit(f"{label:<10}" + "".join(f"{_num(row.get(c), 1):>11}" for c in cols)))
    lag = s.get("loop_lag_ms")
    if lag:
        # the client's own event-loop lag: every timing above may include up to this much
        lines.append(
            _fit(
                f"client loop lag  p50 {_num(lag.get('p50'), 1)}  p99 {_num(lag.get('p99'), 1)}  "
                f"max {_num(lag.get('max'), 1)} ms (timings above may include it)"
            )
        )
    gcs = s.get("gc")
    if gcs and gcs.get("collections"):
        lines.append(
            _fit(
                f"client GC        {gcs['collections']} collections, {_num(gcs.get('pause_ms'), 1)} ms "
                "of pauses (cycles from failures)"
            )
        )
    return lines


def _model_lines(models: Mapping[str, Any]) -> list[str]:
    """One row per model: 16 + 7 + 7 + 6 + 8 + 9 + 9 + 9 + 9 = 80 columns."""
    if not models:
        return []
    lines = [
        "",
        f"{'model':<16}{'reqs':>7}{'ok':>7}{'err':>6}{'req/s':>8}"
        f"{'p50 lat':>9}{'p99 lat':>9}{'p50 ttft':>9}{'cost':>9}",
    ]
    for name, m in models.items():
        r = m.get("requests") or {}
        lines.append(
            _fit(
                f"{_cut(str(name), 15):<16}{_count(r.get('total')):>7}{_count(r.get('ok')):>7}"
                f"{_count(r.get('error')):>6}{_num(_g(m, 'throughput', 'requests_per_s'), 2):>8}"
                f"{_num(_g(m, 'latency_ms', 'p50'), 0):>9}{_num(_g(m, 'latency_ms', 'p99'), 0):>9}"
                f"{_num(_g(m, 'ttft_ms', 'p50'), 0):>9}{_money(_g(m, 'cost', 'total')):>9}"
            )
        )
    return lines


def _fallback_lines(models: Mapping[str, Any]) -> list[str]:
    """Which models requests fell back from, and how many (they are counted where they ended)."""
    left = [(str(name), _g(m, "requests", "fallbacks")) for name, m in models.items()]
    left = [(name, n) for name, n in left if isinstance(n, int) and n]
    if not left:
        return []
    return [_fit("fell back from  " + "  ".join(f"{name} {n:,}" for name, n in left))]


def _error_lines(errors: Mapping[str, Any], attempts: Mapping[str, Any]) -> list[str]:
    """Final errors by class, then attempts retried by class."""
    lines: list[str] = []
    if errors or attempts:
        lines.append("")
    if errors:
        lines.append(_fit("errors    " + "  ".join(f"{k} {v:,}" for k, v in errors.items())))
    if attempts:
        lines.append(
            _fit("retried   " + "  ".join(f"{k} {v:,}" for k, v in attempts.items()) + " (attempts)")
        )
    return lines


def _error_detail_lines(details: Mapping[str, Any]) -> list[str]:
    """The first detail of each error class, wrapped (not cut) to 80 columns: the hint that says
    why (``is base_url ... missing /v1?``) is often at the end."""
    lines: list[str] = []
    for cls, detail in details.items():
        lead = "detail    " if not lines else " " * 10
        lines += textwrap.wrap(
            f"{cls}: {detail}",
            WIDTH,
            initial_indent=lead,
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
    return lines


def _phase_lines(phases: list[Any], changes: list[Any]) -> list[str]:
    """One row per phase with what started it (15 + 7 + 8 + 9 + 9 + 9 = 57 columns, the rest for
    what changed, wrapped in its column); with changes but one phase, the list of changes."""
    if changes and len(phases) > 1:
        lines = [
            "",
            f"{'phase':<15}{'ok':>7}{'req/s':>8}{'p50 lat':>9}{'p99 lat':>9}{'p50 ttft':>9}  changed",
        ]
        for ph in phases:
            span = f"{_num(ph.get('t_start'), 1)}-{_num(ph.get('t_end'), 1)}s"
            what = ", ".join(change_text(c) for c in ph.get("settings") or []) or "start"
            row = (
                f"{_cut(span, 14):<15}{_count(_g(ph, 'requests', 'ok')):>7}"
                f"{_num(_g(ph, 'throughput', 'requests_per_s'), 2):>8}"
                f"{_num(_g(ph, 'latency_ms', 'p50'), 0):>9}{_num(_g(ph, 'latency_ms', 'p99'), 0):>9}"
                f"{_num(_g(ph, 'ttft_ms', 'p50'), 0):>9}  "
            )
            wrapped = textwrap.wrap(what, WIDTH - len(row), break_on_hyphens=False) or [""]
            lines.append(row + wrapped[0])
            lines += [" " * len(row) + more for more in wrapped[1:]]
        return lines
    if changes:
        return ["", "changes", *(_fit(f"  {_num(c.get('t'), 1):>8}s  {change_text(c)}") for c in changes)]
    return []


def _count(v: Any) -> str:
    try:
        n = int(v)
    except (TypeError, ValueError):
        return NONE
    return f"{n:,}" if n < 1_000_000 else f"{n / 1e6:.1f}M"


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
        sys.stdout.write(render_summary(summary))
    sys.stdout.flush()
    return 0
