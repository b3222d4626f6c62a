"""One way to show a number: each kind has one formatter, and a cost reads the same in the
summary table, the sweep table and the console."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oxconsole.base.figures import FIGURES
from oxconsole.base.units import NONE, cut, fmt_count, fmt_duration, fmt_money, fmt_ms, fmt_rate
from oxconsole.reports.summarytable import render_summary
from oxconsole.sweep.table import render_table
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.header import header_lines
from tests.support.ui import fixed_snapshot


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (0, "0"),
        (0.0000340, "0.0000340"),  # 3 significant digits below a cent, never an exponent
        (0.000123456, "0.000123"),
        (0.0099, "0.00990"),
        (0.0432, "0.0432"),
        (0.5, "0.5000"),
        (12.3456, "12.35"),  # cents from 1 up
        (1234.567, "1,234.57"),
        (None, NONE),
        (float("nan"), NONE),
    ],
)
def test_money_has_one_rule(cost: float | None, shown: str) -> None:
    assert fmt_money(cost) == shown, f"{cost!r} -> {fmt_money(cost)!r}, expected {shown!r}"


def summary_costing(cost: float) -> dict[str, Any]:
    return {
        "name": "r",
        "duration_s": 10.0,
        "requests": {"total": 1, "ok": 1, "error": 0},
        "throughput": {"requests_per_s": 0.1, "output_tokens_per_s": 1.0},
        "latency_ms": {"p50": 100.0, "p99": 120.0},
        "cost": {"total": cost, "per_task": cost},
        "models": {"m": {"requests": {"total": 1, "ok": 1, "error": 0}, "cost": {"total": cost}}},
    }


@pytest.mark.parametrize("cost", [0.0000340, 0.00417, 0.0432, 12.3456])
def test_one_cost_reads_the_same_in_every_table_and_the_console(cost: float) -> None:
    want = fmt_money(cost)
    table = render_summary(summary_costing(cost))
    cost_line = next(line for line in table.splitlines() if line.startswith("cost "))
    assert cost_line.split() == ["cost", want], f"summary table: {cost_line!r}, expected {want!r}"
    sweep = render_table("run.concurrency", [{"value": 1, "summary": summary_costing(cost)}])
    row = sweep.splitlines()[2]
    assert row.split()[-1] == want, f"sweep table row {row!r}, expected cost/task {want!r}"
    snap = dataclasses.replace(fixed_snapshot(), cost=cost)
    head = header_lines(snap, Palette(), 120, name="r", state="running")[0].plain
    assert f"cost {want}" in head, f"console header {head!r}, expected cost {want!r}"


def test_the_other_kinds() -> None:
    got = {
        "duration": [fmt_duration(x) for x in (5.4, 65, 3725)],
        "duration 1 decimal": fmt_duration(5.44, 1),
        "ms": [fmt_ms(x) for x in (4.25, 123.4, 12_345.0, None)],
        "ms bare": [fmt_ms(x, unit=False) for x in (4.25, 1999.4)],
        "rate": [fmt_rate(x) for x in (1.234, 12.34, 123.4, 1234.5)],
        "count": [fmt_count(x) for x in (1234, 123_456, 1_234_567, 12_345_678)],
        "cut": [cut("meta-llama/Llama", 10), cut("short", 10)],
    }
    assert got == {
        "duration": ["5s", "1m05s", "1h02m"],
        "duration 1 decimal": "5.4s",
        "ms": ["4.2ms", "123ms", "12.3s", NONE],
        "ms bare": ["4.2", "1999"],
        "rate": ["1.23/s", "12.3/s", "123/s", "1,234/s"],
        "count": ["1,234", "123k", "1.23M", "12.3M"],
        "cut": ["meta-llam…", "short"],
    }, got


def test_each_compared_figure_declares_its_label_and_unit_once() -> None:
    from oxconsole.reports import compare as cmp

    heads = [f.header for f in FIGURES]
    assert [label for _, label in cmp.FIGURES] == heads, (cmp.FIGURES, heads)
    assert "TTFT p99 ms" in heads and "error %" in heads, heads
