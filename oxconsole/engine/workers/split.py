"""How a run is cut into shards: each shard's part of the workload, and of a live change.

Why this module exists: a run on N shards (worker processes, Ray actors) keeps one set of live
settings in its coordinator; each shard holds only its part of them. Both cuts are stated once
here, as pure functions with plain tests: `share` (a shard's part of the workload it starts with)
and `shard_commands` (each shard's part of a change made while it runs). A concurrency is cut into
whole slots (`split`: each at least 1, differing by at most one), a rate into equal parts, a token
budget into equal parts of the live value (whole tokens, at least 1, at the start); weights,
switches and pause go to every shard as they are. No loop, no clock, no I/O.
"""

from __future__ import annotations

import dataclasses
import os

from oxconsole.engine.commands import Command, SetConcurrency, SetRate, SetTpm
from oxconsole.engine.livesettings import Change
from oxconsole.workload import Workload

__all__ = ["run_seeded", "shard_commands", "share", "split", "worker_count"]


def worker_count(w: Workload) -> int:
    """The shards `run.workers` asks for ("auto": one per core)."""
    n = w.run.workers
    if n == "auto":
        return max(1, os.cpu_count() or 1)
    return max(1, int(n))


def split(total: int, n: int) -> list[int]:
    """Shares of an integer limit, each at least 1, differing by at most one."""
    base, extra = divmod(max(total, n), n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def share(w: Workload, i: int, n: int) -> Workload:
    """Shard i's part of the run: its concurrency, rate, token budget and seed. The token budget's
    shares are whole tokens rounded down (at least 1), so that together they never exceed it."""
    run = w.run
    return dataclasses.replace(
        w,
        run=dataclasses.replace(
            run,
            concurrency=split(run.concurrency, n)[i],
            rate=run.rate / n,
            tpm=max(1, run.tpm // n) if run.tpm else 0,
            seed=run.seed * 1000 + i,
            workers=1,
        ),
    )


def run_seeded(w: Workload, i: int) -> Workload:
    """Shard i's workload with the run's own seed back (`share` gave it `seed * 1000 + i`): what a
    simulator started beside the shard (a Ray actor's) is given, so that it answers as the run's
    one simulator would (`quality` draws right and wrong answers from `run.seed`)."""
    return dataclasses.replace(w, run=dataclasses.replace(w.run, seed=(w.run.seed - i) // 1000))


def shard_commands(c: Change, n: int) -> list[Command]:
    """What each of `n` shards is told of a change (one command per shard, in shard order): its
    part of the concurrency, rate / n, tpm / n, and weights, switches and pause as they are. Empty
    for a change no shard acts on (auto concurrency is the coordinator's own)."""
    if c.what == "concurrency":
        return [SetConcurrency(part) for part in split(c.new, n)]
    if c.what == "rate":
        return [SetRate(c.new / n)] * n
    if c.what == "tpm":
        return [SetTpm(c.new / n)] * n
    if c.what == "auto":
        return []
    return [c.command()] * n
