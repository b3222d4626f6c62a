"""The HTML report: one self-contained file (structure, offline-ness, nothing leaks), the run's
own `report.html` with `[output] html = true`, and the page as a real browser renders it."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from oxconsole.reports.html import write_html_report
from oxconsole.reports.summary import summary_from_journal
from oxconsole.reports.summarytable import AUTO_ROWS
from oxconsole.reports.timeline import build_timeline, slot_width
from tests.support.report import SECRET_DETAIL, SECRET_TEXT, parse, secret_records, sim_run, write_journal

SECTIONS = {"summary", "throughput", "latency-over-time", "distributions", "models", "errors"}


def test_structure_inline_only_and_nothing_leaks(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records())
    out = write_html_report(journal, tmp_path / "r.html")
    text = out.read_text()
    page = parse(text)
    assert page.fetches == []  # no src/href at all: nothing to load
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert "http://" not in text and "https://" not in text and "url(" not in text and "@import" not in text
    assert page.tags.count("style") == 1
    assert page.ids >= SECTIONS
    assert page.tags.count("svg") == 2 + 3 + 3 + 1  # throughput, over time, distributions, errors
    assert page.tags.count("path") >= 2 + 9
    assert SECRET_TEXT not in text and SECRET_DETAIL not in text
    assert "live changes are not journaled" in text
    assert "http_500" in text and "timeout" in text  # error classes (not details) are shown
    assert len(text) < 200_000


def test_changes_become_markers_and_phases(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records(500))
    s = summary_from_journal(journal)
    s["changes"] = [{"t": 2.0, "what": "concurrency", "from": 8, "to": 32}]
    s["phases"] = [
        {**s["phases"][0], "t_end": 2.0},
        {**s["phases"][0], "t_start": 2.0, "settings": s["changes"]},
    ]
    text = write_html_report(journal, tmp_path / "r.html", s).read_text()
    page = parse(text)
    assert text.count("concurrency 8→32") >= 3  # a marker on each chart over time, and the phase
    assert "phases" in page.ids
    assert "not journaled" not in text


def test_timeline_slots_add_up(tmp_path: Path) -> None:
    recs = secret_records(3000)
    journal = write_journal(tmp_path / "run" / "results.jsonl", recs)
    tl = build_timeline(journal)
    assert sum(s.ok for s in tl.slots) == sum(r.status == "ok" for r in recs)
    assert sum(sum(s.errors.values()) for s in tl.slots) == sum(r.status != "ok" for r in recs)
    assert sum(s.output_tokens for s in tl.slots) == sum(r.output_tokens for r in recs if r.status == "ok")
    assert tl.whole["latency_ms"].count == sum(r.status == "ok" for r in recs)
    assert len(tl.slots) <= 120
    assert slot_width(30) == 1 and slot_width(121) == 2 and slot_width(3600) == 30


def test_empty_journal_still_renders(tmp_path: Path) -> None:
    journal = tmp_path / "results.jsonl"
    journal.write_text("")
    text = write_html_report(journal, tmp_path / "r.html").read_text()
    assert parse(text).ids >= SECTIONS


def test_run_writes_report_html_beside_its_journal(tmp_path: Path) -> None:
    journal = sim_run(tmp_path / "run", count=40, sets={"output.html": True})
    report = journal.parent / "report.html"
    page = parse(report.read_text())
    assert page.ids >= SECTIONS and page.fetches == []


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_chromium_renders_the_report(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records())
    out = write_html_report(journal, tmp_path / "r.html")
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [*flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=90, check=True
    ).stdout
    page = parse(dom)
    assert page.ids >= SECTIONS
    assert page.tags.count("svg") == 9 and "script" not in page.tags
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*flags, "--window-size=1440,2400", f"--screenshot={shot}", out.as_uri()],
        capture_output=True,
        timeout=90,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_auto_concurrency_draws_its_search_not_every_probe(tmp_path: Path) -> None:
    """Holding, auto probes every few seconds: the charts draw its first AUTO_ROWS changes (and
    every other change), the phases table lists each."""
    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records(500))
    s = summary_from_journal(journal)
    limits = [4, 8, 16, 12, 9, 11, 10, 13, 10, 14, 10, 15, 10]  # each step's label unique
    steps = list(itertools.pairwise(limits))
    s["changes"] = [
        {"t": 0.4 * i, "what": "concurrency", "from": a, "to": b, "by": "auto"}
        for i, (a, b) in enumerate(steps, start=1)
    ]
    s["changes"].append({"t": 5.5, "what": "rate", "from": 0, "to": 5.0, "by": "key"})
    s["phases"] = [{**s["phases"][0], "t_start": c["t"], "settings": [c]} for c in s["changes"]]
    text = write_html_report(journal, tmp_path / "r.html", s).read_text()
    everywhere = text.count("rate unlimited→5.00/s")  # a rule on each chart over time, and its phase row
    assert everywhere >= 3
    counts = [text.count(f"concurrency {a}→{b}") for a, b in steps]
    assert counts == [everywhere] * AUTO_ROWS + [1] * (len(steps) - AUTO_ROWS), counts
    assert f"Of auto concurrency's {len(steps)} changes, the first {AUTO_ROWS} are drawn" in text
