"""The server's side in the reports: the summary's `server` block per endpoint and per phase (a
live change's effect as a delta), rebuilt by `report` from the series alone, the HTML report's
charts with the change marker, the text table, and `report A B`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.commands import SetConcurrency
from oxconsole.metrics.server.series import series_path
from oxconsole.reports.compare import compare, load_run, render_compare
from oxconsole.reports.html import write_html_report
from oxconsole.reports.summary import summary_from_journal
from oxconsole.reports.summarytable import render_summary
from tests.support import engine_for, run
from tests.support.workloads import load_workload


async def changed_run(tmp_path: Path, name: str = "a", to: int = 8) -> tuple[Path, dict[str, Any]]:
    """Capacity 4 at 4 in flight, then `to` in flight after about 1.2 s: the engine queues."""
    w = load_workload(
        "sim_exact",
        tmp_path,
        {
            "name": name,
            "run.concurrency": 4,
            "run.requests": 80,
            "prompts.synthetic.count": 80,
            "sim.models.m.capacity": 4,
            "endpoints.default.server_metrics_interval": "250ms",
            "output.results": str(tmp_path / name / "results.jsonl"),
        },
    )
    e = engine_for(w)

    async def later() -> None:
        await asyncio.sleep(1.2)
        e.submit(SetConcurrency(to))

    task = asyncio.create_task(later())
    out = await run(w, e)
    await task
    return w.results_path(), out.summary


@pytest.mark.slow
async def test_per_phase_blocks_rebuilt_charts_and_comparison(tmp_path: Path) -> None:
    path, s = await changed_run(tmp_path)
    server = s["server"]["default"]
    assert server["engine"] == "vllm" and server["failed_scrapes"] == 0, server
    assert server["running"]["max"] == 4 and server["waiting"]["max"] == 4, server
    phases = s["phases"]
    assert len(phases) == 2, phases
    before, after = phases[0]["server"]["default"], phases[1]["server"]["default"]
    assert before["waiting"]["max"] == 0 and after["waiting"]["p50"] == 4, (before, after)
    # the change's effect on the engine: four more waiting, the same four running
    assert after["delta"]["waiting"] == after["waiting"]["p50"] - before["waiting"]["p50"] == 4, after
    assert after["delta"]["running"] == 0, after
    assert "delta" not in before

    rebuilt = summary_from_journal(path)
    assert rebuilt["server"] == s["server"], (rebuilt["server"], s["server"])

    html = write_html_report(path, tmp_path / "r.html", s).read_text()
    section = html[html.index('<section id="server">') :]
    section = section[: section.index("</section>")]
    assert section.count("<svg") == 2, section[:400]  # requests beside in flight; KV usage
    assert "engine waiting" in section and "client in flight" in section, section[:400]
    assert "concurrency 4→8" in section, "the change marker on the server's charts"

    table = render_summary(s)
    assert "server (the engine's own /metrics, over the run)" in table, table
    assert all(len(line) <= 80 for line in table.splitlines()), table

    other, _ = await changed_run(tmp_path, "b", to=4)  # no change of load: the engine never queues
    c = compare([load_run(path), load_run(other)])
    rows = {r["figure"]: r["values"] for r in c["figures"]}
    assert rows["server.waiting.max"] == [4.0, 0.0], rows.get("server.waiting.max")
    assert rows["server.running.p50"] == [4.0, 4.0], rows.get("server.running.p50")
    text = render_compare(c)
    assert "srv waiting max" in text, text


def test_a_run_without_a_series_has_no_server(tmp_path: Path) -> None:
    from tests.support.report import secret_records, write_journal

    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records())
    assert not series_path(journal).exists()
    s = summary_from_journal(journal)
    assert "server" not in s and "server (" not in render_summary(s)
    html = write_html_report(journal, tmp_path / "r.html").read_text()
    assert 'id="server"' not in html


def test_a_series_rebuilds_the_single_phase(tmp_path: Path) -> None:
    """A journal whose run kept no phases (a crash): its one phase gets the whole run's server."""
    from tests.support.report import secret_records, write_journal

    journal = write_journal(tmp_path / "run" / "results.jsonl", secret_records())
    lines = [
        {"t": 1.0, "endpoint": "x", "engine": "llamacpp", "url": "http://h:8080/metrics", "running": 2,
         "waiting": 1, "missing": ["kv_usage"]},
        {"t": 2.0, "endpoint": "x", "engine": "llamacpp", "url": "http://h:8080/metrics", "running": 4,
         "waiting": 3, "missing": ["kv_usage"], "span_s": 1.0,
         "sums": {"counters": {"prompt_tokens_per_s": [500, 1.0]}, "buckets": {}}},
    ]  # fmt: skip
    series_path(journal).write_text("".join(json.dumps(d) + "\n" for d in lines))
    s = summary_from_journal(journal)
    x = s["server"]["x"]
    assert x["url"] == "http://h:8080/metrics" and x["scrapes"] == 2, x
    assert x["running"] == {"p50": 2.0, "max": 4.0} and x["prompt_tokens_per_s"] == 500.0, x
    assert s["phases"][0]["server"]["x"] == x, s["phases"]
