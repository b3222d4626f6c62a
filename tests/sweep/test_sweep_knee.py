"""The knee rule and the automatic search, on summary dicts alone (with and without `goodput`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from oxconsole.base.exits import BadInput
from oxconsole.metrics.knee import knee_index, next_auto_value, slo_met
from oxconsole.sweep.plan import parse_over


def summary(
    rps: float, p99: float, *, ok: int = 100, goodput: dict[str, Any] | None = None
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "requests": {"total": ok, "ok": ok, "error": 0},
        "throughput": {"requests_per_s": rps, "output_tokens_per_s": rps * 10},
        "latency_ms": {"p50": p99 / 2, "p99": p99},
    }
    if goodput is not None:
        s["goodput"] = goodput
    return s


def capacity_curve(c: int, capacity: int, latency: float = 100.0) -> dict[str, Any]:
    """A server that serves `capacity` at once and queues the rest (the simulator's shape)."""
    served = min(c, capacity)
    waves = -(-c // capacity)
    return summary(served / (latency / 1000.0), latency * waves)


def test_without_slo_the_knee_is_the_highest_throughput_before_p99_doubles() -> None:
    values = [1, 2, 4, 8, 16]
    summaries = [capacity_curve(v, 8) for v in values]
    assert knee_index(values, summaries) == 3


def test_ties_within_three_percent_go_to_the_lower_load() -> None:
    values = [4, 8, 12]
    summaries = [summary(40, 100), summary(79, 110), summary(80, 190)]
    assert knee_index(values, summaries) == 1


def test_points_past_a_doubled_p99_cannot_be_the_knee_even_with_more_throughput() -> None:
    values = [1, 2, 4]
    summaries = [summary(10, 100), summary(20, 150), summary(25, 250)]
    assert knee_index(values, summaries) == 1


def test_values_given_out_of_order_are_judged_from_the_lowest_load() -> None:
    values = [16, 8, 1, 4]
    summaries = [capacity_curve(v, 8) for v in values]
    assert knee_index(values, summaries) == 1


def test_with_slo_the_knee_is_the_highest_goodput_with_the_slo_met() -> None:
    def g(rps: float, met: bool) -> dict[str, Any]:
        return {"requests_per_s": rps, "fraction": 0.99 if met else 0.5, "target": 0.95, "met": met}

    values = [1, 2, 4, 8]
    summaries = [
        summary(10, 100, goodput=g(10, True)),
        summary(20, 100, goodput=g(19.5, True)),
        summary(40, 400, goodput=g(38, True)),  # p99 quadrupled, but the SLO holds: still eligible
        summary(60, 900, goodput=g(30, False)),
    ]
    assert knee_index(values, summaries) == 2
    assert [slo_met(s) for s in summaries] == [True, True, True, False]


def good(rps: float, met: bool) -> dict[str, Any]:
    """A point's summary with `[slo]`: goodput `rps`, the SLO met or not."""
    g = {"requests_per_s": rps, "fraction": 0.99 if met else 0.5, "target": 0.9, "met": met}
    return summary(rps, 1000.0, goodput=g)


def test_with_slo_a_cpu_engines_modest_gains_still_move_the_knee() -> None:
    """llama-server on 4 slots: goodput 1.12/1.53/2.08/0.23 req/s at 1/2/4/8, the SLO met at 1, 2
    and 4 (+28-48% a doubling, less than half the load's rise): the knee is 4, the highest goodput
    with the SLO met."""
    values = [1, 2, 4, 8]
    summaries = [good(1.12, True), good(1.53, True), good(2.08, True), good(0.23, False)]
    assert knee_index(values, summaries) == 2


def test_with_slo_the_best_goodput_wins_wherever_it_is_and_ties_go_to_the_lower_load() -> None:
    assert knee_index([1, 2, 4], [good(10, True), good(30, True), good(25, True)]) == 1
    # within 3% of the best: the lower load (noise must not move the knee)
    assert knee_index([1, 2, 4, 8], [good(10, True), good(20, True), good(20.4, True), good(9, False)]) == 1
    # a point that missed the SLO is never the knee, however high its goodput
    assert knee_index([1, 2], [good(10, True), good(50, False)]) == 0


def test_the_search_with_slo_climbs_a_cpu_engines_curve_to_the_last_point_that_meets_it() -> None:
    """Goodput x1.4 a doubling (far less than the load's x2) and the SLO met up to 8: the search
    doubles to 16, finds it past the knee, bisects back, and the knee is 8."""

    def curve(c: int) -> dict[str, Any]:
        return good(c**0.5, c <= 8)

    measured: dict[int, dict[str, Any]] = {}
    while (v := next_auto_value(measured)) is not None:
        measured[v] = curve(v)
        assert len(measured) < 30, sorted(measured)
    values = sorted(measured)
    k = knee_index(values, [measured[v] for v in values])
    assert k is not None and values[k] == 8, (values, k)


def test_no_knee_when_no_point_met_the_slo_or_finished_a_request() -> None:
    bad = {"requests_per_s": 1.0, "fraction": 0.1, "target": 0.95, "met": False}
    assert knee_index([1, 2], [summary(5, 100, goodput=bad), summary(9, 100, goodput=bad)]) is None
    assert knee_index([1], [summary(0, 0, ok=0)]) is None
    assert slo_met(summary(5, 100)) is None


@pytest.mark.parametrize("capacity", [3, 5, 8, 12, 20, 33, 100])
def test_the_search_doubles_then_bisects_to_within_ten_percent(capacity: int) -> None:
    measured: dict[int, dict[str, Any]] = {}
    while (v := next_auto_value(measured)) is not None:
        assert v not in measured
        measured[v] = capacity_curve(v, capacity)
        assert len(measured) < 30
    values = sorted(measured)
    k = knee_index(values, [measured[v] for v in values])
    assert k is not None
    assert abs(values[k] - capacity) <= 0.1 * capacity
    assert len(measured) <= 3 * capacity.bit_length()


def test_the_search_with_slo_stops_where_the_slo_breaks() -> None:
    def curve(c: int) -> dict[str, Any]:
        s = capacity_curve(c, 64)
        met = c <= 10  # the SLO breaks long before the server saturates
        s["goodput"] = {
            "requests_per_s": s["throughput"]["requests_per_s"],
            "fraction": 1.0,
            "target": 0.9,
            "met": met,
        }
        return s

    measured: dict[int, dict[str, Any]] = {}
    while (v := next_auto_value(measured)) is not None:
        measured[v] = curve(v)
    values = sorted(measured)
    k = knee_index(values, [measured[v] for v in values])
    assert k is not None and values[k] == 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("concurrency", "expected KEY=V1,V2"),
        ("=1,2", "expected KEY=V1,V2"),
        ("concurrency=1,,4", "empty value at position 2"),
        ("rate=auto", "auto only for concurrency"),
    ],
)
def test_bad_over_names_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(BadInput, match=expected):
        parse_over(text)


