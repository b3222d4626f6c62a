"""The HTML report's charts as they read: time ticks round, unique and right; marker labels never
drawn on each other; a sweep's lines joined left to right; every chart at one text size; the
percentile markers inside the bar that holds the value; the compare page with the runs overlaid;
and, where chromium is installed, the page as it renders."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from oxconsole.reports.svg import (
    CHAR_W,
    PALETTE,
    Marker,
    bin_position,
    distribution,
    fmt_num,
    fmt_secs,
    label_span,
    line_chart,
    stretches,
    time_ticks,
)
from tests.support.report import STAGES, sim_run


def _x_labels(svg: str) -> list[str]:
    return re.findall(r'<text x="[\d.]+" y="233" text-anchor="middle">([^<]*)</text>', svg)


@pytest.mark.parametrize("span", [1.2, 2.4, 12.5, 13.0, 100.0, 610.0, 4000.0])
def test_time_ticks_are_unique_round_and_within_the_span(span: float) -> None:
    ticks = time_ticks(span)
    labels = [fmt_secs(t) for t in ticks]
    assert len(set(labels)) == len(labels), labels
    assert ticks[0] == 0 and ticks[-1] <= span + 1e-9 and len(ticks) >= 3, ticks
    for t, label in zip(ticks, labels, strict=True):  # each label reads back as its tick
        unit = {"s": 1, "m": 60, "h": 3600}[label[-1]]
        assert abs(float(label[:-1]) * unit - t) < 1e-6, (t, label)
    svg = line_chart("t", [0.0, span], [], x_max=span, y_unit="x")
    assert _x_labels(svg) == labels, (_x_labels(svg), labels)


def test_numbers_keep_their_half() -> None:
    assert [fmt_num(v) for v in (12.5, 7.5, 2.5, 100.0, 1250.0)] == ["12.5", "7.5", "2.5", "100", "1.25k"]


def test_marker_labels_are_staggered_or_left_out_never_drawn_on_each_other() -> None:
    markers = [
        Marker(t, f"concurrency {i}→{i + 1}") for i, t in enumerate((1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 5.0))
    ]
    svg = line_chart("t", [0.0, 10.0], [], x_max=10.0, y_unit="x", markers=markers)
    assert svg.count('class="marker"') == len(markers)  # every rule drawn
    labels = re.findall(
        r'<text x="([\d.]+)" y="(\d+)"( text-anchor="end")? class="marker-label">([^<]*)</text>', svg
    )
    assert 3 <= len(labels) < len(markers), labels
    boxes = []
    for x, y, end, text in labels:
        left = float(x) - CHAR_W * len(text) if end else float(x)
        boxes.append((int(y), left, left + CHAR_W * len(text)))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[0] != b[0] or a[2] <= b[1] or b[2] <= a[1], (a, b)
    assert label_span(100.0, "x")[0] > 100.0


def test_percentile_markers_sit_in_the_bar_holding_the_value() -> None:
    bins = [(1.0, 2.0, 5), (2.0, 50.0, 10), (50.0, 60.0, 3)]  # widths unequal on a log axis
    assert 1.0 < bin_position(bins, 10.0) < 2.0  # type: ignore[operator]
    assert 2.0 < bin_position(bins, 55.0) < 3.0  # type: ignore[operator]
    svg = distribution("d", bins, "#000", [("p50", 10.0)])
    x = float(re.search(r'<line x1="([\d.]+)"[^>]*class="marker"', svg).group(1))  # type: ignore[union-attr]
    rects = [
        (float(a), float(a) + float(w))
        for a, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)
    ][1:]
    assert rects[1][0] <= x <= rects[1][1], (x, rects)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from oxconsole.reports.command import ReportRequest, report_command

    root = tmp_path_factory.mktemp("charts")
    a = sim_run(root / "a", sets=STAGES, count=300)
    b = sim_run(root / "b", ttft="40ms", count=300)
    assert report_command(ReportRequest((str(a),), html=str(root / "a.html"))) == 0
    assert report_command(ReportRequest((str(a), str(b)), html=str(root / "cmp.html"))) == 0
    return {"run": root / "a.html", "compare": root / "cmp.html"}


def test_every_chart_has_one_text_size(pages: dict[str, Path]) -> None:
    """Every chart's viewBox is as wide and each sits in the charts grid: its text is drawn at the
    same size as every other chart's (the cost and error charts were alone at twice the size)."""
    text = pages["run"].read_text()
    widths = set(re.findall(r'<svg class="chart" viewBox="0 0 (\d+) ', text))
    assert widths == {"760"}, widths
    outside = re.sub(r'<div class="charts">.*?</div>', "", text, flags=re.S)
    assert '<svg class="chart"' not in outside, outside[:500]


