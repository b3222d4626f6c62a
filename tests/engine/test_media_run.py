"""Every kind of model in one run on the simulator, over real HTTP: each record's figures and cost
against the simulator's exact formulas and the model's prices, the summary made of them (and the
same figures rebuilt from the journal alone), `--resume`, and worker processes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.journal.journal import ok_ids
from oxconsole.reports.summary import summary_from_journal
from oxconsole.workload import Workload, check_prompts, load_workload
from tests.media import FIXTURES
from tests.support import engine_for, journal, read_jsonl, run
from tests.support.workloads import Sets
from tests.support.workloads import load_workload as load_test_workload

ROOM_MS = 100.0
"""What a loaded 2-core machine may add to a latency seen by the client (tests/sim/test_sim_media.py)."""

SPEECH = "Every kind of model, one run."  # 29 characters: 29 / 15 s of audio
LINES: list[dict[str, Any]] = [
    {"id": "see", "prompt": "what is this?", "images": ["image.jpg", "image.jpg"]},
    {"id": "hear", "prompt": "and this?", "audio": "tone16k.wav"},
    {"id": "rank", "query": "which", "documents": ["one", "two", "three"], "tag": "rerank"},
    {"id": "write-wav", "audio": "tone16k.wav", "tag": "stt"},
    {"id": "write-flac", "audio": "tone.flac", "tag": "stt"},
    {"id": "say", "prompt": SPEECH, "tag": "tts"},
    {"id": "draw", "prompt": "a cat", "tag": "draw"},
]

PRICES: Sets = {
    "models.0.price_per_1m_input": 2.0,
    "models.1.price_per_request": 0.001,
    "models.2.price_per_audio_minute": 0.006,
    "models.3.price_per_audio_minute": 0.015,
    "models.3.price_per_1m_characters": 15.0,
    "models.4.price_per_image": 0.04,
    "plans": {
        "per-request": {"default": {"per_request": 0.002}},
        "per-unit": {"default": {"per_image": 0.02, "per_audio_minute": 0.01, "per_1m_characters": 10.0}},
    },
}


def media_workload(tmp_path: Path, sets: Sets | None = None, lines: list[dict[str, Any]] = LINES) -> Workload:
    for name in ("tone16k.wav", "tone.flac", "image.jpg"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    prompts = "".join(orjson.dumps(x).decode() + "\n" for x in lines)
    return load_test_workload("sim_media", tmp_path, {**PRICES, **(sets or {})}, prompts=prompts)


def near(got: float, want: float) -> bool:
    """A latency seen by the client against the simulator's schedule (never earlier)."""
    return want - 2 <= got <= want + ROOM_MS


@pytest.mark.timing
async def test_every_kind_in_one_run_exact_and_priced(tmp_path: Path) -> None:
    w = media_workload(tmp_path)
    out = await run(w)
    assert out.exit_code == 0, out
    recs = {r["id"]: r for r in journal(w)}
    assert all(r["status"] == "ok" for r in recs.values()), recs
    sim = w.sim

    see = recs["see"]  # (13 characters + 3) // 4 text tokens + 2 images x image_tokens
    assert see["input_tokens"] == (13 + 3) // 4 + 2 * sim["vision"].image_tokens, see
    assert (see["images_in"], see["image_pixels"]) == (2, 2 * 334 * 18)
    assert see["cost"] == pytest.approx(see["input_tokens"] * 2.0 / 1e6, abs=1e-12)
    assert recs["hear"]["audio_in_s"] == 1.5 and "api" not in recs["hear"]

    rank = recs["rank"]
    assert (rank["api"], rank["documents"], rank["cost"]) == ("rerank", 3, 0.001), rank
    assert near(rank["latency_ms"], sim["rr"].ttft * 1000), rank

    stt = sim["stt"]
    for rid in ("write-wav", "write-flac"):
        r = recs[rid]
        want = (stt.ttft + stt.rtf * 1.5) * 1000  # ttft + rtf x audio seconds
        assert r["audio_in_s"] == 1.5 and near(r["latency_ms"], want), (r, want)
        assert r["rtf"] == pytest.approx(r["latency_ms"] / 1500, rel=1e-3, abs=1e-6)
        assert r["cost"] == pytest.approx(1.5 / 60 * 0.006, abs=1e-12), r

    say, tts = recs["say"], sim["tts"]
    seconds = len(SPEECH) / 15  # the simulator's 15 characters a second, exactly (wav)
    assert say["audio_out_s"] == pytest.approx(seconds, abs=1e-6) and say["characters"] == len(SPEECH), say
    assert near(say["ttft_ms"], tts.ttft * 1000), say
    assert near(say["latency_ms"], (tts.ttft + seconds * tts.audio_rtf) * 1000), say
    assert say["cost"] == pytest.approx(seconds / 60 * 0.015 + len(SPEECH) * 15 / 1e6, abs=1e-12), say

    draw, n = recs["draw"], w.model("draw").n
    assert (draw["images_out"], draw["cost"]) == (n, pytest.approx(n * 0.04)), draw
    assert near(draw["latency_ms"], n * sim["draw"].image_s * 1000), draw

    s = out.summary
    media = s["media"]
    assert (media["images_in"], media["documents"], media["images_out"]) == (2, 3, n), media
    assert media["audio_in_s"] == 4.5 and media["audio_out_s"] == pytest.approx(seconds, abs=1e-3)
    assert media["rtf"]["p50"] is not None and s["models"]["tts"]["media"]["rtf"]["p50"] == pytest.approx(
        say["rtf"], rel=0.02
    )
    assert s["cost"]["total"] == pytest.approx(sum(r["cost"] for r in recs.values()), abs=1e-9)
    plans = s["cost"]["plans"]
    assert plans["per-request"]["total"] == pytest.approx(0.002 * len(LINES), abs=1e-9)
    unit = n * 0.02 + (1.5 * 2 + seconds) / 60 * 0.01 + len(SPEECH) * 10 / 1e6
    assert plans["per-unit"]["total"] == pytest.approx(unit, abs=1e-9), plans

    again = summary_from_journal(w.results_path(), plans=w.plans)  # `oxconsole report`
    for key in ("images_in", "image_pixels", "audio_in_s", "audio_out_s", "images_out", "documents", "rtf"):
        assert again["media"][key] == media[key], key
    assert again["cost"]["plans"]["per-unit"]["total"] == plans["per-unit"]["total"]