def test_over_splits_values_at_top_level_commas_only() -> None:
    over = parse_over('retry.statuses=[429, 500],[503],"a,b"')
    assert over.path == "retry.statuses"
    assert over.texts == ("[429, 500]", "[503]", '"a,b"')
    assert parse_over("concurrency=auto").auto
    assert parse_over("rate=1,2").path == "run.rate"


def test_sweep_state_round_trips_through_the_manifest_and_refuses_another_sweep(tmp_path: Any) -> None:
    from oxconsole.sweep.plan import SweepState, resumed_state

    results = tmp_path / "r.jsonl"
    st = SweepState("concurrency=auto", 2.0, ["run.seed=3"])
    st.starts = {0: 1, 1: 2}
    st.done = {0: {"value": 1, "text": "1", "summary": {"requests": {"ok": 3}}}}
    st.save(results, "w", "w.toml")
    back = resumed_state(results, SweepState("concurrency=auto", 2.0, ["run.seed=3"]))
    assert back.starts == {0: 1, 1: 2} and back.done == st.done
    assert back.id_suffix(0) == "@0" and back.id_suffix(1) == "@1.2"
    with pytest.raises(BadInput, match=r"point_duration was 2\.0, now 3\.0"):
        resumed_state(results, SweepState("concurrency=auto", 3.0, ["run.seed=3"]))
    with pytest.raises(BadInput, match="expected the journal of a sweep"):
        resumed_state(tmp_path / "other.jsonl", st)


def test_the_table_prices_each_point_under_every_plan() -> None:
    """The article's trade-off over packing.size: cost per task under each plan beside tasks/s and
    latency per task; a plan a point lacks shows "-", and there is no block without plans."""
    from oxconsole.sweep.table import render_table

    def point(v: int, tps: float, per_task: float, plans: dict[str, float]) -> dict[str, Any]:
        s = summary(tps, 100.0 * v)
        s["cost"] = {"total": per_task * 10, "per_task": per_task}
        s["cost"]["plans"] = {
            n: {"total": x * 10, "per_task": x, "projected": x * 10} for n, x in plans.items()
        }
        s["requests"] = {"total": 10, "ok": 10, "error": 0}
        return {"value": v, "summary": s}

    pts: list[Mapping[str, Any]] = [
        point(1, 10.0, 0.002, {"flat": 0.002, "tokens": 3.4e-5}),
        point(8, 40.0, 0.00025, {"flat": 0.00025}),
    ]
    text = render_table("packing.size", pts)
    block = text.split("cost per task by plan:\n", 1)[1].splitlines()
    assert block[0].split() == ["#", "value", "tasks/s", "latency", "p50", "actual", "flat", "tokens"]
    assert block[1].split()[-3:] == ["0.00200", "0.00200", "0.0000340"]  # 3 digits, never an exponent
    assert block[2].split()[-3:] == ["0.000250", "0.000250", "-"]
    assert "cost per task by plan" not in render_table("packing.size", [point(1, 10.0, 0.002, {})])


