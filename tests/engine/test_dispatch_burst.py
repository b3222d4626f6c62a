"""The dispatcher's bursts: how many requests it starts before letting them run.

Short prompts go 64 to a burst (`DISPATCH_BURST`); a long prompt weighs one more per
`BURST_CHARS` characters, so a first wave of 1 MB prompts is not built back to back while the
requests already started (whose clocks are running) wait for the loop. Real Dispatcher and
Router; the requests it starts are tasks that record when they first run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

from oxconsole.engine.dispatch import BURST_CHARS, DISPATCH_BURST, Dispatcher
from oxconsole.engine.router import Router
from oxconsole.workload.prompts.promptdata import Prompt
from tests.support.workloads import load_workload


def order_of_events(tmp_path: Path, chars: int, count: int) -> list[str]:
    """`pull k` as the dispatcher takes prompt k, `run k` as request k's task first runs."""
    w = load_workload("sim_instant", tmp_path, {"run.concurrency": count})
    events: list[str] = []
    tasks: list[asyncio.Task[None]] = []

    async def request(k: str) -> None:
        events.append(f"run {k}")

    def start(prompt: Prompt, model: str, t_sched: float, hold: object) -> None:
        tasks.append(asyncio.get_running_loop().create_task(request(prompt.id)))

    def prompts() -> Iterator[Prompt]:
        for k in range(count):
            events.append(f"pull {k}")
            yield Prompt(id=str(k), messages=[{"role": "user", "content": "x"}], input_chars=chars)

    async def go() -> None:
        d = Dispatcher(w, Router(w.models, w.routing, seed=1), start=start, set_state=lambda s: None)
        d.resume()  # as the shard does before dispatch starts
        await d.run(prompts())
        await asyncio.gather(*tasks)

    asyncio.run(go())
    return events


def started_before_pulled(events: list[str]) -> int:
    """How many requests had run before the last prompt was taken."""
    last_pull = max(i for i, e in enumerate(events) if e.startswith("pull"))
    return sum(1 for e in events[:last_pull] if e.startswith("run"))


def test_short_prompts_start_a_whole_burst_before_any_runs(tmp_path: Path) -> None:
    events = order_of_events(tmp_path, chars=100, count=DISPATCH_BURST // 2)
    assert started_before_pulled(events) == 0, events


def test_megabyte_prompts_each_run_before_the_next_is_built(tmp_path: Path) -> None:
    chars = DISPATCH_BURST * BURST_CHARS  # one such prompt fills a burst
    events = order_of_events(tmp_path, chars=chars, count=16)
    pulls = [i for i, e in enumerate(events) if e.startswith("pull")]
    runs = {e.split()[1]: i for i, e in enumerate(events) if e.startswith("run")}
    # request k ran before prompt k + 1 was taken
    late = [k for k in range(15) if not runs[str(k)] < pulls[k + 1]]
    assert not late, (late, events)
