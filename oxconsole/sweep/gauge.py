"""Where a sweep is, as its snapshots carry it (`Snapshot.sweep`) and as the console says it.

Why this module exists: a console attached to a sweep sees one point's engine at a time; the
sweep gauge is what tells it which point of how many, the value, the time left and what the
points already ended gave. It is built here from the sweep's state alone (plain data, no
engine), so the header and the tests read the same thing the socket carries.

    {"key": "concurrency", "index": 1, "count": 3, "value": "2", "eta_s": 41.0, "point_s": 30.0,
     "knee": "1", "done": [{"index": 0, "value": "1", "req_per_s": 19.6, "goodput_per_s": None,
     "p99_ms": 51.0, "slo_met": None}]}

`count` is None for `--over concurrency=auto` (a search: the number of points is not known),
and so is `eta_s`. `knee` is the knee among the points ended so far (None before there is one).
The served sweep (`served.py`) adds `locked` (the live settings the sweep holds fixed, which the
console's keys refuse) and `held` (paused by a key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oxconsole.base.figures import GOODPUT, LATENCY, REQUESTS_PER_S
from oxconsole.base.units import fmt_duration
from oxconsole.metrics.knee import slo_met
from oxconsole.sweep.table import knee_of

__all__ = ["done_rows", "sweep_fraction", "sweep_gauge", "sweep_text"]

Gauge = Mapping[str, Any]


def done_rows(key: str, done: Mapping[int, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """The ended points as the gauge's small rows (in index order), and the knee so far (its value
    as typed), by the very rule the sweep's table uses."""
    points = [done[i] for i in sorted(done)]
    rows = [_row(i, p) for i, p in zip(sorted(done), points, strict=True)]
    k = knee_of(key, points)
    return rows, None if k is None else str(points[k].get("text", points[k].get("value")))


def _row(index: int, point: Mapping[str, Any]) -> dict[str, Any]:
    s = point.get("summary") or {}
    return {
        "index": index,
        "value": str(point.get("text", point.get("value"))),
        "req_per_s": REQUESTS_PER_S.value(s) or 0.0,
        "goodput_per_s": (GOODPUT.value(s) or 0.0) if isinstance(s.get("goodput"), Mapping) else None,
        "p99_ms": LATENCY.at("p99").of(s),
        "slo_met": slo_met(s),
    }


def sweep_gauge(
    key: str,
    *,
    index: int,
    value: str,
    count: int | None,
    done: tuple[list[dict[str, Any]], str | None],
    point_s: float,
    elapsed_s: float,
) -> dict[str, Any]:
    """The gauge for point `index` (of `count`, None for a search), `elapsed_s` into it. The ETA
    counts what is left of this point and `point_s` (how long the last point took, the point
    duration before one ended) for each point after it."""
    rows, knee = done
    eta: float | None = None
    if count is not None:
        ended = any(r["index"] == index for r in rows)  # between points, or the sweep's end
        this = 0.0 if ended else max(0.0, point_s - elapsed_s)
        after = max(0, count - len(rows) - (0 if ended else 1))
        eta = round(this + after * point_s, 1)
    return {
        "key": key,
        "index": index,
        "count": count,
        "value": value,
        "eta_s": eta,
        "point_s": point_s,
        "knee": knee,
        "done": rows,
    }


def sweep_text(g: Gauge) -> str:
    """`sweep #1 (2/5) concurrency=8 · ETA 1m30s`: point #1 (points are numbered from 0, as in
    the table and the JSON), the second of five; a search: `sweep #2 concurrency=16 · searching`."""
    what = f"{g['key']}={g['value']}"
    if g.get("count") is None:
        return f"sweep #{int(g['index'])} {what} · searching"
    eta = g.get("eta_s")
    tail = "" if eta is None else f" · ETA {fmt_duration(float(eta))}"
    return f"sweep #{int(g['index'])} ({int(g['index']) + 1}/{g['count']}) {what}{tail}"


def sweep_fraction(g: Gauge, elapsed_s: float) -> float:
    """How far through the sweep (the points ended and this one's share of its time); for a
    search, how far through the point running."""
    point_s = max(float(g.get("point_s") or 0.0), 1e-9)
    now = min(1.0, max(0.0, elapsed_s) / point_s)
    count = g.get("count")
    if count is None:
        return now
    return min(1.0, (len(g.get("done") or ()) + now) / max(int(count), 1))
