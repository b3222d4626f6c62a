"""Comparing runs: Δ% arithmetic, bootstrap intervals, and the noise verdict on real runs against
the simulator (a real TTFT difference, and two runs of the same settings)."""

from __future__ import annotations

import asyncio
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from oxconsole.cli import main as cli
from oxconsole.engine.outcome import RunOutcome
from oxconsole.journal.records import RequestRecord
from oxconsole.reports.compare import compare, load_run, percentile_intervals, render_compare
from oxconsole.workload import load_workload
from tests.support import oxconsole_here, run
from tests.support.report import sim_workload, write_journal


def fixed(n: int, latency: float, t0: float = 1_700_000_000.0) -> list[RequestRecord]:
    """n ok records, one every 10 ms, all with the same timings (no noise at all)."""
    return [
        RequestRecord(f"r{i}", "m", "e", "ok", 1, t0 + i * 0.01, t0 + i * 0.01, 0.0, latency,
                      ttft_ms=latency / 4, itl_ms=5.0, output_tokens=10)
        for i in range(n)
    ]  # fmt: skip


def row(c: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in c["figures"] if r["figure"] == key)


def test_delta_arithmetic(tmp_path: Path) -> None:
    a = load_run(write_journal(tmp_path / "a" / "results.jsonl", fixed(500, 200.0)))
    b = load_run(write_journal(tmp_path / "b" / "results.jsonl", fixed(500, 300.0)))
    c = compare([a, b])
    lat = row(c, "latency_ms.p50")
    assert lat["values"] == [200.0, 300.0]
    assert lat["delta_pct"] == [None, 50.0]
    assert lat["within_noise"] == [None, False]  # constant values: zero-width intervals, apart
    assert row(c, "ttft_ms.p99")["delta_pct"][1] == 50.0
    assert row(c, "itl_ms.p50")["delta_pct"][1] == 0.0 and row(c, "itl_ms.p50")["within_noise"][1] is True
    assert row(c, "error_rate")["values"] == [0.0, 0.0]
    assert compare([a, b]) == c  # fixed seed: same journals, same verdicts
    text = render_compare(c)
    assert "+50.0%" in text and "*+50.0%" in text


def test_bootstrap_interval_covers_the_percentile() -> None:
    import random

    rnd = random.Random(5)
    vals = [rnd.lognormvariate(5, 0.5) for _ in range(4000)]
    (lo, hi), (lo99, hi99) = percentile_intervals(vals, (50.0, 99.0))
    p50 = sorted(vals)[1999]
    assert lo <= p50 <= hi and (hi - lo) / p50 < 0.1
    assert hi99 - lo99 > hi - lo  # the tail is noisier
    big = [rnd.lognormvariate(5, 0.5) for _ in range(50_000)]  # above EXACT_LIMIT: rank draws
    ((blo, bhi),) = percentile_intervals(big, (50.0,))
    assert blo < sorted(big)[24_999] < bhi and (bhi - blo) < (hi - lo)


@pytest.mark.timing
@pytest.mark.slow
def test_real_difference_and_noise_on_the_simulator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three real runs (the engine, a simulator process each, loopback HTTP), side by side on this
    process's loop: whatever the machine's load adds to the client's TTFT, it adds to all three
    alike. TTFT is large against that (a few ms) and jittered by the simulator, so the within-run
    spread is what the intervals measure: 160 requests a run give intervals about 5% of the p50
    wide, where two runs of the same settings overlap and 200 ms against 600 ms is far apart (at
    100 ms, a CPU hog's few ms on one run and not the other once split two runs of the same)."""
    same: dict[str, Any] = {"count": 160, "concurrency": 16, "jitter": 0.3}
    runs = [("fast", "200ms", 1), ("again", "200ms", 2), ("slow", "600ms", 3)]
    ws = [load_workload(sim_workload(tmp_path / n, ttft=t, seed=s, **same)) for n, t, s in runs]

    async def all_three() -> list[RunOutcome]:
        return await asyncio.gather(*(run(w, sim="process") for w in ws))

    assert [o.exit_code for o in asyncio.run(all_three())] == [0, 0, 0]
    fast, again, slow = (w.results_path() for w in ws)
    r = oxconsole_here("report", str(fast), str(again), str(slow), "--json", cwd=fast.parent)
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    ttft = row(c, "ttft_ms.p50")
    assert ttft["within_noise"] == [None, True, False]
    # the same settings: a few % apart on a quiet machine; beside a CPU hog and three other tests,
    # 14.8% once (and still within noise, which is the verdict under test)
    assert abs(ttft["delta_pct"][1]) < 25
    # 200 ms -> 600 ms at the server: about +400 ms, less what the client's lag adds to one run and
    # not the other (at 100 -> 300 ms beside a CPU hog and three other tests: +142 of 200 once);
    # the percentage is over a base that lag can raise, and test_delta_arithmetic checks it exactly
    assert 250 < ttft["values"][2] - ttft["values"][0] < 550 and ttft["delta_pct"][2] > 0
    assert row(c, "latency_ms.p50")["within_noise"][2] is False
    # the table and the page, from the same command in this process
    assert cli.main(["report", str(fast), str(slow)]) == 0
    text = capsys.readouterr().out
    assert "TTFT p50 ms" in text and "~ within noise" in text
    html = tmp_path / "c.html"
    assert cli.main(["report", str(fast), str(slow), "--html", str(html)]) == 0
    parser = HTMLParser()
    parser.feed(html.read_text())
    assert "TTFT p50 ms" in html.read_text() and "http" not in html.read_text()


def test_unreadable_journal_is_exit_2(tmp_path: Path) -> None:
    a = write_journal(tmp_path / "a" / "results.jsonl", fixed(10, 100.0))
    r = oxconsole_here("report", str(a), str(tmp_path / "missing.jsonl"), cwd=tmp_path)
    assert r.returncode == 2 and "missing.jsonl" in r.stderr
