"""Exports: the CSV round trip (one row per record, text only with --with-text) and Markdown."""

from __future__ import annotations

import csv
from pathlib import Path

from oxconsole.reports.exports import CSV_COLUMNS, record_from_row, write_csv
from oxconsole.reports.summary import read_journal
from tests.support import oxconsole_here
from tests.support.report import SECRET_DETAIL, SECRET_TEXT, secret_records, write_journal


def test_csv_round_trip(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records(1500))
    out = tmp_path / "r.csv"
    assert write_csv(journal, out) == 1500
    text = out.read_text()
    assert SECRET_TEXT not in text and SECRET_DETAIL not in text
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    for rec, row in zip(read_journal(journal), rows, strict=True):
        rec.text = rec.error_detail = None  # left out without --with-text
        back = record_from_row(row)
        back.error_detail = None
        assert back == rec


def test_csv_with_text_keeps_text_and_details(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records(50))
    out = tmp_path / "r.csv"
    r = oxconsole_here("report", str(journal), "--csv", str(out), "--with-text", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [record_from_row(x) for x in rows] == list(read_journal(journal))
    assert out.stat().st_mode & 0o777 == 0o600, oct(out.stat().st_mode)  # owner-only, like the journal


def test_markdown_tables(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records(300))
    r = oxconsole_here("report", str(journal), "--markdown", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert md.startswith("### run")
    assert "| ms | mean | p50 | p90 | p95 | p99 | max |" in md
    assert "| model | requests |" in md and "| alpha |" in md and "| http_500 |" in md
    assert SECRET_TEXT not in md and SECRET_DETAIL not in md
    tables = [ln for ln in md.splitlines() if ln.startswith("|")]
    assert all(ln.endswith("|") for ln in tables), [ln for ln in tables if not ln.endswith("|")][:5]
