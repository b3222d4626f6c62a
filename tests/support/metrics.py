"""Figures to hold a run's against: exact percentiles of samples, and how close a histogram's
summary must come to them; a `Gauges` with defaults for snapshot tests; a clock a test sets, and
a seeded mix of records (two models, some errors and retries) for collector and report tests."""

from __future__ import annotations

import math
import random
import statistics

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics import Gauges, ModelGauge
from oxconsole.metrics.histogram import DEFAULT_ALPHA


def exact(sorted_values: list[float], q: float) -> float:
    """Nearest rank, computed independently: the ceil(q/100 * n)-th smallest (1-based)."""
    n = len(sorted_values)
    rank = max(1, math.ceil(round(q * n / 100.0, 9)))
    return sorted_values[min(rank, n) - 1]


def gauges(**kw: object) -> Gauges:
    base: dict[str, object] = {
        "state": "running",
        "elapsed_s": 1.0,
        "total_expected": None,
        "dispatched": 0,
        "in_flight": 0,
        "waiting_slot": 0,
        "waiting_bucket": 0,
        "backing_off": 0,
        "concurrency": 10,
        "rate": 0.0,
        "achieved_rate": 0.0,
        "loop_lag_ms": 0.0,
        "models": {"alpha": ModelGauge(3.0, True, 2), "beta": ModelGauge(1.0, True, 1)},
    }
    base.update(kw)
    return Gauges(**base)  # type: ignore[arg-type]


def exact_summary(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {
        "mean": statistics.fmean(s),
        "p50": exact(s, 50),
        "p90": exact(s, 90),
        "p95": exact(s, 95),
        "p99": exact(s, 99),
        "max": s[-1],
    }


def assert_summary_close(got: dict[str, float], want: dict[str, float]) -> None:
    """A summary against exact figures, within what the histogram and the rounding allow.

    A percentile is within ``alpha`` (0.1%) of the true sample of its rank; the summary rounds
    it to 3 decimals (0.0005), and when ``want`` comes from a journal, each sample there was
    rounded to 3 decimals too (another 0.0005, and alpha of that). Nothing else may differ.
    """
    for k, v in want.items():
        bound = DEFAULT_ALPHA * (abs(v) + 0.0005) * (1 + 1e-9) + 0.001 + 1e-9
        assert abs(got[k] - v) <= bound, (k, got[k], v)


def assert_histograms_close(got: dict[str, float], want: dict[str, float]) -> None:
    """Two summaries of the same samples, each from its own histogram (a run's, and one rebuilt
    from its journal's 3-decimal values): each percentile is within ``alpha`` of a sample of its
    rank, so the two may sit a bucket apart (2 alpha), plus the rounding of both."""
    for k, v in want.items():
        bound = 2 * DEFAULT_ALPHA * (abs(v) + 0.0005) * 1.01 + 0.001 + 1e-9
        assert abs(got[k] - v) <= bound, (k, got[k], v, bound)


class FakeClock:
    """A clock that reads `t`, which the test sets."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make_records(n: int, seed: int = 11) -> list[RequestRecord]:
    """`n` records, the same for a seed: models alpha and beta, about 10% errors, 20% retried,
    10 ms apart from t = 1.7e9."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        model = rnd.choice(["alpha", "beta"])
        ok = rnd.random() > 0.1
        lat = round(rnd.lognormvariate(6.5, 0.6), 3)
        out.append(
            RequestRecord(
                id=f"r{i}",
                model=model,
                endpoint="default",
                status="ok" if ok else "error",
                attempts=2 if rnd.random() < 0.2 else 1,
                t_scheduled=round(1_700_000_000 + i * 0.01, 6),
                t_sent=round(1_700_000_000 + i * 0.01 + 0.002, 6),
                queue_ms=round(rnd.choice([0.0, rnd.expovariate(0.1)]), 3),
                latency_ms=lat if ok else None,
                ttft_ms=round(lat * 0.15, 3) if ok else None,
                itl_ms=round(rnd.uniform(5, 30), 3) if ok else None,
                input_tokens=rnd.randrange(50, 500),
                output_tokens=rnd.randrange(1, 200) if ok else 0,
                tokens_source="estimate" if rnd.random() < 0.3 else "usage",
                cost=0.001 if model == "alpha" else 0.002,
                error=None if ok else rnd.choice(["http_500", "timeout"]),
                error_detail=None if ok else "detail",
                attempt_errors={"http_429": 1} if rnd.random() < 0.2 else None,
            )
        )
    return out
