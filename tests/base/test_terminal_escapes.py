"""A server's error body carrying terminal control sequences (OSC 52 clipboard write, clear
screen) is shown as text, never obeyed: the headless summary and `report` print no ESC."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from aiohttp import web

from tests.support import oxconsole
from tests.support.http import chat_server
from tests.support.workloads import write_workload

HOSTILE = "boom \x1b]52;c;SGVsbG8=\x07 and \x1b[2J \x9b31m done"


async def test_server_control_sequences_never_reach_the_terminal(tmp_path: Path) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": HOSTILE}}, status=500)

    journal = tmp_path / "run" / "results.jsonl"
    async with chat_server(handler) as base:
        sets = {
            "name": "esc",
            "run.concurrency": 2,
            "output.results": str(journal),
            "prompts.items": ["a", "b", "c"],
        }
        write_workload(
            "server", tmp_path, {**sets, "endpoints.default.base_url": f"{base}/v1"}, file="w.toml"
        )
        run = await asyncio.to_thread(oxconsole, "w.toml", "--headless", cwd=tmp_path)
    assert "SGVsbG8=" in run.stdout + run.stderr, (run.returncode, run.stdout, run.stderr)
    report = await asyncio.to_thread(oxconsole, "report", str(journal), cwd=tmp_path)
    for name, out in (("run", run), ("report", report)):
        text = out.stdout + out.stderr
        assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text, (name, text)
    assert "\\x1b]52" in report.stdout + report.stderr, report.stdout


def test_the_console_errors_panel_shows_control_sequences_as_text() -> None:
    import dataclasses

    from oxconsole.ui.lines import Palette
    from oxconsole.ui.panels.errors import errors_lines
    from tests.support.ui import fixed_snapshot

    base = fixed_snapshot()
    snap = dataclasses.replace(base, error_details={**base.error_details, "http_500": HOSTILE})
    text = "\n".join(x.plain for x in errors_lines(snap, Palette(), 78, 20))
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text, text
    assert "\\x1b[2J" in text, text


# --- names from a crafted workload or journal: terminal, Markdown, CSV ----------------------------

OSC = "\x1b]52;c;SGVsbG8=\x07\x1b[2J"
"""A clipboard write and a clear-screen: what a name must never send to a terminal."""

NAMES = (f"evil{OSC}[bold]m[/bold]", '=HYPERLINK("http://x","y")', "<script>alert(1)</script>|x`y`")
CLASSES = ("@SUM(1+1)", f"cls{OSC}", "+cmd|' /C calc'!A0", "-2+3", "\tx", "\rline")


def hostile_journal(path: Path) -> Path:
    """30 records over three hostile model names, half failed with hostile error classes."""
    import orjson

    lines = []
    for i in range(30):
        rec = {
            "id": f"q{i}", "model": NAMES[i % 3], "endpoint": "default", "status": "ok", "attempts": 1,
            "t_scheduled": 1_796_504_861.8 + i * 0.1, "t_sent": 1_796_504_861.8 + i * 0.1, "queue_ms": 0.0,
            "latency_ms": 80.0, "ttft_ms": 70.0, "input_tokens": 10, "output_tokens": 2,
            "tokens_source": "usage", "cost": 0.001, "tag": "=1+1",
        }  # fmt: skip
        if i % 2 == 0:
            rec.update(status="error", error=CLASSES[(i // 2) % 6], error_detail=f"detail {OSC}")
            del rec["ttft_ms"]
        lines.append(orjson.dumps(rec))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def no_control(text: str) -> list[str]:
    """The control characters in ``text`` that a terminal would obey (tab and newline aside)."""
    return sorted({repr(c) for c in text if (ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0})


def test_report_of_a_crafted_journal_prints_names_as_text(tmp_path: Path) -> None:
    journal = hostile_journal(tmp_path / "results.jsonl")
    out = oxconsole("report", str(journal), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert no_control(text) == [], no_control(text)
    assert "evil\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J[bold]m[/bold]" in text, text
    assert "\\x09x" in text and "\\x0dline" in text, text  # a tab or CR in a class: written out
    assert "\t" not in text, text


def test_markdown_of_a_crafted_journal_escapes_html_pipes_and_code(tmp_path: Path) -> None:
    journal = hostile_journal(tmp_path / "results.jsonl")
    out = oxconsole("report", str(journal), "--markdown", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    md = out.stdout
    assert "<script>" not in md and "</script>" not in md, md
    assert "\\<script\\>alert(1)\\</script\\>\\|x\\`y\\`" in md, md
    assert no_control(md) == [], no_control(md)
    for row in (ln for ln in md.splitlines() if ln.startswith("| ")):  # every row has its columns
        cells = [c for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        header = next(h for h in md.splitlines() if h.startswith("| ") and h.count("|") == row.count("|"))
        assert len(cells) == len(re.split(r"(?<!\\)\|", header)[1:-1]), row


def test_csv_of_a_crafted_journal_runs_no_formula_and_reads_back(tmp_path: Path) -> None:
    import csv
    import dataclasses

    from oxconsole.journal.reading import read_journal
    from oxconsole.reports.exports import record_from_row

    journal = hostile_journal(tmp_path / "results.jsonl")
    out = oxconsole("report", str(journal), "--csv", str(tmp_path / "r.csv"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "r.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for col, cell in row.items():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (col, cell)
    assert {r["model"] for r in rows} >= {'\'=HYPERLINK("http://x","y")'}, {r["model"] for r in rows}
    assert {r["error"] for r in rows if r["error"]} >= {"'@SUM(1+1)", "'+cmd|' /C calc'!A0", "'-2+3", "'\tx"}
    records = [dataclasses.replace(r, error_detail=None) for r in read_journal(journal)]  # no --with-text
    assert [record_from_row(r) for r in rows] == records  # the quote comes off again


def test_validate_prints_a_crafted_workloads_names_as_text(tmp_path: Path) -> None:
    name = "evil\x1b]52;c;SGVsbG8=\x07\x1b[2J"
    write_workload("minimal", tmp_path, {"models.0.name": name, "prompts.items": ["a"]}, file="w.toml")
    out = oxconsole("validate", "w.toml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert no_control(out.stdout) == [] and "evil\\x1b]52" in out.stdout, out.stdout
