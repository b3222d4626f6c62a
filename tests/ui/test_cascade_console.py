"""The console's cascade view: each model's valid and escalation rates, $ per valid answer now and
projected under each price table; a tab at 80x24 (a panel when wide), shown only for runs that
judge their answers."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
from textual.widgets import Input, TabbedContent

import oxconsole.ui.app as app_module
from oxconsole.cli.console import EndedEarly
from oxconsole.cli.main import main
from oxconsole.cli.prepare import SUMMARY_NAME
from oxconsole.control import SocketSource
from oxconsole.engine.commands import SetCascade
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.reports.outputs import beside_journal
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.cascade import ACTUAL, CascadePanel, cascade_lines, per_valid_rows
from oxconsole.ui.screens import RoutingEditor
from oxconsole.workload import PricePlan, Prices
from tests.support import run, until
from tests.support.ui import StaticSource, fixed_snapshot, open_routing
from tests.support.workloads import load_workload as load_test_workload
from tests.support.workloads import write_workload

PLANS = {"request-based": PricePlan("request-based", Prices(per_request=0.0004))}


def cascade_snapshot(done: int = 200, total: int | None = 1000) -> Snapshot:
    """A cascade small -> big, `done` requests in: small wrong on one in four (escalated to big,
    right), small 0.001 and big 0.02 a request."""
    col, now = cascade_collector(done)
    g = Gauges(
        "running", now, total, done + 4, 4, 0, 0, 0, 4, 0.0, 20.0, 0.5,
        models={"small": ModelGauge(1.0, True, 3), "big": ModelGauge(1.0, True, 1)},
    )  # fmt: skip
    return col.snapshot(g)


def cascade_collector(done: int) -> tuple[Collector, float]:
    """The collector of `cascade_snapshot`, and its clock after the last record."""
    now = [0.0]
    col = Collector(["small", "big"], started_at=1_700_000_000.0, clock=lambda: now[0], plans=PLANS)
    col.cascade = ("small", "big")
    for i in range(done):
        now[0] = i / 20
        wrong = i % 4 == 0
        rec = RequestRecord(
            id=f"q{i}",
            model="big" if wrong else "small",
            endpoint="default",
            status="ok",
            attempts=2 if wrong else 1,
            t_scheduled=1_700_000_000.0 + now[0],
            t_sent=1_700_000_000.0 + now[0],
            queue_ms=1.0,
            latency_ms=900.0 if wrong else 300.0,
            ttft_ms=80.0,
            input_tokens=20,
            output_tokens=5,
            cost=0.021 if wrong else 0.001,
            models_tried=["small", "big"] if wrong else None,
            model_attempts=[1, 1] if wrong else None,
            valid=True,
            escalations=1 if wrong else 0,
            answers=[
                {"model": "small", "valid": False, "invalid_reason": "expected", "input_tokens": 20,
                 "output_tokens": 5, "cost": 0.001}
            ] if wrong else None,
        )  # fmt: skip
        col.record(rec)
    return col, now[0]


def app_for(snap: Snapshot) -> ConsoleApp:
    return ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)


def test_cascade_lines_rates_and_cost_per_valid_within_80_columns() -> None:
    s = cascade_snapshot()
    lines = [ln.plain for ln in cascade_lines(s, Palette(), 78)]
    assert all(len(ln) <= 78 for ln in lines), lines
    assert lines[0].startswith("cascade small → big · valid 100.0% (200/200) · escalated 50"), lines[0]
    small = next(ln for ln in lines if ln.startswith("small"))
    assert small.split()[1:] == ["200", "75.0%", "25.0%"], small
    big = next(ln for ln in lines if ln.startswith("big"))
    assert big.split()[1:] == ["50", "100.0%", "0.0%"], big
    rows = {name: (now, projected) for name, now, projected in per_valid_rows(s)}
    assert rows[ACTUAL][0] == pytest.approx((150 * 0.001 + 50 * 0.021) / 200)
    # the plan bills every request made: 200 to small, 50 to big
    assert rows["request-based"][0] == pytest.approx(250 * 0.0004 / 200)
    assert s.projected_cost is not None
    assert rows[ACTUAL][1] == pytest.approx(s.projected_cost / 1000)
    assert any(ln.startswith(ACTUAL) for ln in lines) and any(ln.startswith("request-based") for ln in lines)


def test_the_view_crosses_the_socket() -> None:
    s = cascade_snapshot()
    back = Snapshot.from_dict(orjson.loads(orjson.dumps(s.to_dict())))
    assert back.quality == s.quality and s.quality is not None
    assert s.quality["steps"] == ["small", "big"]


@pytest.mark.slow
async def test_cascade_tab_at_80x24_only_for_runs_with_quality() -> None:
    app = app_for(cascade_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        tabs = app.main.query_one(TabbedContent)
        assert app.main.has_class("-quality")
        for _ in range(5):  # models -> latency -> errors -> phase -> cost -> cascade
            await pilot.press("t")
        await pilot.pause()
        assert tabs.active == "tab-cascade", tabs.active
        panel = app.main.query_one("#cascade-tab", CascadePanel)
        assert panel.is_on_screen
        region = panel.region
        assert region.right <= 80 and region.bottom <= 24
        shown = [line.plain for line in panel._lines]
        assert shown[0].startswith("cascade small → big"), shown
        assert len(shown) <= region.height
    app = app_for(fixed_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.main.has_class("-quality")


@pytest.mark.slow
def test_cascade_view_80x24(snap_compare: Any) -> None:
    snap = dataclasses.replace(cascade_snapshot(), elapsed_s=10.0)
    assert snap_compare(app_for(snap), terminal_size=(80, 24), press=["t"] * 5)


async def test_routing_editor_reorders_and_switches_off_cascade_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app_module, "FLASH_S", 60.0)  # the confirmation must outlast a loaded machine
    src = StaticSource(cascade_snapshot())
    async with ConsoleApp(src, theme_dirs=[], cursor_blink=False).run_test(size=(80, 24)) as pilot:
        editor = await open_routing(pilot)
        assert isinstance(editor, RoutingEditor) and editor.cascade
        small, big = (editor.query_one(f"#step-{i}", Input) for i in range(2))
        assert (small.value, big.value) == ("1", "2")  # the steps in force
        small.value, big.value = "", "1"  # "big only": small's step off
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not isinstance(pilot.app.screen, RoutingEditor)
    assert src.sent == [SetCascade(("big",))], src.sent
    assert isinstance(pilot.app, ConsoleApp)
    assert pilot.app.flash[0] == "routing: cascade big"


async def test_routing_editor_refuses_a_step_twice_or_none() -> None:
    src = StaticSource(cascade_snapshot())
    async with ConsoleApp(src, theme_dirs=[], cursor_blink=False).run_test(size=(80, 24)) as pilot:
        editor = await open_routing(pilot)
        assert isinstance(editor, RoutingEditor)
        editor.query_one("#step-1", Input).value = "1"
        await pilot.press("ctrl+s")
        assert isinstance(pilot.app.screen, RoutingEditor)
        assert "step: 1 is already small's" in str(editor.query_one("#routing-error").render())
        editor.query_one("#step-0", Input).value = ""
        editor.query_one("#step-1", Input).value = ""
        await pilot.press("ctrl+s")
        assert "at least one step" in str(editor.query_one("#routing-error").render())
    assert src.sent == []


def ended_snapshot(changes: list[dict[str, Any]] | None = None, *, old: bool = False) -> Snapshot:
    """A finished run as a console opened after its end sees it: its summary only (`old`: as
    written before the summary's `cascade.steps`)."""
    col, now = cascade_collector(200)
    summary = col.summary("casc", now)
    if changes is not None:
        summary["changes"] = changes
    if old:
        del summary["cascade"]["steps"]
    return Snapshot.from_summary(orjson.loads(orjson.dumps(summary)))  # as read from summary.json


def test_a_finished_runs_summary_gives_the_live_cascade_figures() -> None:
    live, ended = cascade_snapshot().quality, ended_snapshot().quality
    assert ended is not None and live is not None, "no cascade figures from the summary"
    assert ended == live, (ended, live)  # the steps too: small is asked most, so it is first
    lines = [ln.plain for ln in cascade_lines(ended_snapshot(), Palette(), 78)]
    assert lines[0].startswith("cascade small → big · valid 100.0% (200/200) · escalated 50"), lines
    rows = {name: now for name, now, _ in per_valid_rows(ended_snapshot())}
    assert rows[ACTUAL] == pytest.approx((150 * 0.001 + 50 * 0.021) / 200), rows
    assert rows["request-based"] == pytest.approx(250 * 0.0004 / 200), rows
    assert ended["steps"] == ["small", "big"], ended  # the summary's cascade.steps
    big_only = [{"t": 5.0, "what": "cascade", "from": ["small", "big"], "to": ["big"], "by": "key"}]
    q = ended_snapshot(big_only).quality
    assert q is not None and q["steps"] == ["small", "big"], q  # cascade.steps wins over a guess
    q = ended_snapshot(big_only, old=True).quality
    assert q is not None and q["steps"] == ["big"], q  # without it: the last change's steps


@pytest.mark.slow
async def test_a_console_opened_on_a_finished_run_shows_the_cascade_tab() -> None:
    app = app_for(ended_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        assert app.main.has_class("-quality"), "the cascade tab stayed hidden"
        app.main.query_one(TabbedContent).active = "tab-cascade"
        await pilot.pause()
        panel = app.main.query_one("#cascade-tab", CascadePanel)
        shown = [line.plain for line in panel._lines]
    assert shown and shown[0].startswith("cascade small → big · valid 100.0%"), shown
    small = next((ln for ln in shown if ln.startswith("small")), "")
    assert small.split()[1:] == ["200", "75.0%", "25.0%"], shown


async def test_a_real_cascade_runs_summary_opens_with_its_cascade_view(tmp_path: Path) -> None:
    """Over HTTP to the simulator: the summary a finished run wrote (summary.json, read back as a
    console attached after the end reads it) gives the cascade view the run's own figures."""
    lines = [{"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"} for i in range(60)]
    w = load_test_workload("cascade", tmp_path, prompts="\n".join(orjson.dumps(x).decode() for x in lines))
    out = await run(w, sim="process")  # the engine's own simulator, told the prompts' answers
    summary = orjson.loads(orjson.dumps(out.summary))
    q = Snapshot.from_summary(summary).quality
    assert q is not None, "no cascade figures from a real run's summary"
    small, big = summary["quality"]["models"]["small"], summary["quality"]["models"]["big"]
    escalated = summary["cascade"]["escalated"]
    assert 0 < escalated < 60 and big["asked"] == escalated, summary["cascade"]  # small 80% right
    assert q["steps"] == ["small", "big"], q["steps"]
    assert (q["judged"], q["valid"], q["escalated"]) == (60, summary["quality"]["valid"], escalated), q
    assert q["models"]["small"] == {**small, "escalated": escalated}, q["models"]
    assert q["models"]["big"]["escalated"] == 0, q["models"]
    head = cascade_lines(Snapshot.from_summary(summary), Palette(), 78)[0].plain
    assert head.startswith(f"cascade small → big · valid {100 * summary['quality']['fraction']:.1f}%"), head


@pytest.mark.slow
def test_a_console_on_a_cascade_run_already_over_shows_its_cascade_tab(tmp_path: Path) -> None:
    """The whole path: a real headless cascade run on the simulator writes its summary beside its
    journal; a console whose run is gone before it connected (`EndedEarly`) opens on that summary,
    and its cascade tab shows the run's figures at 80x24."""
    lines = [{"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"} for i in range(60)]
    path = write_workload("cascade", tmp_path, prompts="\n".join(orjson.dumps(x).decode() for x in lines))
    results = tmp_path / "results.jsonl"
    summary_path = beside_journal(results, SUMMARY_NAME)
    argv = [str(path), "--headless", "--output", str(results), "--summary-json", str(summary_path)]
    assert main(argv) == 0
    summary = orjson.loads(summary_path.read_bytes())
    gone = SocketSource(tmp_path / "gone.sock", name="cascade", results_path=str(results))
    shown = asyncio.run(cascade_tab(ConsoleApp(EndedEarly(gone), theme_dirs=[], cursor_blink=False)))
    q = summary["quality"]
    head = f"cascade small → big · valid {100 * q['fraction']:.1f}% ({q['valid']}/60)"
    assert shown and shown[0].startswith(head), (head, shown)
    small = next((ln for ln in shown if ln.startswith("small")), "")
    esc = summary["cascade"]["escalated"]
    assert small.split()[1:] == [
        "60",
        f"{100 * q['models']['small']['fraction']:.1f}%",
        f"{100 * esc / 60:.1f}%",
    ], shown


async def cascade_tab(app: ConsoleApp) -> list[str]:
    """The cascade tab's lines at 80x24 (the tab shown only once the run has `[quality]`)."""
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        assert app.main.has_class("-quality"), "the cascade tab stayed hidden"
        app.main.query_one(TabbedContent).active = "tab-cascade"
        await pilot.pause()
        return [line.plain for line in app.main.query_one("#cascade-tab", CascadePanel)._lines]


@pytest.mark.slow
async def test_the_live_models_table_counts_the_first_steps_answers(tmp_path: Path) -> None:
    """A real engine on the simulator, "small" never right: every request goes small → big. The
    live models table (wide layout) shows small answering every request: share 100%, its req/s
    and its ok count, not 0% and 0 req/s because none of its answers stood."""
    from tests.support.ui import EngineSource

    n = 60
    lines = [{"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"} for i in range(n)]
    path = write_workload(
        "cascade",
        tmp_path,
        {"sim.models.small.quality": 0.0, "sim.models.small.ttft": "20ms", "run.concurrency": 4},
        prompts="\n".join(orjson.dumps(x).decode() for x in lines),
    )
    src = EngineSource(path)
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await until(lambda: src.finished and app.last is not None and app.last.counts.total == n, 60)
            await pilot.pause(0.3)
            text = screen_text(app)
    finally:
        src.shutdown()
    rows = {r.split()[0]: r.split() for r in text if r.split()[1:2] == ["on"]}  # the models table's
    small, big = rows.get("small"), rows.get("big")
    assert small is not None and big is not None, rows
    header = next(r for r in text if "share" in r and "req/s" in r)
    for two, one in (
        ("in fl", "in_fl"),
        ("TTFT p50/99", "TTFT"),
        ("lat p50/99", "lat"),
        ("tok in/out", "tok"),
    ):
        header = header.replace(two, one)  # one word a column, as a row's cells
    cells = dict(zip(header.split()[1:], small[1:], strict=False))
    assert cells.get("share") == "100%", (header, small)
    assert cells.get("ok") == str(n), (header, small)
    assert float(cells.get("req/s", "0")) > 0, (header, small)
    snap_small = next(m for m in src.latest().models if m.name == "small")  # type: ignore[union-attr]
    assert snap_small.counts.total == n and snap_small.share == 1.0, snap_small


def screen_text(app: ConsoleApp) -> list[str]:
    return [
        "".join(seg.text for seg in strip).strip(" │") for strip in app.screen._compositor.render_strips()
    ]
