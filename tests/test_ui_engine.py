"""The console against a REAL engine: keys become commands, and the run does what they say.

`EngineSource` runs `Engine` on its own thread and loop against the embedded simulator (a child
process), exactly as the console runs a workload; the app is driven with Textual's Pilot. Each test
asserts on what the engine did (its live state and the snapshots it published), not only on what
the app sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oxconsole.engine.commands import EnableModel, Pause, Resume, SetConcurrency, SetRate, SetWeight, Stop
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.workload import load_workload
from tests.ui_support import EngineSource, write_sim_workload


@pytest.fixture(autouse=True)
def quick_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pilot waits for the process to go idle after each key (up to 1 s, twice). The engine thread
    keeps this process busy on purpose, so that wait would always run its full course; a short
    fixed pause is enough here because every assertion below polls for its condition anyway."""

    async def short(min_sleep: float = 0.0, max_sleep: float = 1.0) -> None:
        await asyncio.sleep(0.02)

    monkeypatch.setattr("textual.app.wait_for_idle", short)
    monkeypatch.setattr("textual.pilot.wait_for_idle", short)


@pytest.fixture
def engine_source(tmp_path: Path) -> Iterator[EngineSource]:
    src = EngineSource(write_sim_workload(tmp_path, concurrency=20, repeat=2000))
    yield src
    src.shutdown()


async def wait_for(pred: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def snap(src: EngineSource) -> Snapshot:
    s = src.latest()
    assert s is not None
    return s


def model_total(src: EngineSource, name: str) -> int:
    return next(m.counts.total for m in snap(src).models if m.name == name)


async def test_concurrency_down_and_rate_keys(engine_source: EngineSource) -> None:
    src = engine_source
    eng = src.engine
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(lambda: snap(src).gauges.in_flight >= 15, what="the run to fill its slots")
        for _ in range(5):
            await pilot.press("minus")
        sets = [c.value for c in src.sent if isinstance(c, SetConcurrency)]
        assert sets == [18, 16, 14, 13, 12], sets  # -10% each, based on the value just sent
        await wait_for(lambda: eng.slots.limit == 12, what="the engine to apply the limit")
        # requests in flight above the new limit finish; none start until below it
        await wait_for(lambda: snap(src).gauges.in_flight <= 12, what="in flight to drop to the limit")
        peak = 0
        for _ in range(40):
            s = snap(src)
            assert s.gauges.concurrency == 12
            peak = max(peak, s.gauges.in_flight, eng.in_flight)
            await asyncio.sleep(0.025)
        assert peak <= 12
        assert any(c.get("what") == "concurrency" and c.get("to") == 12 for c in snap(src).changes)

        # rate: ] from unlimited starts from the achieved rate; [ lowers it; 0 toggles unlimited
        await wait_for(lambda: snap(src).gauges.achieved_rate > 0, what="an achieved rate")
        achieved = snap(src).gauges.achieved_rate
        await pilot.press("right_square_bracket")
        first = [c for c in src.sent if isinstance(c, SetRate)][-1].value
        assert first == pytest.approx(achieved * 1.1, rel=0.3)
        await wait_for(lambda: eng.rate == first, what="the engine to take the rate")
        await pilot.press("left_square_bracket")
        lower = [c for c in src.sent if isinstance(c, SetRate)][-1].value
        assert lower == pytest.approx(first * 0.9, rel=0.02)
        await wait_for(lambda: eng.rate == lower, what="the lower rate")
        await pilot.press("0")
        await wait_for(lambda: eng.rate == 0, what="unlimited")
        await pilot.press("0")
        await wait_for(lambda: eng.rate == lower, what="the previous rate restored")
        assert [c.value for c in src.sent if isinstance(c, SetRate)] == [first, lower, 0.0, lower]
        await pilot.press("d")
        await wait_for(lambda: app.return_value is not None, what="detach")
    assert app.return_value == "detach"
    assert not src.finished  # detach leaves the run going
    assert not any(isinstance(c, Stop) for c in src.sent)


async def test_pause_routing_save_and_quit(engine_source: EngineSource, tmp_path: Path) -> None:
    src = engine_source
    eng = src.engine
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(lambda: snap(src).gauges.dispatched > 50, what="the run to start")

        # space pauses: dispatched stops growing (in-flight requests finish); space resumes
        await pilot.press("space")
        assert isinstance(src.sent[-1], Pause)
        await wait_for(lambda: snap(src).gauges.state == "paused", what="paused")
        await asyncio.sleep(0.3)
        held = eng.dispatched
        await asyncio.sleep(0.5)
        assert eng.dispatched == held
        await wait_for(lambda: "paused" in app._status[1], what="the paused note")
        await pilot.press("space")
        assert isinstance(src.sent[-1], Resume)
        await wait_for(lambda: eng.dispatched > held + 20, what="dispatch to resume")

        # routing editor: fast -> weight 5, slow -> disabled
        await pilot.press("w")
        await pilot.pause()
        await pilot.click("#weight-0")
        await pilot.press("end", "backspace", "backspace", "backspace", "5")
        await pilot.click("#enabled-1")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert SetWeight("fast", 5.0) in src.sent
        assert EnableModel("slow", False) in src.sent
        await wait_for(lambda: eng.router.weights["fast"] == 5.0, what="the weight")
        await wait_for(lambda: not eng.router.enabled["slow"], what="slow disabled")
        await wait_for(lambda: snap(src).gauges.models["slow"].in_flight == 0, what="slow to drain")
        await asyncio.sleep(0.2)
        before = model_total(src, "slow")
        fast_before = model_total(src, "fast")
        await asyncio.sleep(0.6)
        assert model_total(src, "slow") == before  # no new dispatches to the disabled model
        assert model_total(src, "fast") > fast_before + 20

        # s saves NAME.tuned.toml with the live values
        await pilot.press("minus")
        await wait_for(lambda: eng.slots.limit == 18, what="concurrency 18")
        await wait_for(lambda: snap(src).gauges.concurrency == 18, what="a snapshot with 18")
        await pilot.press("s")
        tuned = tmp_path / "ui-test.tuned.toml"
        assert tuned.exists()
        w = load_workload(tuned)
        assert w.run.concurrency == 18
        assert {m.name: m.weight for m in w.models} == {"fast": 5.0, "slow": 0.0}

        # q stops: Stop is sent, the app shows draining until the run is over, then returns "quit"
        await pilot.press("q")
        assert src.sent[-1] == Stop()
        await wait_for(lambda: app.return_value is not None, timeout=15, what="the app to leave")
    assert app.return_value == "quit"
    assert src.finished
    assert src.outcome is not None and src.outcome.interrupted  # q before every request was sent
    assert src.outcome.exit_code == 130
