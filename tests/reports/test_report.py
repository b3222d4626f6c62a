"""Tests for oxconsole.reports.summary: journal reading, a summary from a journal, the table, the command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import Collector
from oxconsole.reports.summary import (
    JournalIssues,
    read_journal,
    render_summary,
    report_main,
    summary_from_journal,
)
from oxconsole.reports.summarytable import AUTO_ROWS
from tests.support.metrics import FakeClock, assert_summary_close, exact_summary, make_records


def write_journal(path: Path, recs: list[RequestRecord], tail: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for r in recs:
            f.write(orjson.dumps(r.to_json_dict()) + b"\n")
        f.write(tail)


def collector_summary(recs: list[RequestRecord], duration: float) -> dict[str, Any]:
    clock = FakeClock()
    c = Collector(["alpha", "beta"], started_at=recs[0].t_scheduled, clock=clock)
    for i, r in enumerate(recs):
        clock.t = 1000.0 + i * 0.01
        c.record(r)
    return c.summary("my-run", duration)


COMPARED = (
    "name",
    "requests",
    "throughput",
    "latency_ms",
    "ttft_ms",
    "itl_ms",
    "queue_ms",
    "tokens",
    "tokens_source",
    "cost",
    "errors",
    "attempt_errors",
    "models",
)


def test_journal_summary_equals_collector_summary(tmp_path: Path) -> None:
    recs = make_records(3000)
    path = tmp_path / "my-run" / "results.jsonl"
    write_journal(path, recs)
    from_journal = summary_from_journal(path)
    duration = max(r.t_sent + (r.latency_ms or 0) / 1000 for r in recs) - min(r.t_scheduled for r in recs)
    assert from_journal["duration_s"] == round(duration, 3)
    live = collector_summary(recs, duration)
    for key in COMPARED:
        assert from_journal[key] == live[key], key
    # and both are the records' own figures, computed here without the collector
    ok = [r for r in recs if r.status == "ok"]
    assert from_journal["requests"] == {
        "total": len(recs),
        "ok": len(ok),
        "error": len(recs) - len(ok),
        "cancelled": 0,
        "retried": sum(r.attempts > 1 for r in recs),
        "fallbacks": sum(bool(r.models_tried) for r in recs),
        "sessions": 1,
    }
    for metric in ("latency_ms", "ttft_ms", "itl_ms"):
        assert_summary_close(from_journal[metric], exact_summary([getattr(r, metric) for r in ok]))
    assert from_journal["tokens"] == {
        "input": sum(r.input_tokens for r in recs),
        "output": sum(r.output_tokens for r in recs),
    }
    assert from_journal["cost"]["total"] == pytest.approx(sum(r.cost for r in recs))
    errors: dict[str, int] = {}
    for r in recs:
        if r.error:
            errors[r.error] = errors.get(r.error, 0) + 1
    assert from_journal["errors"] == errors
    assert from_journal["started_at"] == live["started_at"]
    assert from_journal["changes"] == []
    assert from_journal["phases"][0]["requests"] == {
        k: v for k, v in live["requests"].items() if k != "sessions"
    }
    assert summary_from_journal(path, name="other")["name"] == "other"


def test_duplicate_ids_last_record_wins(tmp_path: Path) -> None:
    first = RequestRecord(
        "a", "alpha", "e", "error", 3, 100.0, 100.5, 0.0, None, error="timeout", error_detail="t"
    )
    ok_b = RequestRecord("b", "alpha", "e", "ok", 1, 100.0, 100.1, 0.0, 200.0)
    resumed = RequestRecord("a", "alpha", "e", "ok", 1, 200.0, 200.0, 0.0, 1000.0)
    path = tmp_path / "run" / "results.jsonl"
    write_journal(path, [first, ok_b, resumed])
    s = summary_from_journal(path)
    assert s["requests"] == {
        "total": 2,
        "ok": 2,
        "error": 0,
        "cancelled": 0,
        "retried": 0,
        "fallbacks": 0,
        "sessions": 1,
    }
    assert s["errors"] == {}
    assert s["duration_s"] == 101.0  # 100.0 .. 200.0 + 1 s


def test_torn_last_line_skipped_and_reported(tmp_path: Path) -> None:
    recs = make_records(20)
    path = tmp_path / "r" / "results.jsonl"
    write_journal(path, recs, tail=b'{"id": "torn", "model": "al')
    issues = JournalIssues()
    skipped: list[tuple[int, bool]] = []
    got = list(read_journal(path, issues, on_skip=lambda n, last: skipped.append((n, last))))
    assert [r.id for r in got] == [r.id for r in recs]
    assert issues.torn_last and issues.torn_line == 21 and issues.invalid == 0
    assert skipped == [(21, True)]
    assert issues.records == 20
    assert "incomplete last line" in issues.messages(path)[0]


def test_invalid_middle_lines_counted(tmp_path: Path) -> None:
    recs = make_records(5)
    path = tmp_path / "r" / "results.jsonl"
    lines = [orjson.dumps(r.to_json_dict()) for r in recs]
    lines.insert(2, b"not json")
    lines.insert(4, b"[1, 2]")
    lines.insert(5, b"")
    path.parent.mkdir()
    path.write_bytes(b"\n".join(lines) + b"\n")
    issues = JournalIssues()
    got = list(read_journal(path, issues))
    assert len(got) == 5
    assert issues.invalid == 2 and issues.invalid_lines == [3, 5] and not issues.torn_last


def test_render_fits_80_columns(tmp_path: Path) -> None:
    recs = make_records(500)
    for r in recs[:50]:
        r.model = "an-extraordinarily-long-model-name/with-a-provider-prefix-v2"
        r.latency_ms = 123456789.123 if r.status == "ok" else None
    clock = FakeClock()
    c = Collector(["alpha"], started_at=1_700_000_000.0, clock=clock)
    for r in recs:
        c.record(r)
    c.change(12.5, "concurrency", 50, 200)
    c.change(30.0, "weight", 1.0, 2.5, model="an-extraordinarily-long-model-name/with-a-provider-prefix-v2")
    s = c.summary("a-workload-name-that-is-rather-long-for-a-title-line-really", 98765.4)
    s["loop_lag_ms"] = {"p50": 0.5, "p99": 12345.6, "max": 98765.4}
    s["gc"] = {"collections": 123456, "pause_ms": 9876543.2}
    text = render_summary(s)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "123456 collections" in text and "client loop lag" in text
    assert "(" in lines[3] and "estimated" in lines[3]  # tokens line says some are estimates
    for word in ("TTFT", "ITL", "latency", "queue", "alpha", "http_500", "concurrency 50 → 200"):
        assert word in text, word
    # a summary without estimates and without changes
    plain = render_summary(
        collector_summary([r for r in make_records(50) if r.tokens_source == "usage"], 5.0)
    )
    assert "estimated" not in plain and "changed" not in plain and "client GC" not in plain
    assert max(len(line) for line in plain.splitlines()) <= 80


def test_report_main_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs = make_records(100)
    path = tmp_path / "job" / "results.jsonl"
    write_journal(path, recs, tail=b"{")
    assert report_main(str(path), as_json=False) == 0
    out, err = capsys.readouterr()
    assert out.startswith("job")
    assert "incomplete last line" in err
    assert report_main(str(path), as_json=True) == 0
    out, _ = capsys.readouterr()
    data = orjson.loads(out)
    assert data["requests"]["total"] == 100 and data["name"] == "job"


def test_report_main_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.jsonl"
    assert report_main(str(missing), as_json=False) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert str(missing) in err and len(err.strip().splitlines()) == 1
    assert report_main(str(tmp_path), as_json=True) == 2  # a directory


def test_empty_journal(tmp_path: Path) -> None:
    path = tmp_path / "e" / "results.jsonl"
    write_journal(path, [])
    s = summary_from_journal(path)
    assert s["requests"]["total"] == 0 and s["duration_s"] == 0.0
    assert s["latency_ms"]["p99"] is None  # nothing measured: null, shown as –
    assert max(len(line) for line in render_summary(s).splitlines()) <= 80


def test_a_long_run_of_autos_phases_is_folded_into_one_row() -> None:
    """Holding, auto probes a step up every few seconds: after AUTO_ROWS of its phases the rest of
    that run is one row (its ok and req/s summed, no percentiles), and the JSON keeps every phase."""
    recs = iter(make_records(400))
    c = Collector(["alpha", "beta"], started_at=1_700_000_000.0, clock=FakeClock())
    t, limit = 0.0, 4
    auto = [8, 16, 12, 10, 11, 10] + [11, 10] * 10 + [11, 9]  # search, then 22 probes and steps back
    for to in auto:
        for _ in range(5):
            c.record(next(recs))
        t += 1.0
        c.change(t, "concurrency", limit, to, by="auto")
        limit = to
    for _ in range(5):
        c.record(next(recs))
    t += 1.0
    c.change(t, "concurrency", limit, 32, by="key")  # a key press: a row of its own
    limit = 32
    for to in (16, 24):  # a short run of auto's: not folded
        c.record(next(recs))
        t += 1.0
        c.change(t, "concurrency", limit, to, by="auto")
        limit = to
    c.record(next(recs))
    s = c.summary("auto", t + 1)
    phases = s["phases"]
    assert len(phases) == 1 + len(auto) + 1 + 2
    lines = render_summary(s).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("phase "))
    rows = [line for line in lines[start + 1 :] if line[:1].isdigit()]
    assert len(rows) == 1 + AUTO_ROWS + 1 + 1 + 2, "\n".join(lines[start:])
    folded = rows[1 + AUTO_ROWS]
    block = " ".join(line.strip() for line in lines[lines.index(folded) : lines.index(rows[2 + AUTO_ROWS])])
    rest = phases[1 + AUTO_ROWS : 1 + len(auto)]
    assert f"auto, {len(rest)} changes: concurrency 9-11, 9 at the end" in " ".join(block.split())
    ok = sum(p["requests"]["ok"] for p in rest)
    assert folded.split()[1] == f"{ok:,}"
    wall = rest[-1]["t_end"] - rest[0]["t_start"]
    assert float(folded.split()[2]) == pytest.approx(ok / wall, abs=0.006)
    assert folded.split()[3:6] == ["–", "–", "–"]
    assert "concurrency 9 → 32" in rows[2 + AUTO_ROWS]
    assert "concurrency 32 → 16" in rows[3 + AUTO_ROWS] and "concurrency 16 → 24" in rows[4 + AUTO_ROWS]
    assert max(len(line) for line in lines) <= 80