def test_the_table_fits_80_columns_leaving_out_columns_that_say_nothing() -> None:
    """A concurrency sweep offers its value (no `offered`), without [slo] (no goodput) or streaming
    (no ITL); a sweep over another key shows the load each point offered, and goodput when set."""
    from oxconsole.sweep.table import render_table

    def point(v: int, goodput: dict[str, Any] | None = None, itl: bool = True, c: int = 0) -> dict[str, Any]:
        s = summary(1234.5, 2345.0, goodput=goodput)
        s["ttft_ms"] = {"p50": 101.0, "p99": 1999.0}
        if itl:
            s["itl_ms"] = {"p50": 5.0, "p99": 5.4}
        return {"value": v, "text": str(v), "load": {"concurrency": c or v, "rate": None}, "summary": s}

    plain = render_table("concurrency", [point(1), point(64)]).splitlines()
    assert plain[1].split() == ["#", "value", "req/s", "tok/s", "TTFT", "ITL", "latency", "err", "cost/task"]
    assert plain[2].split()[5:8] == ["101/1999", "5.0/5.4", "1172/2345"]
    assert max(len(line) for line in plain[:-1]) <= 80, plain  # the knee's sentence may wrap
    good = {"requests_per_s": 12.5, "fraction": 0.97, "target": 0.95, "met": True}
    other = render_table("packing.size", [point(2, good, itl=False, c=8), point(8, good, itl=False, c=8)])
    head = other.splitlines()[1].split()
    assert head == [
        "#",
        "value",
        "offered",
        "req/s",
        "tok/s",
        "goodput",
        "TTFT",
        "latency",
        "err",
        "cost/task",
    ]
    assert "c=8" in other and "12.5 97%" in other  # packing.size=8 at c=8 is no reason to hide it


def test_the_search_stops_doubling_once_a_point_did_not_become_the_knee() -> None:
    """Past a capacity of 8 each doubling still gains 20% (more than `RISE`, far less than the
    knee rule asks): the knee stays at 8, so doubling on to the cap would only probe past it."""

    def curve(c: int) -> dict[str, Any]:
        rps = 10.0 * c if c <= 8 else 80.0 * 1.2 ** math.log2(c / 8)
        return summary(rps, 100.0)

    measured: dict[int, dict[str, Any]] = {}
    while (v := next_auto_value(measured)) is not None:
        measured[v] = curve(v)
        assert len(measured) < 30, sorted(measured)
    values = sorted(measured)
    k = knee_index(values, [measured[v] for v in values])
    assert k is not None and values[k] == 8, (values, k)
    assert max(measured) == 16, f"probed past the knee: {sorted(measured)}"


def test_one_point_is_no_knee() -> None:
    """A sweep stopped after its first point has nothing to compare that point with."""
    from oxconsole.sweep.table import render_table, sweep_json

    points: list[Mapping[str, Any]] = [{"value": 1, "summary": summary(10.0, 100.0)}]
    assert knee_index([1], [points[0]["summary"]]) is None
    assert sweep_json("concurrency", points)["knee"] is None
    assert "knee: none (one point has nothing to compare with)" in render_table("concurrency", points)


def test_the_table_is_by_value_and_numbers_points_from_0_as_the_json_does() -> None:
    """A search runs 1, 2, 4, 8, then 6: the table reads 1, 2, 4, 6, 8, and the point the
    progress line called `point #4` (6) is #4 in the table, in the knee's line and in the JSON."""
    from oxconsole.sweep.table import render_table, sweep_json

    values = [1, 2, 4, 8, 6]
    points: list[Mapping[str, Any]] = [{"value": v, "summary": capacity_curve(v, 6)} for v in values]
    lines = render_table("concurrency", points).splitlines()
    rows = [line.split() for line in lines[2:7]]
    numbers = [r[1] if r[0] == "*" else r[0] for r in rows]
    shown = [r[2] if r[0] == "*" else r[1] for r in rows]
    assert shown == ["1", "2", "4", "6", "8"] and numbers == ["0", "1", "2", "4", "3"], lines
    assert "rows by value; # is the order the points ran" in lines
    assert sweep_json("concurrency", points)["knee"] == {"index": 4, "value": 6}  # the contract's index
    assert any(line.startswith("knee: point #4, concurrency=6") for line in lines), lines
