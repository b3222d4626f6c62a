"""Every kind of model in the figures: the summary's `media` block (totals of ok requests, per
second, the real-time factor's percentiles) per run, model and phase, what the media prices bill
under a plan, and the journal's media keys read back as written, hostile values refused."""

from __future__ import annotations

from typing import Any

import pytest

from oxconsole.journal.records import MEDIA_SECONDS_MAX, RequestRecord, billed_units
from oxconsole.metrics.aggregate import Tally, build_summary
from oxconsole.metrics.media import MEDIA_TOTALS, MediaLive
from oxconsole.metrics.plans import plan_total
from oxconsole.workload import PricePlan, Prices


def rec(model: str, status: str = "ok", **media: Any) -> RequestRecord:
    return RequestRecord(
        id=f"{model}-{len(media)}-{status}-{id(media)}",
        model=model,
        endpoint="e",
        status=status,
        attempts=1,
        t_scheduled=1.0,
        t_sent=1.0,
        queue_ms=0.0,
        latency_ms=100.0,
        **media,
    )


RECORDS = [
    rec("vision", images_in=2, image_pixels=2 * 512 * 512, audio_in_s=3.0),
    rec("vision", images_in=1, image_pixels=100),
    rec("vision", "error", images_in=5, image_pixels=5),  # errors serve nothing
    rec("stt", api="transcriptions", audio_in_s=10.0, rtf=0.1),
    rec("stt", api="transcriptions", audio_in_s=20.0, rtf=0.3),
    rec("tts", api="speech", audio_out_s=6.0, rtf=0.2, characters=90),
    rec("draw", api="images", images_out=4),
    rec("rr", api="rerank", documents=7),
    rec("plain"),
]


def summary(records: list[RequestRecord], duration_s: float = 10.0) -> dict[str, Any]:
    t = Tally()
    for r in records:
        t.count(r)
    plans = {
        "per-unit": PricePlan(
            "per-unit",
            default=Prices(per_image=0.04, per_audio_minute=0.006, per_1m_characters=15.0),
        ),
        "per-request": PricePlan("per-request", default=Prices(per_request=0.001)),
    }
    return build_summary(
        name="m",
        started_at=0.0,
        duration_s=duration_s,
        overall=t.overall,
        models=t.models.items(),
        changes=[],
        phases=[],
        plans=plans,
    )


def test_the_media_block_of_the_run_and_each_model() -> None:
    s = summary(RECORDS)
    m = s["media"]
    want = {
        "images_in": 3,
        "image_pixels": 2 * 512 * 512 + 100,
        "audio_in_s": 33.0,
        "audio_out_s": 6.0,
        "images_out": 4,
        "documents": 7,
    }
    assert {k: m[k] for k in MEDIA_TOTALS} == want, m
    assert m["per_s"] == {k: round(v / 10.0, 3) for k, v in want.items()}, m["per_s"]
    # rtf over the three ok transcriptions and speech: 0.1, 0.2, 0.3 (log buckets: within 1%)
    assert m["rtf"]["p50"] == pytest.approx(0.2, rel=0.01) and m["rtf"]["max"] == pytest.approx(0.3, rel=0.01)
    models = s["models"]
    assert "media" not in models["plain"], models["plain"]
    assert models["stt"]["media"]["audio_in_s"] == 30.0 and models["stt"]["media"]["rtf"]["p50"] is not None
    assert models["draw"]["media"]["rtf"]["p50"] is None, models["draw"]["media"]
    assert models["vision"]["media"]["images_in"] == 3


def test_a_text_run_keeps_its_shape() -> None:
    s = summary([rec("plain"), rec("plain", "error")])
    assert "media" not in s and all("media" not in b for b in s["models"].values()), s


def test_the_media_prices_under_a_plan() -> None:
    s = summary(RECORDS)
    plans = s["cost"]["plans"]
    # images 4 x 0.04; audio: transcriptions' input 30 s + speech's output 6 s = 0.6 min x 0.006;
    # 90 characters x 15 / 1e6 (chat's images and audio are billed through its tokens: none here)
    want = 4 * 0.04 + 36 / 60 * 0.006 + 90 * 15 / 1e6
    assert plans["per-unit"]["total"] == pytest.approx(want, abs=1e-9), plans
    assert plans["per-request"]["total"] == pytest.approx(8 * 0.001, abs=1e-9), plans
    assert s["models"]["tts"]["cost"]["plans"]["per-unit"]["total"] == pytest.approx(
        6 / 60 * 0.006 + 90 * 15 / 1e6, abs=1e-12
    )


@pytest.mark.parametrize(
    ("api", "want"),
    [
        ("images", (4, 0.0, 0)),
        ("transcriptions", (0, 10.0, 0)),
        ("speech", (0, 6.0, 90)),
        (None, (0, 0.0, 0)),
    ],
)
def test_billed_units(api: str | None, want: tuple[int, float, int]) -> None:
    assert billed_units(api, 4, 10.0, 6.0, 90) == want


def test_records_round_trip_and_hostile_values_are_refused() -> None:
    r = rec("tts", api="speech", audio_out_s=6.0, rtf=0.2, characters=90)
    d = r.to_json_dict()
    assert {k: d[k] for k in ("api", "audio_out_s", "rtf", "characters")} == {
        "api": "speech",
        "audio_out_s": 6.0,
        "rtf": 0.2,
        "characters": 90,
    }
    assert "images_in" not in d and "documents" not in d, d
    assert RequestRecord.from_json_dict(d) == r
    bad = {**d, "audio_out_s": float("nan"), "rtf": -1, "characters": "90", "images_out": 10**30}
    back = RequestRecord.from_json_dict(bad)
    assert (back.audio_out_s, back.rtf, back.characters, back.images_out) == (None, None, None, None)
    huge = rec("tts", api="speech", audio_out_s=float("inf"), rtf=float("nan"))
    assert (huge.audio_out_s, huge.rtf) == (MEDIA_SECONDS_MAX, 0.0)
    assert "text" not in rec("plain").to_json_dict()


def test_live_view_from_the_summary_and_its_json() -> None:
    s = summary(RECORDS)
    live = MediaLive.from_summary(s)
    assert live is not None and live.images_out_per_s == 0.4 and live.audio_in_per_s == 3.3, live
    from oxconsole.metrics.snapshot import _plain

    assert MediaLive.from_dict(_plain(live)) == live
    assert MediaLive.from_summary(summary([rec("plain")])) is None


def test_plan_total_matches_the_summary() -> None:
    t = Tally()
    for r in RECORDS:
        t.count(r)
    plan = PricePlan("p", default=Prices(per_image=1.0))
    assert plan_total(plan, {m: st.usage() for m, st in t.models.items()}) == 4.0