async def test_resume_sends_the_missing_media_requests_again(tmp_path: Path) -> None:
    w = media_workload(tmp_path, {"sim.models.draw.image_s": "5ms"})
    assert (await run(w)).exit_code == 0
    results = w.results_path()
    records = read_jsonl(results)
    kept = [r for r in records if r["id"] not in ("write-flac", "draw")]
    results.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
    again = load_workload(w.path)
    done, _ = ok_ids(results)
    total = check_prompts(again).total_requests
    assert total is not None
    engine = engine_for(again, skip_ids=done, total_expected=total - len(done))
    second = await run(again, engine)
    assert second.exit_code == 0, engine.warnings
    resent = {r["id"]: r for r in read_jsonl(results)[len(kept) :]}
    assert set(resent) == {"write-flac", "draw"}, resent
    assert resent["write-flac"]["audio_in_s"] == 1.5 and resent["draw"]["images_out"] == 2, resent
    assert second.summary["media"]["images_out"] == 2, "the summary covers the whole journal"


@pytest.mark.subprocess
@pytest.mark.slow
async def test_worker_processes_send_every_kind(tmp_path: Path) -> None:
    syn = {"count": 8, "input_tokens": 16, "images": {"count": 1, "width": 64, "height": 64}, "audio_s": 0.5}
    sets: Sets = {
        "run.workers": 2,
        "prompts": {"synthetic": syn},
        "models.2.weight": 1,  # synthetic prompts go everywhere: chat and transcriptions
        "sim.models.stt.rtf": 0.01,
    }
    w = load_test_workload("sim_media", tmp_path, sets)
    out = await run(w)
    recs = journal(w)
    assert out.exit_code == 0 and len(recs) == 8, recs
    by_api = {r.get("api", "chat"): r for r in recs}
    assert set(by_api) == {"chat", "transcriptions"}, by_api
    assert by_api["chat"]["images_in"] == 1 and by_api["chat"]["image_pixels"] == 64 * 64
    assert by_api["chat"]["audio_in_s"] == 0.5 and by_api["transcriptions"]["audio_in_s"] == 0.5
    assert out.summary["media"]["audio_in_s"] == pytest.approx(0.5 * 8)


async def test_failed_media_requests_are_retried(tmp_path: Path) -> None:
    # half the requests of each kind fail with a 500 (the simulator's seeded draw): each is retried
    # until it answers, its body the same bytes (a transcription's form included)
    sets: Sets = {
        "retry.max_attempts": 8,
        "retry.backoff": "1ms",
        "sim.models.stt.error_rate": 0.5,
        "sim.models.rr.error_rate": 0.5,
        "sim.models.draw.error_rate": 0.5,
        "sim.models.draw.image_s": "5ms",
    }
    lines = [{**x, "id": f"{x['id']}-{k}"} for k in range(4) for x in (LINES[2], LINES[3], LINES[6])]
    w = media_workload(tmp_path, sets, lines)
    out = await run(w)
    recs = journal(w)
    assert out.exit_code == 0 and all(r["status"] == "ok" for r in recs), recs
    retried = [r for r in recs if r["attempts"] > 1]
    assert retried and all(r["attempt_errors"] == {"http_500": r["attempts"] - 1} for r in retried), retried
    assert all(r["audio_in_s"] == 1.5 for r in recs if r["api"] == "transcriptions"), recs


async def test_a_transcription_falls_back_to_a_chat_model_with_the_audio(tmp_path: Path) -> None:
    # the body is built again for each model: the fallback gets the audio as input_audio
    sets: Sets = {
        "sim.models.stt.error_rate": 1.0,
        "retry.max_attempts": 1,
        "routing.rules.1.fallback": ["vision"],
    }
    w = media_workload(tmp_path, sets, [LINES[3]])
    out = await run(w)
    (r,) = journal(w)
    assert out.exit_code == 0 and r["status"] == "ok", r
    assert (r["model"], r["models_tried"], r["audio_in_s"]) == ("vision", ["stt", "vision"], 1.5), r
    assert "api" not in r and "rtf" not in r, "a chat answer: no transcription figures"
