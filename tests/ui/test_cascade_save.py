"""`s` keeps the cascade changed live: a real engine on the simulator runs a cascade small -> big,
the routing editor's step column makes it "big only", and the saved NAME.tuned.toml, parsed again,
has `[routing] cascade = ["big"]` and loads as a workload."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from textual.widgets import Input

from oxconsole.engine.commands import SetCascade
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.app import ConsoleApp
from oxconsole.workload import load_workload
from tests.support import until
from tests.support.ui import EngineSource, open_routing, quick_idle
from tests.support.workloads import write_workload

N = 4000


@pytest.fixture(autouse=True)
def _quick_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    quick_idle(monkeypatch)  # the engine thread keeps the process busy (ui_support.quick_idle)


@pytest.fixture
def cascade_source(tmp_path: Path) -> Iterator[EngineSource]:
    prompts = "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(N)
    )
    sets = {"run.concurrency": 4, "sim.models.small.ttft": "20ms", "sim.models.big.ttft": "20ms"}
    src = EngineSource(write_workload("cascade", tmp_path, sets, prompts=prompts))
    yield src
    src.shutdown()


def steps(src: EngineSource) -> object:
    s: Snapshot | None = src.latest()
    return None if s is None or s.quality is None else s.quality.get("steps")


@pytest.mark.slow
async def test_s_saves_the_cascade_changed_live(cascade_source: EngineSource, tmp_path: Path) -> None:
    src = cascade_source
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: (s := src.latest()) is not None and s.counts.total > 10, what="answers judged")
        assert steps(src) == ["small", "big"], steps(src)
        editor = await open_routing(pilot)
        small, big = (editor.query_one(f"#step-{i}", Input) for i in range(2))
        small.value, big.value = "", "1"  # "big only"
        await pilot.press("ctrl+s")
        await until(lambda: SetCascade(("big",)) in src.sent, what="the editor to send set_cascade")
        await until(lambda: steps(src) == ["big"], what="the engine's cascade to change")
        await pilot.press("s")
        tuned = tmp_path / "workload.tuned.toml"
        await until(tuned.exists, what=f"{tuned} to be written")
        flash = app.flash[0] if app.flash else ""
    raw = tomllib.loads(tuned.read_text(encoding="utf-8"))
    assert raw["routing"]["cascade"] == ["big"], f"saved {raw.get('routing')!r}; flash {flash!r}"
    assert raw["quality"] == {"expected": True}, raw["quality"]
    w = load_workload(tuned)
    assert list(w.routing.cascade) == ["big"], w.routing.cascade
