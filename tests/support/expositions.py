"""Helpers shared by the tests: the fixtures, and an independent reading of them through
prometheus_client's parser (the oracle the expected values are computed from)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

FIXTURES = Path(__file__).resolve().parent / "expositions"

Oracle = dict[str, list[tuple[dict[str, str], float]]]


def fixture_text(name: str) -> str:
    return (FIXTURES / f"{name}.prom").read_text()


def oracle(text: str) -> Oracle:
    """Every sample by its name as written, read by prometheus_client (not by the parser under test)."""
    out: Oracle = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((dict(s.labels), float(s.value)))
    return out


def halved(text: str) -> str:
    """The same exposition earlier in its life: every counter and histogram sample at half its
    value, gauges as they are. Rendered from the oracle's reading."""
    lines: list[str] = []
    for fam in text_string_to_metric_families(text):
        growing = fam.type in ("counter", "histogram")
        for s in fam.samples:
            v = float(s.value) / 2 if growing and not s.name.endswith("_created") else float(s.value)
            labels = ",".join(f'{k}="{x}"' for k, x in s.labels.items())
            lines.append(f"{s.name}{{{labels}}} {v!r}" if labels else f"{s.name} {v!r}")
    return "\n".join(lines) + "\n"


def ref_quantile(q: float, cumulative: list[tuple[float, float]]) -> float:
    """The q-quantile of cumulative (bound, count) pairs, linear inside the bucket, written here
    independently of oxconsole.metrics.server.buckets."""
    total = cumulative[-1][1]
    target = q * total
    low_bound, low_count = 0.0, 0.0
    for bound, count in cumulative:
        if count >= target:
            if math.isinf(bound):
                return low_bound
            return low_bound + (bound - low_bound) * (target - low_count) / (count - low_count)
        low_bound, low_count = bound, count
    raise AssertionError("no bucket holds the rank")
