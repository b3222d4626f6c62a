"""Pacing CPython's cyclic garbage collector in a process whose timing is the product.

Why this module exists: the engine measures when bytes arrive and the simulator promises when they
leave; a collection stops the event loop for as long as it scans. Both processes allocate in bursts
that trip CPython's young-generation threshold in the middle of a callback, and in both nearly
everything is freed by reference counting. Used by the engine for each run (`shard.quiet_gc`) and
by the simulator's server process (`oxconsole.sim.cli`). No imports beyond the standard library.
"""

from __future__ import annotations

import gc
import time


class PacedGC:
    """The cyclic garbage collector, paced by its owner's ticker instead of by allocation counts.

    Why: the openai SDK leaves ~90k long-lived objects that every full collection walks, and a run
    allocates in bursts (a thousand requests starting or reading at once) that trip CPython's
    young-generation threshold in the middle of a callback. At ~1,000 in flight the young
    generation is mostly the live requests (~20 tracked objects each), so a collection scans
    ~20k objects (~18 ms here) and, in a run without failures, frees nothing: reference counting
    frees what a request makes. Only failures that raise inside the HTTP stack (connection
    errors, aborted or malformed streams, timeouts) leave cycles (~16 objects each, tracebacks
    holding their frames). Each such pause delays every read arriving during it, which is what
    the run measures. The simulator is the same (~1,000 open streams: its automatic collections
    paused its timed writes for up to 83 ms, 134 ms in a 15 s run).

    So, from construction: what exists is frozen (never scanned), automatic collection is off, and
    the owner's ticker calls `tick()` every 100 ms (the engine counts `failures`; the simulator
    counts the requests whose client went away). Once the young generation has grown by
    `young_bound` net allocations, it is collected if cycles may be there (failures of that kind
    since the last collection, or the last collection freed something, or `max_freezes` moves since
    the last one), and otherwise moved to the permanent generation (`gc.freeze`, no scan: its
    objects are still freed by reference counting). A middle collection every tenth time, the old
    generation (what survived collections during the run; not the frozen) every hundredth.

    Frozen cycles are never scanned again. A collection forced by `max_freezes` that finds cycles
    means some were made where no failure was counted, and the windows frozen before it likely
    hold as many: that estimate (what it freed times the freezes before it) is summed, and once it
    reaches `frozen_bound` objects everything is unfrozen, collected in full (one long pause, the
    SDK's objects included) and frozen again. Frozen garbage stays bounded by about that much.
    `restore()` puts the collector back as it was.
    """

    __slots__ = (
        "_threshold",
        "_was_enabled",
        "collections",
        "failures",
        "freed_last",
        "freezes",
        "frozen_bound",
        "full_collections",
        "max_freezes",
        "pause_ms",
        "suspect",
        "young_bound",
    )

    def __init__(self, young_bound: int = 20_000, max_freezes: int = 20, frozen_bound: int = 50_000) -> None:
        self.young_bound = young_bound
        self.max_freezes = max_freezes
        self.frozen_bound = frozen_bound
        self.collections = 0
        self.full_collections = 0
        self.suspect = 0
        """Estimated garbage objects frozen so far (see the class docstring)."""
        self.freezes = 0
        self.failures = 0
        """Failures since the last collection that can leave cycles (the engine counts them)."""
        self.freed_last = False
        self.pause_ms = 0.0
        self._was_enabled = gc.isenabled()
        self._threshold = gc.get_threshold()
        gc.freeze()
        gc.disable()

    def tick(self) -> None:
        if gc.get_count()[0] < self.young_bound:
            return
        if self.failures or self.freed_last or self.freezes >= self.max_freezes:
            forced = not (self.failures or self.freed_last)
            self.collections += 1
            n = self.collections
            t = time.perf_counter()
            freed = gc.collect(2 if n % 100 == 0 else 1 if n % 10 == 0 else 0)
            if forced and freed:
                self.suspect += freed * self.freezes
                if self.suspect >= self.frozen_bound:
                    self.full_collections += 1
                    self.suspect = 0
                    gc.unfreeze()
                    gc.collect()
                    gc.freeze()
            self.pause_ms += (time.perf_counter() - t) * 1000.0
            self.freed_last = freed > 0
            self.failures = self.freezes = 0
        else:
            gc.freeze()
            self.freezes += 1

    def restore(self) -> None:
        gc.set_threshold(*self._threshold)
        if self._was_enabled:
            gc.enable()
        gc.unfreeze()
