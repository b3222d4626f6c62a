"""The console's cost view: the actual prices and each what-if plan, so far, per task and projected,
the cheapest marked; a tab at 80x24 (a panel when wide), shown only for runs with plans."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from textual.widgets import TabbedContent

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.cost import ACTUAL, CostPanel, cost_lines
from oxconsole.workload import PricePlan, Prices
from tests.support.ui import StaticSource, fixed_snapshot

PLANS = {
    "request-based": PricePlan("request-based", Prices(per_request=0.0004)),
    "token-based": PricePlan(
        "token-based",
        Prices(per_1m_input=0.27, per_1m_output=1.10),
        {"fast": Prices(per_1m_input=0.10, per_1m_output=0.40)},
    ),
}


def plans_snapshot(done: int = 300, total: int | None = 1000) -> Snapshot:
    """A run of two models priced by tokens, `done` requests in (one in 25 failed), with two plans."""
    now = [0.0]
    col = Collector(
        ["fast", "slow"],
        started_at=1_700_000_000.0,
        prices={"fast": (0.0, 0.5, 2.0), "slow": (0.0, 3.0, 12.0)},
        clock=lambda: now[0],
        plans=PLANS,
    )
    for i in range(done):
        now[0] = i / 20
        model = "slow" if i % 4 == 0 else "fast"
        err = i % 25 == 7
        inp, out = 600, 0 if err else 120
        price = (0.5, 2.0) if model == "fast" else (3.0, 12.0)
        col.record(
            RequestRecord(
                id=f"p{i}",
                model=model,
                endpoint="default",
                status="error" if err else "ok",
                attempts=1,
                t_scheduled=1_700_000_000.0 + now[0],
                t_sent=1_700_000_000.0 + now[0],
                queue_ms=1.0,
                latency_ms=None if err else 800.0,
                ttft_ms=None if err else 90.0,
                itl_ms=None if err else 6.0,
                input_tokens=inp,
                output_tokens=out,
                cost=0.0 if err else (inp * price[0] + out * price[1]) / 1e6,
                error="http_500" if err else None,
                error_detail="HTTP 500" if err else None,
            )
        )
    g = Gauges(
        "running", now[0], total, done + 8, 8, 0, 0, 0, 8, 0.0, 20.0, 0.5,
        models={"fast": ModelGauge(3.0, True, 6), "slow": ModelGauge(1.0, True, 2)},
    )  # fmt: skip
    return col.snapshot(g)


def test_cost_lines_actual_first_cheapest_marked_within_80_columns() -> None:
    s = plans_snapshot()
    lines = [ln.plain for ln in cost_lines(s, Palette(), 78)]
    assert all(len(ln) <= 78 for ln in lines), [ln for ln in lines if not (len(ln) <= 78)][:5]
    assert lines[0].split()[:4] == ["plan", "so", "far", "per"]
    assert lines[2].startswith(ACTUAL)
    assert lines[3].startswith("request-based") and lines[4].startswith("token-based")
    # request-based: 0.0004 for each ok request, 288 of 300 ok; projected at this pace to 1000
    flat = s.plans[0]
    assert flat.total == 288 * 0.0004
    assert flat.projected is not None and flat.projected > flat.total
    # the cheapest (projected) is marked, and only it
    projected = {ACTUAL: s.projected_cost, **{p.name: p.projected for p in s.plans}}
    best = min(projected, key=lambda k: projected[k] or 0.0)
    marked = [ln for ln in lines if "◀" in ln]
    assert len(marked) == 1 and marked[0].startswith(best)
    assert "300 of 1,000 tasks" in lines[-1]
    # a workload of open size: no projection, said so
    open_size = plans_snapshot(total=None)
    text = "\n".join(ln.plain for ln in cost_lines(open_size, Palette(), 78))
    assert "no projection" in text


def app_for(snap: Snapshot) -> ConsoleApp:
    return ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)


@pytest.mark.slow
async def test_cost_tab_at_80x24_with_plans_only() -> None:
    app = app_for(plans_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        tabs = app.main.query_one(TabbedContent)
        assert app.main.costs_shown
        for _ in range(4):  # models -> latency -> errors -> phase -> cost
            await pilot.press("t")
        await pilot.pause()
        assert tabs.active == "tab-cost"
        panel = app.main.query_one("#cost-tab", CostPanel)
        assert panel.is_on_screen
        region = panel.region
        assert region.right <= 80 and region.bottom <= 24
        shown = [line.plain for line in panel._lines]
        assert shown[2].startswith(ACTUAL) and any(ln.startswith("token-based") for ln in shown)
        assert len(shown) <= region.height
        await pilot.press("t")
        assert tabs.active == "tab-models"
    # without plans: no cost tab, `t` cycles the four others
    app = app_for(fixed_snapshot())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert not app.main.costs_shown
        for _ in range(4):
            await pilot.press("t")
        assert app.main.query_one(TabbedContent).active == "tab-models"


async def test_cost_panel_under_the_models_when_wide() -> None:
    app = app_for(plans_snapshot())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.main.query_one("#cost", CostPanel)
        assert panel.display and panel.region.height >= 5
        assert panel.region.y > app.main.query_one("#models").region.y


@pytest.mark.slow
def test_cost_view_80x24(snap_compare: Any) -> None:
    snap = dataclasses.replace(plans_snapshot(), elapsed_s=15.0)
    assert snap_compare(app_for(snap), terminal_size=(80, 24), press=["t", "t", "t", "t"])


def test_plans_cross_the_socket_and_come_back_from_a_summary() -> None:
    import orjson

    s = plans_snapshot()
    assert Snapshot.from_dict(orjson.loads(orjson.dumps(s.to_dict()))).plans == s.plans
    summary = {
        "requests": {"total": 300},
        "cost": {"total": 1.0, "plans": {"flat": {"total": 0.5, "per_task": 0.01, "projected": None}}},
    }
    (flat,) = Snapshot.from_summary(summary).plans
    assert (flat.name, flat.total, flat.per_task, flat.projected) == ("flat", 0.5, 0.01, None)
