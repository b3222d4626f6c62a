"""`oxconsole report` beyond one summary: HTML, several journals compared, CSV and Markdown.

Why this module exists: the command line parses the flags and hands them here, so `cli/main.py` and
`report.py` keep one line each for these outputs; each output lives in its own module and this
one only decides which to run and turns unreadable journals into exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oxconsole.workload.plans import PricePlan

__all__ = ["ReportRequest", "report_command", "wants_more"]


@dataclass(frozen=True, slots=True)
class ReportRequest:
    """What `oxconsole report` was asked for (the parsed command line)."""

    results: tuple[str, ...]
    as_json: bool = False
    html: str | None = None
    csv: str | None = None
    markdown: bool = False
    with_text: bool = False
    plans: str | None = None
    """`--plans FILE.toml`: price the journals under the [plans.*] tables of FILE."""


def wants_more(req: ReportRequest) -> bool:
    """True when the request needs this package (not only the one summary of `summary.py`): a
    sweep's journal has its points table too."""
    return len(req.results) > 1 or bool(req.html or req.csv or req.markdown or req.plans) or _is_sweep(req)


def _is_sweep(req: ReportRequest) -> bool:
    from pathlib import Path

    from oxconsole.journal.manifest import read_manifest

    return len(req.results) == 1 and isinstance(read_manifest(Path(req.results[0])).get("sweep"), Mapping)


def _read_plans(path: str) -> Mapping[str, PricePlan] | None:
    """The plans of `--plans FILE`, or None having said why they cannot be read (exit 2)."""
    from oxconsole.workload import WorkloadError, load_plans

    try:
        return load_plans(path)
    except WorkloadError as e:
        for line in e.errors:
            print(f"oxconsole report: {line}", file=sys.stderr)
        return None


def _fail(path: str, e: OSError) -> int:
    reason = e.strerror or str(e)
    print(f"oxconsole report: {path}: cannot read the results journal: {reason}", file=sys.stderr)
    return 2


def _warn_skipped(path: str) -> None:
    """What the outputs leave out of the journal (torn, invalid, implausible lines), said as the
    summary says it; the summary's own run says it when it runs."""
    from oxconsole.journal.reading import JournalIssues, journal_items
    from oxconsole.journal.records import RequestRecord

    issues = JournalIssues()
    for _ in journal_items(path, RequestRecord.from_json_dict, issues):  # a value of the wrong type too
        pass
    for msg in issues.messages(path):
        print(f"oxconsole report: warning: {msg}", file=sys.stderr)


def report_command(req: ReportRequest) -> int:
    """Run the outputs asked for; 0, or 2 when a journal cannot be read, a file written or the
    plans of `--plans` read."""
    plans = None
    if req.plans:
        plans = _read_plans(req.plans)
        if plans is None:
            return 2
    if len(req.results) > 1:
        from oxconsole.reports.compare import compare_main

        for path in req.results:
            try:
                _warn_skipped(path)
            except OSError:
                pass  # said by compare_main, which cannot read it either
        return compare_main(
            req.results, as_json=req.as_json, markdown=req.markdown, html=req.html, plans=plans
        )
    path = req.results[0]
    if req.as_json or not (req.html or req.csv or req.markdown):
        from oxconsole.reports.summary import report_main
        from oxconsole.reports.sweepcurve import sweep_report

        code = report_main(path, req.as_json, plans, sweep_report(path))
        if code:
            return code
    try:
        if not req.as_json and (req.html or req.csv or req.markdown):
            _warn_skipped(path)
        if req.html:
            from oxconsole.reports.html import write_html_report

            write_html_report(path, req.html, plans=plans)
            print(f"oxconsole report: wrote {req.html}", file=sys.stderr)
        if req.csv:
            from oxconsole.reports.exports import write_csv

            n = write_csv(path, req.csv, with_text=req.with_text)
            print(f"oxconsole report: wrote {n:,} records to {req.csv}", file=sys.stderr)
        if req.markdown:
            from oxconsole.reports.exports import render_markdown
            from oxconsole.reports.summary import summary_from_journal

            sys.stdout.write(render_markdown(summary_from_journal(path, plans=plans)))
    except OSError as e:
        if e.filename not in (None, path):
            print(f"oxconsole report: {e.filename}: cannot write: {e.strerror or e}", file=sys.stderr)
            return 2
        return _fail(path, e)
    return 0
