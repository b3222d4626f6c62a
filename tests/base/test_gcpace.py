"""The engine's pacing of the cyclic garbage collector during a run (`shard.PacedGC`).

A run freezes what exists at its start, turns automatic collection off and, from its ticker,
collects the young generation only when cycles may be there (failures raised inside the HTTP stack,
or the last collection found some); otherwise it moves the young generation out of the way with
`gc.freeze`. These tests check each branch with real objects and a real run against the simulator.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from oxconsole.base.gcpace import PacedGC
from oxconsole.engine import shard
from tests.support import run
from tests.support.workloads import load_workload


@pytest.fixture(autouse=True)
def gc_state() -> Iterator[None]:
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def make_cycles(n: int) -> None:
    for _ in range(n):
        a, b = Node(), Node()
        a.other, b.other = b, a


def test_live_objects_are_frozen_not_scanned() -> None:
    g = PacedGC(young_bound=500)
    assert not gc.isenabled()
    frozen = gc.get_freeze_count()
    keep = [[i] for i in range(2000)]  # live containers, no cycles
    g.tick()
    assert g.collections == 0 and g.freezes == 1
    assert gc.get_freeze_count() >= frozen + 2000
    assert gc.get_count()[0] < 500
    g.tick()  # below the bound again: nothing
    assert g.freezes == 1
    g.restore()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    del keep


def test_after_failures_the_young_generation_is_collected() -> None:
    g = PacedGC(young_bound=500)
    make_cycles(2000)  # garbage only a collection can free
    g.failures = 1
    g.tick()
    assert g.collections == 1 and g.freezes == 0 and g.failures == 0
    assert g.freed_last and g.pause_ms > 0.0
    # cycles were found last time: the next crossing collects again, with no failures counted
    make_cycles(2000)
    g.tick()
    assert g.collections == 2 and g.freed_last
    # a collection that finds nothing goes back to freezing
    keep = [[i] for i in range(2000)]
    g.tick()
    assert g.collections == 3 and not g.freed_last
    keep += [[i] for i in range(2000)]
    g.tick()
    assert g.collections == 3 and g.freezes == 1
    g.restore()


def test_a_collection_at_least_every_max_freezes() -> None:
    g = PacedGC(young_bound=200, max_freezes=3)
    keep = []
    for _ in range(4):
        keep += [[i] for i in range(400)]
        g.tick()
    assert (g.freezes, g.collections) == (0, 1)  # three freezes, then a collection (which resets)
    g.restore()


@pytest.mark.slow
async def test_a_run_collects_only_when_failures_may_leave_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[PacedGC] = []

    def paced() -> PacedGC:
        g = PacedGC(young_bound=300, max_freezes=10**6)
        made.append(g)
        return g

    monkeypatch.setattr(shard, "quiet_gc", paced)
    enabled = gc.isenabled()
    # Failures at 6% of attempts: plenty for the collector to be called for, and five in a row (the
    # engine's cool-down, a 5 s wait this test has no use for) about once in a thousand runs.
    faults = {"sim.models.m.abort_rate": 0.04, "sim.models.m.reset_rate": 0.02}
    for fault, collects in (({}, False), (faults, True)):
        w = load_workload("sim_retried", tmp_path, fault)
        out = await run(w, sim="process")  # this process's collector is the engine's alone
        g = made[-1]
        assert gc.isenabled() == enabled  # put back at the end of the run
        assert g.freezes + g.collections > 0, "the young bound was never reached: the test proves nothing"
        assert out.summary["gc"] == {"collections": g.collections, "pause_ms": round(g.pause_ms, 3)}
        if collects:
            assert sum(out.summary["attempt_errors"].values()) > 0
            assert g.collections >= 1
        else:
            assert out.summary["requests"]["error"] == 0
            assert g.collections == 0


def test_frozen_cycles_are_collected_once_enough_are_suspected() -> None:
    """Cycles made where no failure was counted get frozen with the live objects; a forced
    collection that finds some estimates how many were frozen, and past `frozen_bound` everything is
    unfrozen and collected in full."""
    g = PacedGC(young_bound=300, max_freezes=3, frozen_bound=5_000)
    frozen_before = gc.get_freeze_count()
    rounds = 0
    keep: list[list[int]] = []
    while g.full_collections == 0 and rounds < 20:
        for _ in range(4):  # three freezes, then the forced collection: cycles in each window
            make_cycles(400)
            g.tick()
        assert g.freed_last
        keep += [[i] for i in range(400)]  # a window without cycles: back to freezing
        g.tick()
        assert not g.freed_last
        rounds += 1
    assert g.full_collections == 1 and rounds == 3, (rounds, g.collections, g.suspect)
    # the full collection freed the cycles that had been frozen: what is frozen now is what
    # existed before, give or take the test's own few objects
    assert gc.get_freeze_count() < frozen_before + 1_000 + len(keep)
    g.restore()


def test_no_cycles_no_full_collection() -> None:
    g = PacedGC(young_bound=300, max_freezes=3, frozen_bound=1)
    keep = []
    for _ in range(20):
        keep += [[i] for i in range(400)]
        g.tick()
    assert g.collections >= 1 and g.full_collections == 0 and g.suspect == 0
    g.restore()
