"""Crafted journals: values no run produces are left out with a line saying which records, and
`--resume` and `report` count every skipped line the same way.

The HTML report runs in a child process whose address space is capped (RLIMIT_AS), so a report
that would grow without bound fails fast instead of taking the machine's memory.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.journal import ok_ids
from oxconsole.journal.records import RequestRecord
from oxconsole.reports.summary import JournalIssues, summary_from_journal

MEMORY_CAP = 1 << 30
"""Address space the report's process may use: ten times what a report of a few records needs."""

T = 1_700_000_000.0


def good(i: int) -> dict[str, object]:
    return RequestRecord(f"r{i}", "m", "e", "ok", 1, T + i, T + i, 1.0, 50.0, output_tokens=3).to_json_dict()


ODD: list[dict[str, Any]] = [
    {"latency_ms": 1e308},
    {"t_sent": 1e18},
    {"input_tokens": 2**62},
    {"ttft_ms": -4.0},
    {"cost": 1e300},
]


def crafted(tmp_path: Path) -> Path:
    """Three good records, one record of each odd value, a record without run times and a torn
    last line."""
    lines = [orjson.dumps(good(i)) for i in range(3)]
    lines += [orjson.dumps({**good(10 + k), **odd}) for k, odd in enumerate(ODD)]
    lines.append(orjson.dumps({"id": "typed", "status": "ok"}))
    path = tmp_path / "run" / "results.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines) + b'\n{"id": "torn", "sta')
    return path


def test_report_leaves_out_impossible_values_and_says_which(tmp_path: Path) -> None:
    path = crafted(tmp_path)
    issues = JournalIssues()
    s = summary_from_journal(path, issues=issues)
    assert s["requests"]["total"] == 3, s["requests"]
    assert issues.refused == len(ODD), issues
    said = " ".join(issues.messages(path))
    assert "left out 5 record(s) with values no run produces" in said, said
    assert "line 4: latency_ms=1e+308" in said and "line 5: t_sent=1e+18" in said, said
    assert f"line 6: input_tokens={2**62}" in said, said


def test_resume_counts_skipped_lines_as_report_does(tmp_path: Path) -> None:
    path = crafted(tmp_path)
    report = JournalIssues()
    summary_from_journal(path, issues=report)
    done, resume = ok_ids(path)
    assert sorted(done) == ["r0", "r1", "r2"], sorted(done)  # an odd record is not taken as done
    assert resume.messages(path) == report.messages(path), (resume, report)
    assert resume.skipped() == len(ODD) + 2, resume  # the odd ones, the untimed one, the torn one


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.mark.parametrize("odd", ODD[:2], ids=["latency 1e308", "t_sent 1e18"])
def test_an_html_report_of_a_crafted_journal_stays_small(tmp_path: Path, odd: dict[str, object]) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in [good(0), good(1), {**good(2), **odd}]))
    out = tmp_path / "report.html"
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole", "report", str(path), "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_cap_memory,
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    size = out.stat().st_size
    assert size < 2_000_000, size
    assert "line 3:" in r.stderr and "values no run produces" in r.stderr, r.stderr


WRONG_TYPES: list[dict[str, Any]] = [{"text": 5}, {"tag": [1]}, {"attempt_errors": "x"}, {"error": {"a": 1}}]
"""Fields a line may carry with a value of the wrong type: each such line is skipped and said."""


@pytest.mark.parametrize(
    "args",
    [(), ("--json",), ("--markdown",), ("--csv", "r.csv"), ("--html", "r.html"), ("SAME",)],
    ids=["table", "json", "markdown", "csv", "html", "compare"],
)
def test_a_field_of_the_wrong_type_is_a_skipped_line_never_a_traceback(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`report` of a journal whose lines carry a text field that is a number, a list where a
    string goes, `attempt_errors` that is a string: every output (and `report A A`) reads the good
    records and says which lines it skipped, as for any bad line; exit 0, no traceback. An
    answer of a cascade whose figures are of the wrong type counts with what it has."""
    from tests.support import oxconsole_here

    lines = [orjson.dumps(good(i)) for i in range(3)]
    lines += [orjson.dumps({**good(10 + k), **odd}) for k, odd in enumerate(WRONG_TYPES)]
    answers = [{"model": "m", "cost": "x", "latency_ms": "y", "input_tokens": -5}]
    lines.append(orjson.dumps({**good(20), "answers": answers}))
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    argv = ("report", str(path), *(a if a != "SAME" else str(path) for a in args))
    r = oxconsole_here(*argv, cwd=tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert "skipped 4 invalid line(s) (line 4, 5, 6, 7)" in r.stderr, r.stderr
    if args == ("--json",):
        assert orjson.loads(r.stdout)["requests"]["total"] == 4, r.stdout