def test_the_compare_page_overlays_the_runs(pages: dict[str, Path]) -> None:
    text = pages["compare"].read_text()
    sec = re.search(r'<section id="overlay">.*?</section>', text, re.S)
    assert sec is not None, text[-500:]
    svgs = re.findall(r"<svg .*?</svg>", sec.group(0), re.S)
    assert len(svgs) == 4, len(svgs)
    for svg in svgs:  # one line per run (a run whose one full second is all it has: a dot)
        assert [_drawn(svg, PALETTE[k]) > 0 for k in (0, 1)] == [True, True], svg[:300]
        assert svg.count("<path ") + svg.count("<circle ") >= 2, svg[:300]
        assert "a/results.jsonl" in svg and "b/results.jsonl" in svg


def test_the_report_renders_in_chromium(pages: dict[str, Path]) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed")
    for page in pages.values():
        shot = page.with_suffix(".png")
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1400,3000",
                 page.as_uri()],
                capture_output=True, timeout=120, check=False,
            )  # fmt: skip
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (page, len(data))


# --- every second with data is drawn; the last partial second is no spike --------------------------


def _drawn(svg: str, color: str) -> int:
    """How many values of the series drawn in ``color`` the chart shows: the vertices of its
    lines and its dots (a value with no neighbour). A move with no line from it draws nothing."""
    paths = re.findall(rf'<path d="([^"]*)" fill="none" stroke="{color}"', svg)
    subpaths = [sub for d in paths for sub in re.split(r"(?=M)", d) if sub.strip()]
    vertices = sum(n for sub in subpaths if (n := len(re.findall(r"[ML][\d.]+,[\d.]+", sub))) > 1)
    return vertices + len(re.findall(rf'<circle [^>]*fill="{color}"', svg))


def test_stretches_keep_gaps_and_lone_values() -> None:
    assert stretches([None, 1.0, None, 2.0, 3.0, None, None, 4.0]) == [(1, 1), (3, 4), (7, 7)]
    assert stretches([]) == [] and stretches([None]) == [] and stretches([5.0]) == [(0, 0)]


@pytest.mark.subprocess
def test_a_low_rate_run_draws_every_second_and_ends_on_no_spike(tmp_path: Path) -> None:
    """A request every 2 s, each 200 ms: every second with an answer has empty neighbours. Each
    of them is drawn (as a dot), none left out; the last second, cut short 0.2 s after it began
    by the run's end, is no 5 req/s spike in a run at 0.5 req/s."""
    from oxconsole.base.figures import TTFT
    from oxconsole.reports.html import render_html
    from oxconsole.reports.summary import summary_from_journal
    from oxconsole.reports.timeline import build_timeline
    from tests.support import oxconsole_here
    from tests.support.workloads import write_workload

    sets = {"run.arrival": "constant", "run.rate": 0.5, "run.requests": 8, "prompts.synthetic.count": 8}
    path = write_workload("sim_exact", tmp_path, sets)
    r = oxconsole_here(str(path), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    journal = tmp_path / "results.jsonl"
    tl = build_timeline(journal)
    p50 = tl.percentile(TTFT, 50)
    with_data = [i for i, v in enumerate(p50) if v is not None]
    assert len(with_data) == 8, p50  # one answer in each of 8 seconds
    assert all(p50[i + 1] is None for i in with_data[:-1]), p50  # none has a neighbour

    page = render_html(summary_from_journal(journal), tl, journal_only=True)
    ttft = re.search(r"<figcaption>TTFT \(ms\)</figcaption>(<svg .*?</svg>)", page, re.S)
    assert ttft is not None
    assert _drawn(ttft.group(1), PALETTE[0]) == 8, ttft.group(1)  # p50: every second with an answer

    rates = tl.rate("ok")
    last = len(tl.slots) - 1
    assert tl.width(last) < 0.5 and rates[last] is None, (tl.width(last), rates[-3:])
    top = max(r for r in rates if r is not None)
    assert top <= 1.0, rates  # a full second holds at most the one answer it had
    throughput = re.search(r"<figcaption>Requests/s \(ok\)</figcaption>(<svg .*?</svg>)", page, re.S)
    assert throughput is not None
    assert _drawn(throughput.group(1), PALETTE[0]) == last, throughput.group(1)  # all but the cut one
