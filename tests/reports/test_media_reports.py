"""Every kind of model in what a run leaves: the text table's media line, the HTML report's section
(the run and each model), `report A B` comparing the kinds' rates and real-time factors, and a text
run's reports showing none of it. Runs are real: the simulator over loopback HTTP."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson

from oxconsole.reports.compare import compare, load_run, render_compare
from oxconsole.reports.html import write_html_report
from oxconsole.reports.summarytable import render_summary
from oxconsole.workload import Workload
from tests.media import FIXTURES
from tests.support import run
from tests.support.workloads import Sets, load_workload

LINES: list[dict[str, Any]] = [
    {"id": "see", "prompt": "what", "images": ["image.jpg"]},
    {"id": "write", "audio": "tone16k.wav", "tag": "stt"},
    {"id": "say", "prompt": "x" * 30, "tag": "tts"},
]


def workload(tmp_path: Path, sets: Sets | None = None, lines: list[dict[str, Any]] = LINES) -> Workload:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("tone16k.wav", "image.jpg"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    prompts = "".join(orjson.dumps(x).decode() + "\n" for x in lines)
    return load_workload("sim_media", tmp_path, sets, prompts=prompts)


async def test_the_table_and_the_html_report_show_the_kinds(tmp_path: Path) -> None:
    w = workload(tmp_path)
    s = (await run(w)).summary
    table = render_summary(s)
    media = s["media"]
    assert f"media     images in 1 ({media['per_s']['images_in']:.2f}/s)" in table, table
    assert "audio in 1.5 s (" in table and "audio out 2.0 s (" in table, table
    assert f"RTF p50 {media['rtf']['p50']:.2f}" in table, table
    assert "documents" not in table.split("cost")[0], "a kind not in the run is not shown"
    assert max(len(line) for line in table.splitlines()) <= 80, table
    page = write_html_report(w.results_path(), tmp_path / "r.html").read_text()
    section = page[page.index('<section id="media">') :]
    section = section[: section.index("</section>")]
    rows = section.split("<tr>")[2:]  # after the head's
    assert [r.split("</td>")[0].removeprefix("<td>") for r in rows] == ["whole run", "vision", "stt", "tts"]
    assert "audio out 2.00 s/s" not in section and "RTF p50" in section, section


async def test_compare_shows_the_real_time_factors_and_a_text_run_shows_nothing(tmp_path: Path) -> None:
    fast = workload(tmp_path / "fast")
    slow = workload(tmp_path / "slow", {"sim.models.stt.rtf": 0.4, "sim.models.tts.audio_rtf": 0.3})
    plain = workload(tmp_path / "plain", lines=[{"id": "a", "prompt": "hi"}])
    for w in (fast, slow, plain):
        assert (await run(w)).exit_code == 0
    c = compare([load_run(fast.results_path()), load_run(slow.results_path())])
    rows = {r["figure"]: r for r in c["figures"]}
    assert set(rows) >= {"media.per_s.images_in", "media.per_s.audio_in_s", "media.rtf.p50", "media.rtf.p99"}
    assert "media.per_s.documents" not in rows and "media.per_s.images_out" not in rows, rows.keys()
    p50 = rows["media.rtf.p50"]
    assert p50["values"][1] > p50["values"][0] and p50["delta_pct"][1] > 0, p50
    text = render_compare(c)
    assert "RTF p50" in text and "audio in s/s" in text, text
    table = render_summary(
        (await run(workload(tmp_path / "again", lines=[{"id": "b", "prompt": "hi"}]))).summary
    )
    assert "media" not in table and "RTF" not in table, table
    page = write_html_report(plain.results_path(), tmp_path / "p.html").read_text()
    assert 'id="media"' not in page
    c2 = compare([load_run(plain.results_path()), load_run(fast.results_path())])
    assert "media.rtf.p50" in {r["figure"] for r in c2["figures"]}, "a figure any compared run has"
