"""The figures' registry: each declaration names keys that a journal record and a summary really
have, each kind of figure reads as it should, and the consumers read the declarations."""

from __future__ import annotations

import dataclasses

import pytest

from oxconsole.base.figures import (
    BLOCK_KEYS,
    COST,
    EXPORTED,
    FIGURES,
    KINDS,
    LATENCY,
    REGISTRY,
    SUMMARY_TIMINGS,
    TIMINGS,
    TTFOT,
    TTFT,
    Column,
    Figure,
    at,
    nested,
)
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.aggregate import Tally, build_summary

ALWAYS = ("requests.total", "requests.ok", "requests.error", "tokens.input", "tokens.output", "cost.total")
"""Summary keys every run's summary has (besides the timings and the rates)."""


def _record(i: int, **kw: object) -> RequestRecord:
    base = dict(
        id=str(i), model="m", endpoint="e", status="ok", attempts=1, t_scheduled=100.0 + i,
        t_sent=100.0 + i, queue_ms=1.0 + i, latency_ms=50.0 + i, ttft_ms=10.0 + i, itl_ms=2.0,
        input_tokens=10, output_tokens=20, cost=0.5, ttfot_ms=12.0 + i, reasoning_tokens=4,
        cached_tokens=3, slo_ok=i % 2 == 0,
    )  # fmt: skip
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def _summary() -> dict[str, object]:
    tally = Tally()
    for i in range(5):
        tally.count(_record(i))
    return build_summary(
        name="t", started_at=0.0, duration_s=10.0, overall=tally.overall, models=tally.models.items(),
        changes=[], phases=[], slo_target=0.9,
    )  # fmt: skip


def test_every_journal_key_is_a_record_field_and_written_as_such() -> None:
    fields = {f.name for f in dataclasses.fields(RequestRecord)}
    # a request of another kind (a transcription, say) carries the media keys: absent otherwise
    media = dict(
        images_in=1, image_pixels=4096, images_out=1, documents=3, characters=40, audio_in_s=1.5,
        audio_out_s=2.0, rtf=0.25,
    )  # fmt: skip
    written = _record(1, **media).to_json_dict()
    for f in REGISTRY.values():
        if f.journal:
            assert f.journal in fields, f"{f.id}: journal key {f.journal!r} is no RequestRecord field"
            assert f.journal in written, f"{f.id}: journal key {f.journal!r} not in a record's JSON {written}"


def test_the_declared_summary_keys_are_where_a_summary_keeps_them() -> None:
    s = _summary()
    for f in (*SUMMARY_TIMINGS, TTFOT):
        block = f.of(s)
        assert isinstance(block, dict) and tuple(block) == BLOCK_KEYS, f"{f.key}: {block!r}"
    assert [k for k in s if k in {f.key for f in SUMMARY_TIMINGS}] == [f.key for f in SUMMARY_TIMINGS], list(
        s
    )
    for f in REGISTRY.values():
        if f.key in ALWAYS or f.key.startswith(("throughput.", "goodput.")) or f.key == "cache_hit_rate":
            assert f.value(s) is not None, f"{f.key} not in the summary: {s}"
    assert TTFT.at("p50").value(s) == pytest.approx(12.0, rel=0.01), s["ttft_ms"]
    assert COST.value(s) == pytest.approx(2.5), s["cost"]


def test_each_kind_reads_as_its_own() -> None:
    shown = {
        "percentiles": (TTFT, {"p50": 12.0}, None),
        "value": (LATENCY.at("p99"), 1234.6, "1235ms"),
        "rate": (Figure("x.per_s", "x/s", "rate"), 12.345, "12.3/s"),
        "count": (Figure("x.n", "n", "count"), 123456, "123k"),
        "fraction": (Figure("x.share", "share", "fraction"), 0.931, "93.1%"),
        "money": (Figure("x.cost", "cost", "money"), 0.0432, "0.0432"),
        "interval": (Figure("ci.x", "x CI", "interval", "ms"), [10.0, 12.5], "[10.0ms, 12.5ms]"),
    }  # fmt: skip
    assert set(shown) == set(KINDS), f"a kind without its case here: {set(KINDS) - set(shown)}"
    for kind, (f, v, want) in shown.items():
        assert f.kind == kind, (f, kind)
        if want is not None:
            assert f.text(v) == want, f"{kind}: {v!r} read {f.text(v)!r}, expected {want!r}"
        assert f.text(None) == "–", f"{kind}: no value read {f.text(None)!r}"
    assert Figure("x.share", "share", "fraction").header == "share %"
    with pytest.raises(ValueError, match="not a percentile block"):
        COST.at("p50")


def test_a_percentile_member_is_a_figure_of_its_own() -> None:
    p99 = TTFT.at("p99")
    assert (p99.key, p99.label, p99.header, p99.kind, p99.id) == (
        "ttft_ms.p99", "TTFT p99", "TTFT p99 ms", "value", "ttft_ms.p99",
    ), p99  # fmt: skip
    block = nested(((p99, 7.0), (COST, 1.5)))
    assert block == {"ttft_ms": {"p99": 7.0}, "cost": {"total": 1.5}}, block
    assert p99.value(block) == 7.0 and at(block, "cost.total") == 1.5 and at(block, "cost.none") is None


def test_ids_keys_and_exported_names_are_unique() -> None:
    figures = list(REGISTRY.values())
    for attr in ("id", "key"):
        seen = [getattr(f, attr) for f in figures]
        assert len(seen) == len(set(seen)), f"{attr} declared twice: {sorted(seen)}"
    names = [f.prometheus for f in figures if f.prometheus]
    assert len(names) == len(set(names)), names
    assert all(f.prometheus and f.kind == "percentiles" for f in EXPORTED), EXPORTED
    assert {f.id for f in FIGURES} <= {*REGISTRY, *(f.at(q).id for f in TIMINGS for q in BLOCK_KEYS)}


def test_a_column_reads_its_figure_from_a_block() -> None:
    cols = (Column(COST, 9), Column(LATENCY.at("p50"), 9, 0, "p50 lat"), Column(REGISTRY["requests.ok"], 7))
    block = {"cost": {"total": 0.25}, "latency_ms": {"p50": 101.4}, "requests": {"ok": 123456}}
    assert "".join(c.title() for c in cols) == "     cost  p50 lat     ok"
    assert "".join(c.cell(block) for c in cols) == "   0.2500      101   123k"
    assert "".join(c.cell({}) for c in cols) == "        –        –      –"


def test_a_figure_not_every_run_shows_says_where_it_is_shown() -> None:
    plain = {"tokens": {"input": 10, "output": 20}, "ttfot_ms": {"p50": 5.0}}
    reasoning = {"tokens": {"input": 10, "output": 20, "reasoning": 4}, "ttfot_ms": {"p50": 9.0}}
    assert TTFT.shown_in(plain) and TTFT.shown_in(reasoning)
    assert not TTFOT.shown_in(plain), "a plain stream's TTFOT is its TTFT: no row of its own"
    assert TTFOT.shown_in(reasoning) and TTFOT.at("p50").shown_in(reasoning), TTFOT
    assert TTFOT.shown_in({"tool_calls": 2}), "a run with tool calls shows the answer's first token"


def test_the_live_collector_files_every_timing_a_summary_declares() -> None:
    from oxconsole.metrics.aggregate import METRICS
    from oxconsole.metrics.collector import RECORDED

    assert tuple(f.key for f in RECORDED) == METRICS == tuple(f.key for f in SUMMARY_TIMINGS), (
        RECORDED,
        METRICS,
    )
