"""Test helpers for the console: a frozen snapshot source and a real engine on a thread.

`fixed_snapshot()` builds a Snapshot the honest way — a Collector fed with fixed RequestRecords on
a fixed clock — so the screenshots show realistic figures and never change between runs.
`EngineSource` runs the real `Engine` (embedded simulator) on a background thread with its own
event loop, the way the console runs a workload, and records every command it was sent.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

from oxconsole.engine.commands import Command, Stop
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges, ModelGauge, Snapshot
from oxconsole.ui.screens import RoutingEditor
from oxconsole.workload import Workload, load_workload
from tests.support import until
from tests.support.workloads import write_workload

MODELS = ("deepseek-v4-flash", "qwen-3-32b", "deepseek-v3.2")
PRICES = {
    "deepseek-v4-flash": (0.0, 0.10, 0.40),
    "qwen-3-32b": (0.0004, 0.0, 0.0),
    "deepseek-v3.2": (0.0002, 0.27, 1.10),
}


def fixed_snapshot(*, seconds: int = 95, state: str = "running") -> Snapshot:
    """A run 95 s in: three models, two changes (concurrency at 40 s, a weight at 70 s), some
    errors and retries, one model disabled and one cooling down."""
    now = [0.0]
    col = Collector(list(MODELS), started_at=1_700_000_000.0, prices=PRICES, clock=lambda: now[0])
    rnd = random.Random(3)
    base = {"deepseek-v4-flash": 120.0, "qwen-3-32b": 100.0, "deepseek-v3.2": 300.0}
    speed = {"deepseek-v4-flash": 80.0, "qwen-3-32b": 60.0, "deepseek-v3.2": 40.0}
    n = 0
    for sec in range(seconds):
        if sec == 40:
            col.change(40.0, "concurrency", 32, 48)
        if sec == 70:
            col.change(70.2, "weight", 1.0, 2.0, model="deepseek-v3.2")
        per_sec = 18 if sec < 40 else 24
        for k in range(per_sec):
            now[0] = sec + k / per_sec
            model = MODELS[(n * 7) % 6 // 2 if n % 5 else 0]
            n += 1
            ttft = base[model] * (1 + 0.3 * rnd.random()) * (1.25 if sec >= 40 else 1.0)
            out = 64 + rnd.randrange(64)
            itl = 1000.0 / speed[model] * (1 + 0.1 * rnd.random())
            err = None
            if n % 97 == 0:
                err = ("http_500", "HTTP 500: simulated server error")
            elif n % 151 == 0:
                err = ("timeout", "no response within 30s")
            retried = {"http_429": 1} if n % 41 == 0 else None
            p = PRICES[model]
            col.record(
                RequestRecord(
                    id=f"p{n}",
                    model=model,
                    endpoint="default",
                    status="error" if err else "ok",
                    attempts=2 if retried else 1,
                    t_scheduled=1_700_000_000.0 + now[0],
                    t_sent=1_700_000_000.0 + now[0],
                    queue_ms=2.0 + 40 * rnd.random() * (sec >= 40),
                    latency_ms=None if err else ttft + itl * (out - 1),
                    ttft_ms=None if err else ttft,
                    itl_ms=None if err else itl,
                    input_tokens=180,
                    output_tokens=0 if err else out,
                    cost=0.0 if err else p[0] + 180 * p[1] / 1e6 + out * p[2] / 1e6,
                    error=err[0] if err else None,
                    error_detail=err[1] if err else None,
                    attempt_errors=retried,
                )
            )
    col.record_attempt_error("qwen-3-32b", "http_429", "HTTP 429: rate limited, retry after 1s")
    now[0] = seconds + 0.5
    g = Gauges(
        state=state,
        elapsed_s=now[0],
        total_expected=4000,
        dispatched=n + 45,
        in_flight=45,
        waiting_slot=12,
        waiting_bucket=0,
        backing_off=1,
        concurrency=48,
        rate=0.0,
        achieved_rate=23.6,
        loop_lag_ms=1.4,
        models={
            "deepseek-v4-flash": ModelGauge(weight=3.0, enabled=True, in_flight=22),
            "qwen-3-32b": ModelGauge(weight=2.0, enabled=True, in_flight=14, cooled_down=True),
            "deepseek-v3.2": ModelGauge(weight=2.0, enabled=False, in_flight=9),
        },
    )
    return col.snapshot(g)


class StaticSource:
    """A RunSource that always returns the same snapshot and records what it is sent."""

    def __init__(self, snapshot: Snapshot | None, *, name: str = "demo", workload_path: str | None = None):
        self.name = name
        self.workload_path = workload_path
        self.overrides: tuple[str, ...] = ()
        self.snapshot = snapshot
        self.sent: list[Command] = []
        self.started = False
        self.closed = False
        self.is_finished = False
        self.is_connected = True

    def latest(self) -> Snapshot | None:
        return self.snapshot

    def send(self, cmd: Command) -> None:
        self.sent.append(cmd)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    @property
    def finished(self) -> bool:
        return self.is_finished

    @property
    def connected(self) -> bool:
        return self.is_connected


def write_sim_workload(folder: Path, *, concurrency: int = 20, rate: float = 0.0, repeat: int = 400) -> Path:
    """tests/workloads/sim_console.toml as folder/ui-test.toml, journaled in folder."""
    sets = {"run.concurrency": concurrency, "run.rate": rate, "prompts.repeat": repeat}
    return write_workload("sim_console", folder, sets, file="ui-test.toml")


class EngineSource:
    """The real Engine (embedded simulator) on its own thread and event loop."""

    def __init__(self, workload_path: Path, overrides: tuple[str, ...] = ()) -> None:
        from oxconsole.engine.runner import Engine

        self.workload: Workload = load_workload(workload_path, overrides)
        self.name = self.workload.name
        self.workload_path: str | None = str(workload_path)
        self.overrides = overrides
        self.engine = Engine(
            self.workload,
            results_path=self.workload.results_path(),
            total_expected=None,
            publish_interval=0.05,
        )
        self.sent: list[Command] = []
        self.outcome: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="engine", daemon=True)

    def _main(self) -> None:
        try:
            self.outcome = asyncio.run(self.engine.run())
        except BaseException as e:
            self.error = e

    async def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 20
        while self.engine.latest is None or self.engine.state == "starting":
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"engine did not start: {self.error!r}")
            await asyncio.sleep(0.02)

    def latest(self) -> Snapshot | None:
        return self.engine.latest

    def send(self, cmd: Command) -> None:
        self.sent.append(cmd)
        self.engine.submit(cmd)

    async def close(self) -> None:
        pass

    def shutdown(self) -> None:
        """Test teardown: stop the run now and wait for the thread."""
        if self._thread.is_alive():
            try:
                self.engine.submit(Stop(cancel=True))
            except RuntimeError:
                pass
            self._thread.join(15)

    @property
    def finished(self) -> bool:
        return self._thread.ident is not None and not self._thread.is_alive()

    @property
    def connected(self) -> bool:
        return True


def quick_idle(monkeypatch: Any) -> None:
    """Pilot waits for the process to go idle after each key (up to 1 s, twice). A console over a
    real engine thread keeps this process busy on purpose, so that wait would always run its full
    course; a short fixed pause is enough where every assertion polls for its condition anyway."""

    async def short(min_sleep: float = 0.0, max_sleep: float = 1.0) -> None:
        await asyncio.sleep(0.02)

    monkeypatch.setattr("textual.app.wait_for_idle", short)
    monkeypatch.setattr("textual.pilot.wait_for_idle", short)


async def open_routing(pilot: Any) -> RoutingEditor:
    """Press `w` and wait until the routing editor's rows are laid out (on a loaded machine the
    screen is pushed some frames before its rows are composed and sized)."""
    await pilot.press("w")
    app = pilot.app

    def laid_out() -> bool:
        screen = app.screen
        if not isinstance(screen, RoutingEditor):
            return False
        rows = screen.query("#route-0")
        return bool(rows) and rows.first().outer_size.height > 0

    await until(laid_out, what="the routing editor's rows laid out")
    assert isinstance(app.screen, RoutingEditor)
    return app.screen
