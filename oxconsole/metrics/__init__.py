"""Run metrics: histograms, rolling windows, per-model aggregates and immutable snapshots.

Why this package exists: it is the only place figures are computed, so the live console, the
headless progress line, the final summary and `oxconsole report` cannot disagree. It depends on
nothing but the standard library and `oxconsole.journal.records` (no engine, no UI).
"""

from oxconsole.metrics.aggregate import METRICS, RunStats, build_summary
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.histogram import LogHistogram
from oxconsole.metrics.packing import packing_lines
from oxconsole.metrics.snapshot import (
    Counts,
    ErrorStat,
    Gauges,
    ModelGauge,
    ModelStats,
    PlanCost,
    Series,
    Snapshot,
)
from oxconsole.metrics.window import RollingHistogram, SecondSeries

__all__ = [
    "METRICS",
    "Collector",
    "Counts",
    "ErrorStat",
    "Gauges",
    "LogHistogram",
    "ModelGauge",
    "ModelStats",
    "PlanCost",
    "RollingHistogram",
    "RunStats",
    "SecondSeries",
    "Series",
    "Snapshot",
    "build_summary",
    "packing_lines",
]
