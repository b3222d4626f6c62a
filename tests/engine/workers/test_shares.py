"""The cut of a run into shards (`engine/workers/split.py`): pure functions, plain tests.

The figures are those the worker pool always gave: a concurrency in whole slots (each at least 1,
differing by at most one), a rate and a token budget in equal parts, the rest as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from oxconsole.engine.commands import EnableModel, Pause, Resume, SetConcurrency, SetRate, SetTpm, SetWeight
from oxconsole.engine.livesettings import Change
from oxconsole.engine.workers.split import run_seeded, shard_commands, share, split
from tests.support.workloads import load_workload


def test_concurrency_is_cut_into_whole_slots() -> None:
    got = shard_commands(Change("concurrency", 8, 11), 3)
    assert got == [SetConcurrency(4), SetConcurrency(4), SetConcurrency(3)], got
    got = shard_commands(Change("concurrency", 8, 2), 4)
    assert got == [SetConcurrency(1)] * 4, got  # every shard keeps at least one slot
    cmds = shard_commands(Change("concurrency", 1, 1000), 7)
    assert all(isinstance(c, SetConcurrency) for c in cmds), cmds
    assert sum(c.value for c in cmds if isinstance(c, SetConcurrency)) == 1000


@pytest.mark.parametrize(
    ("what", "value", "cmd"), [("rate", 60.0, SetRate(20.0)), ("tpm", 9000.0, SetTpm(3000.0))]
)
def test_rate_and_tpm_are_cut_in_equal_parts(what: str, value: float, cmd: object) -> None:
    got = shard_commands(Change(what, 0.0, value), 3)  # type: ignore[arg-type]
    assert got == [cmd] * 3, got


def test_a_rate_that_does_not_divide_evenly_keeps_the_float_share() -> None:
    got = shard_commands(Change("rate", 0.0, 10.0), 3)
    assert got == [SetRate(10.0 / 3)] * 3, got


def test_weights_switches_and_pause_go_to_every_shard_as_they_are() -> None:
    assert shard_commands(Change("weight", 1.0, 3.0, "b"), 2) == [SetWeight("b", 3.0)] * 2
    assert shard_commands(Change("enabled", True, False, "a"), 2) == [EnableModel("a", False)] * 2
    assert shard_commands(Change("paused", False, True), 2) == [Pause()] * 2
    assert shard_commands(Change("paused", True, False), 2) == [Resume()] * 2


def test_one_shard_gets_the_whole_change_and_auto_stays_with_the_coordinator() -> None:
    assert shard_commands(Change("concurrency", 4, 9), 1) == [SetConcurrency(9)]
    assert shard_commands(Change("tpm", 0.0, 500.0), 1) == [SetTpm(500.0)]
    assert shard_commands(Change("auto", False, True), 3) == []


def test_split_is_the_concurrency_cut() -> None:
    assert split(11, 2) == [6, 5]
    assert split(1, 3) == [1, 1, 1]


@pytest.mark.parametrize("seed", [0, 1, 7, 123456])
def test_a_shards_simulator_gets_the_runs_own_seed_back(seed: int, tmp_path: Path) -> None:
    w = load_workload("sim_exact", tmp_path, {"run.seed": seed, "run.workers": 3})
    for i in range(3):
        part = share(w, i, 3)
        assert part.run.seed != seed or (seed == 0 and i == 0), (seed, i, part.run.seed)
        assert run_seeded(part, i).run.seed == seed, (seed, i, part.run.seed)
