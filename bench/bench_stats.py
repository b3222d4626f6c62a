"""What the statistics cost the engine: the intervals and settled, recomputed as if every 250 ms,
at 1,000 requests/s; and what they add to each finished request.

    python bench/bench_stats.py [--rounds 5]

The budget (the issue): recomputing the intervals every 250 ms costs at most 1% of a core at
1,000 requests/s, i.e. 2,500 µs per 250 ms tick. The collector judges them once a second (at each
completed second, `metrics/confidence.py`), so the figures below, per 250 ms tick, are four times
what a run spends. Printed as Markdown tables (docs/statistics.md, "Cost").

* **tick**: what one recomputation costs, for the run and its current phase (`Span.evaluate`:
  the quantile intervals, the rate's batches, the 10 s "still moving" check with its histogram
  copy) plus the snapshot's view (`Span.live`), with 250 new requests since the last one (1,000
  requests/s), for phases of 1,000 and 100,000 requests; and, as a stress, 20 phases at once
  (what a console would pay if closed phases were not frozen at their change);
* **per request**: `Collector.record` with the statistics (`Confidence.record`, `Timeline.add`) and
  with them replaced by no-ops, on the same records: the difference is what each request costs.

Each figure is the fastest of ``--rounds`` rounds, in CPU time (on a shared machine the wall
clock also measures the neighbours).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from typing import Any

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.aggregate import RunStats
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.confidence import Span
from oxconsole.metrics.histogram import record_into
from oxconsole.metrics.steady import steady_window

TICK_S = 0.25
RATE = 1000
BUDGET_US = 0.01 * TICK_S * 1e6


def _feed(st: RunStats, rnd: random.Random, k: int) -> None:
    for _ in range(k):
        ttft = rnd.lognormvariate(math.log(200.0), 0.6)
        record_into((st.ttft,), ttft)
        record_into((st.latency,), ttft + rnd.lognormvariate(math.log(2000.0), 0.3))
    st.ok += k


def _span(rnd: random.Random, size: int) -> tuple[Span, RunStats]:
    st = RunStats()
    _feed(st, rnd, size)
    span = Span(st, 0.0)
    for _ in range(120):
        span.batches.add(size / 120)
    return span, st


def tick_cost(rounds: int) -> None:
    print(f"budget: {BUDGET_US:,.0f} µs per {TICK_S * 1000:.0f} ms tick (1% of a core)\n")
    print("| spans recomputed | requests in each | new requests per tick | µs per tick | % of a core |")
    print("|---|---|---|---|---|")
    rnd = random.Random(1)
    for count, label in ((2, "the run and its phase"), (20, "20 phases (stress)")):
        for size in (1_000, 100_000):
            spans = [_span(rnd, size) for _ in range(count)]
            best = math.inf
            for _ in range(rounds):
                spent = []
                sec = 120
                for _ in range(40):
                    for _, st in spans[:2]:  # the run and the current phase take the new requests
                        _feed(st, rnd, int(RATE * TICK_S))
                    sec += 1
                    t0 = time.process_time()
                    for span, _ in spans:
                        span.evaluate(sec)
                        span.live()
                    spent.append(time.process_time() - t0)
                best = min(best, statistics.median(spent) * 1e6)
            share = best / (TICK_S * 1e6) * 100
            print(f"| {label} | {size:,} | {int(RATE * TICK_S)} | {best:,.0f} | {share:.3f}% |")


def _records(n: int) -> list[RequestRecord]:
    rnd = random.Random(2)
    out = []
    for i in range(n):
        ttft = rnd.lognormvariate(math.log(200.0), 0.6)
        t = 1_700_000_000.0 + i / RATE
        out.append(
            RequestRecord(
                id=f"r{i}", model="m", endpoint="default", status="ok", attempts=1, t_scheduled=t,
                t_sent=t, queue_ms=0.0, latency_ms=ttft + 1500.0, ttft_ms=ttft, itl_ms=20.0,
                input_tokens=100, output_tokens=64,
            )
        )  # fmt: skip
    return out


class _Off:
    """The statistics replaced by nothing: what `Collector.record` costs without them."""

    def record(self, *_: Any) -> None:
        pass

    def add(self, *_: Any) -> None:
        pass


def _record_all(recs: list[RequestRecord], stats: bool) -> float:
    """CPU seconds per request of `Collector.record` over `recs`, with the statistics or without."""
    now = [0.0]
    c = Collector(["m"], started_at=1_700_000_000.0, clock=lambda: now[0])
    if not stats:
        c.confidence = _Off()  # type: ignore[assignment]
        c.timeline = _Off()  # type: ignore[assignment]
    t0 = time.process_time()
    for r in recs:
        now[0] = r.t_sent - 1_700_000_000.0
        c.record(r)
    return (time.process_time() - t0) / len(recs)


def record_cost(rounds: int) -> None:
    """Rounds alternate with and without, each figure the fastest of its rounds, in CPU time (a
    neighbour's use of the core is not counted)."""
    recs = _records(60 * RATE)
    best = {True: math.inf, False: math.inf}
    for _ in range(rounds):
        for stats in (False, True):
            best[stats] = min(best[stats], _record_all(recs, stats) * 1e6)
    extra = best[True] - best[False]
    print("\n| Collector.record, 60 s at 1,000 req/s | CPU µs per request |")
    print("|---|---|")
    print(f"| without the statistics | {best[False]:.2f} |")
    print(f"| with them | {best[True]:.2f} |")
    share = extra * RATE / 1e4
    rel = 100 * extra / best[False]
    print(f"| what they add | {extra:.2f} ({rel:+.0f}%; {share:.3f}% of a core at 1,000 req/s) |")
    hour = [float(RATE)] * 3600
    t0 = time.process_time()
    steady_window(hour, hour, hour)
    us = (time.process_time() - t0) * 1e6
    print(f"| steady_window over an hour of seconds (once, at the summary) | {us:,.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    ns = p.parse_args()
    tick_cost(ns.rounds)
    record_cost(ns.rounds)


if __name__ == "__main__":
    main()
