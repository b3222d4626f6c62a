"""The console against a REAL engine: keys become commands, and the run does what they say.

`EngineSource` runs `Engine` on its own thread and loop against the embedded simulator (a child
process), exactly as the console runs a workload; the app is driven with Textual's Pilot. Each test
asserts on what the engine did (its live state and the snapshots it published), not only on what
the app sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from oxconsole.control import LocalSource, RunInfo, SocketSource
from oxconsole.engine.commands import (
    Command,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetWeight,
    Stop,
)
from oxconsole.engine.runner import Engine
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.workload import load_workload
from tests.support import until
from tests.support.ui import EngineSource, quick_idle, write_sim_workload


def last_sent(src: EngineSource) -> Command:
    """The last command the app sent (a call, so a type check narrows no list item for good)."""
    return src.sent[-1]


@pytest.fixture(autouse=True)
def _quick_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_idle(monkeypatch)  # the engine thread keeps the process busy (ui_support.quick_idle)


@pytest.fixture
def engine_source(tmp_path: Path) -> Iterator[EngineSource]:
    src = EngineSource(write_sim_workload(tmp_path, concurrency=20, repeat=2000))
    yield src
    src.shutdown()


def snap(src: EngineSource) -> Snapshot:
    s = src.latest()
    assert s is not None
    return s


def model_total(src: EngineSource, name: str) -> int:
    return next(m.counts.total for m in snap(src).models if m.name == name)


@pytest.mark.slow
async def test_concurrency_down_and_rate_keys(engine_source: EngineSource) -> None:
    src = engine_source
    eng = src.engine
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: snap(src).gauges.in_flight >= 15, what="the run to fill its slots")
        for _ in range(5):
            await pilot.press("minus")
        sets = [c.value for c in src.sent if isinstance(c, SetConcurrency)]
        assert sets == [18, 16, 14, 13, 12], sets  # -10% each, based on the value just sent
        await until(lambda: eng.shard.slots.limit == 12, what="the engine to apply the limit")
        # requests in flight above the new limit finish; none start until below it
        await until(lambda: snap(src).gauges.in_flight <= 12, what="in flight to drop to the limit")
        peak = 0
        for _ in range(40):
            s = snap(src)
            assert s.gauges.concurrency == 12
            peak = max(peak, s.gauges.in_flight, eng.shard.in_flight)
            await asyncio.sleep(0.025)
        assert peak <= 12
        assert any(c.get("what") == "concurrency" and c.get("to") == 12 for c in snap(src).changes), [
            c for c in snap(src).changes
        ][:5]

        # rate: ] from unlimited starts from the achieved rate; [ lowers it; 0 toggles unlimited
        await until(lambda: snap(src).gauges.achieved_rate > 0, what="an achieved rate")
        achieved = snap(src).gauges.achieved_rate
        await pilot.press("right_square_bracket")
        first = [c for c in src.sent if isinstance(c, SetRate)][-1].value
        assert first == pytest.approx(achieved * 1.1, rel=0.3)
        await until(lambda: eng.rate == first, what="the engine to take the rate")
        await pilot.press("left_square_bracket")
        lower = [c for c in src.sent if isinstance(c, SetRate)][-1].value
        assert lower == pytest.approx(first * 0.9, rel=0.02)
        await until(lambda: eng.rate == lower, what="the lower rate")
        await pilot.press("0")
        await until(lambda: eng.rate == 0, what="unlimited")
        await pilot.press("0")
        await until(lambda: eng.rate == lower, what="the previous rate restored")
        assert [c.value for c in src.sent if isinstance(c, SetRate)] == [first, lower, 0.0, lower]
        await pilot.press("d")
        await until(lambda: app.return_value is not None, what="detach")
    assert app.return_value == "detach"
    assert not src.finished  # detach leaves the run going
    assert not any(isinstance(c, Stop) for c in src.sent)


@pytest.mark.slow
async def test_pause_routing_save_and_quit(engine_source: EngineSource, tmp_path: Path) -> None:
    src = engine_source
    eng = src.engine
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: snap(src).gauges.dispatched > 50, what="the run to start")

        # space pauses: dispatched stops growing (in-flight requests finish); space resumes
        await pilot.press("space")
        assert isinstance(last_sent(src), Pause)
        await until(lambda: eng.state == "paused", what="paused")
        # no rate limit: the dispatcher holds from the moment Pause is applied, no settling time
        held = eng.shard.dispatched
        await asyncio.sleep(0.5)
        assert eng.shard.dispatched == held
        await until(lambda: "paused" in app._status[1], what="the paused note")
        await pilot.press("space")
        assert isinstance(last_sent(src), Resume)
        await until(lambda: eng.shard.dispatched > held + 20, what="dispatch to resume")

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
        await until(lambda: eng.shard.router.weights["fast"] == 5.0, what="the weight")
        await until(lambda: not eng.shard.router.enabled["slow"], what="slow disabled")
        await until(lambda: snap(src).gauges.models["slow"].in_flight == 0, what="slow to drain")
        s = snap(src)  # in flight and finished from the same snapshot: nothing of slow's is left
        before = next(m.counts.total for m in s.models if m.name == "slow")
        fast_before = model_total(src, "fast")
        await until(lambda: model_total(src, "fast") > fast_before + 50, what="fast to go on")
        assert model_total(src, "slow") == before  # no new dispatches to the disabled model

        # s saves NAME.tuned.toml with the live values
        await pilot.press("minus")
        await until(lambda: eng.shard.slots.limit == 18, what="concurrency 18")
        await until(lambda: snap(src).gauges.concurrency == 18, what="a snapshot with 18")
        await pilot.press("s")
        tuned = tmp_path / "ui-test.tuned.toml"
        assert tuned.exists()
        w = load_workload(tuned)
        assert w.run.concurrency == 18
        assert {m.name: m.weight for m in w.models} == {"fast": 5.0, "slow": 0.0}

        # q stops: Stop is sent, the app shows draining until the run is over, then returns "quit"
        await pilot.press("q")
        assert src.sent[-1] == Stop()
        await until(lambda: app.return_value is not None, timeout=15, what="the app to leave")
    assert app.return_value == "quit"
    assert src.finished
    assert src.outcome is not None and src.outcome.interrupted  # q before every request was sent
    assert src.outcome.exit_code == 130


@pytest.mark.slow
async def test_the_console_over_the_control_socket(run_dirs: Path, tmp_path: Path) -> None:
    """The console as `attach` opens it: a `SocketSource` to a served run (engine on its own thread
    behind its control socket). Keys go over the socket as commands, figures come back as frames,
    and q drains the run and leaves with the end message."""
    path = write_sim_workload(tmp_path, concurrency=20, repeat=2000)

    def factory() -> Engine:
        w = load_workload(path)
        return Engine(w, results_path=w.results_path(), publish_interval=0.1)

    local = LocalSource(factory, serve=RunInfo("ui-test", str(path), (), None))
    await local.start()
    assert local.server_socket is not None
    src = SocketSource(local.server_socket, hz=10.0)
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await until(lambda: src.connected and src.name == "ui-test", what="the hello")
            await until(lambda: (s := src.latest()) is not None and s.gauges.in_flight >= 15, what="frames")
            await pilot.press("minus")
            assert app.sent == [SetConcurrency(18)]
            engine = local.engine
            assert isinstance(engine, Engine)
            await until(lambda: engine.shard.slots.limit == 18, what="the command over the socket")
            await until(
                lambda: (s := src.latest()) is not None and s.gauges.concurrency == 18, what="a frame"
            )
            await pilot.press("space")
            await until(lambda: (s := src.latest()) is not None and s.gauges.state == "paused", what="paused")
            await until(lambda: "paused" in app._status[1], what="the paused note")
            await pilot.press("q")
            assert app.sent[-1] == Stop()
            await until(lambda: app.return_value is not None, timeout=30, what="the app to leave")
        assert app.return_value == "quit"
        assert src.ended and src.exit_code == 130 and src.final_summary is not None  # stopped early
        whats = [c["what"] for c in src.final_summary["changes"]]
        assert whats == ["concurrency", "paused"]
        outcome = await asyncio.to_thread(local.wait_done, 30.0)
        assert outcome is not None and outcome.exit_code == 130
    finally:
        await src.close()
        if not local.finished:
            local.send(Stop(cancel=True))
            await asyncio.to_thread(local.wait_done, 30.0)
