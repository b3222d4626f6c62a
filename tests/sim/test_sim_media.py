"""The simulator serves every kind, each through the real openai SDK (a raw post for rerank, which
the SDK lacks) over loopback HTTP, exact when `jitter = 0`:

* a transcription answers `ttft + rtf x` its audio's seconds after admission;
* speech is `len(input) / 15` seconds of audio, its first bytes `ttft` after admission and its last
  `ttft + seconds x audio_rtf`;
* n images take `n x image_s`;
* each image in a chat request costs `image_tokens` prompt tokens, prefilled like text.

Timings are seen from the client: never earlier than the schedule (2 ms for the clocks), with room
above it for a loaded 2-core machine (see tests/sim/test_sim.py `test_the_sdk_sees_the_schedule`:
100 ms holds beside a CPU hog and still fails an answer a whole schedule late)."""

from __future__ import annotations

import base64
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from oxconsole.media.audiolen import riff_seconds
from oxconsole.media.audiostream import AudioCounter
from oxconsole.media.multipart import transcription_form
from oxconsole.media.pixels import image_size
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import SyntheticWav
from oxconsole.workload import SimModelProfile
from tests.support.sim import raw_post, running_sim

ROOM_MS = 100.0
"""What a loaded machine may add to a client-side timing (see the module's docstring)."""

PROFILES = {
    "stt": SimModelProfile(ttft=0.1, rtf=0.2, jitter=0.0),
    "tts": SimModelProfile(ttft=0.1, audio_rtf=0.1, jitter=0.0),
    "draw": SimModelProfile(image_s=0.1, jitter=0.0),
    "rr": SimModelProfile(ttft=0.05, jitter=0.0),
    "vision": SimModelProfile(ttft=0.05, tokens_per_s=0, output_tokens=4, image_tokens=300, jitter=0.0),
    "prefill": SimModelProfile(
        ttft=0.05, tokens_per_s=0, output_tokens=1, image_tokens=1000, prefill_tokens_per_s=10000, jitter=0.0
    ),
}


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running_sim(PROFILES) as u:
        yield u


@pytest.fixture
async def client(url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    c = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
    yield c
    await c.close()


def within(ms: list[float], want: float) -> None:
    m = statistics.median(ms)
    assert want - 2 <= m <= want + ROOM_MS, (ms, want)


@pytest.mark.timing
async def test_a_transcription_takes_ttft_plus_rtf_times_its_seconds(client: openai.AsyncOpenAI) -> None:
    wav = SyntheticWav(1.5).wav(1)
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        tr = await client.audio.transcriptions.create(model="stt", file=("a.wav", wav, "audio/wav"))
        took.append((time.perf_counter() - t0) * 1000)
        assert tr.text and len(tr.text.split()) == round(2.5 * 1.5), tr.text
    within(took, 100 + 0.2 * 1500)  # ttft + rtf x 1.5 s


@pytest.mark.timing
async def test_a_streamed_transcription_runs_from_ttft_to_the_same_end(client: openai.AsyncOpenAI) -> None:
    wav = SyntheticWav(2.0).wav(1)
    firsts: list[float] = []
    ends: list[float] = []
    for _ in range(3):
        t0 = time.perf_counter()
        stream = await client.audio.transcriptions.create(
            model="stt", file=("a.wav", wav, "audio/wav"), stream=True
        )
        kinds: list[str] = []
        async for event in stream:
            if not kinds:
                firsts.append((time.perf_counter() - t0) * 1000)
            kinds.append(event.type)
        ends.append((time.perf_counter() - t0) * 1000)
        assert kinds[-1] == "transcript.text.done" and kinds[0] == "transcript.text.delta", kinds
    within(firsts, 100)
    within(ends, 100 + 0.2 * 2000)


@pytest.mark.parametrize(("fmt", "want"), [("text", "text/plain"), ("verbose_json", "application/json")])
async def test_transcription_formats(url: str, fmt: str, want: str) -> None:
    form = transcription_form("stt", response_format=fmt)
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            url + "/audio/transcriptions",
            data=form.body(SyntheticWav(0.4).wav(1)),
            headers={"Content-Type": form.content_type},
        ) as r,
    ):
        assert r.status == 200 and r.headers["Content-Type"].startswith(want)
        body = await r.read()
    if fmt == "verbose_json":
        assert orjson.loads(body)["duration"] == 0.4


@pytest.mark.timing
@pytest.mark.parametrize("fmt", ["wav", "pcm", "mp3"])
async def test_speech_streams_len_over_15_seconds_at_its_rtf(client: openai.AsyncOpenAI, fmt: str) -> None:
    text = "x" * 30  # 2 s of audio: 200 ms of work at audio_rtf 0.1, after ttft 100 ms
    firsts: list[float] = []
    ends: list[float] = []
    for _ in range(3):
        counter = AudioCounter(fmt)
        first: float | None = None
        t0 = time.perf_counter()
        async with client.audio.speech.with_streaming_response.create(
            model="tts",
            voice="alloy",
            input=text,
            response_format=fmt,  # type: ignore[arg-type]
        ) as resp:
            async for chunk in resp.iter_bytes():
                if chunk and first is None:
                    first = (time.perf_counter() - t0) * 1000
                counter.feed(chunk)
        ends.append((time.perf_counter() - t0) * 1000)
        assert first is not None
        firsts.append(first)
        # wav and pcm exactly; mp3 in whole 24 ms frames (84 of them hold the 2 s)
        assert counter.seconds == (2.0 if fmt != "mp3" else 84 * 0.024), counter.seconds
    within(firsts, 100)
    within(ends, 100 + 2.0 * 0.1 * 1000)


async def test_speech_as_events(url: str) -> None:
    body = {
        "model": "tts",
        "input": "y" * 15,
        "voice": "alloy",
        "response_format": "wav",
        "stream_format": "sse",
    }
    status, headers, raw = await raw_post(url, body, "/audio/speech")
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = [orjson.loads(e.removeprefix(b"data: ")) for e in raw.split(b"\n\n") if e]
    assert [e["type"] for e in events[-1:]] == ["speech.audio.done"]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert riff_seconds(audio) == 1.0 and events[-1]["usage"]["input_tokens"] == 4


@pytest.mark.timing
async def test_n_images_take_n_times_image_s(client: openai.AsyncOpenAI) -> None:
    await client.images.generate(model="draw", prompt="a cat", size="256x256", n=1)  # the PNG, made once
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        got = await client.images.generate(model="draw", prompt="a cat", size="256x256", n=2)
        took.append((time.perf_counter() - t0) * 1000)
        assert got.data is not None and len(got.data) == 2
        assert all(image_size(base64.b64decode(d.b64_json or "")) == (256, 256) for d in got.data)
    within(took, 2 * 100)


async def test_a_ranking_scores_every_document_and_keeps_top_n(url: str) -> None:
    docs = ["alpha", "beta", "gamma", "delta"]
    status, _, raw = await raw_post(
        url, {"model": "rr", "query": "q", "documents": docs, "top_n": 3}, "/rerank"
    )
    assert status == 200
    out = orjson.loads(raw)
    scores = [r["relevance_score"] for r in out["results"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True), out
    assert (
        len({r["index"] for r in out["results"]}) == 3 and out["usage"]["prompt_tokens"] == (1 + 19 + 3) // 4
    )
    again = orjson.loads(
        (await raw_post(url, {"model": "rr", "query": "q", "documents": docs}, "/rerank"))[2]
    )
    assert again["results"][:3] == out["results"], "the same pair, the same score"


def image_part(seed: int) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": SyntheticPng(8, 8).data_url(seed)}}


async def test_each_image_costs_image_tokens(client: openai.AsyncOpenAI) -> None:
    text = {"type": "text", "text": "x" * 40}  # 10 tokens
    messages: list[Any] = [{"role": "user", "content": [text, image_part(1), image_part(2)]}]
    got = await client.chat.completions.create(model="vision", messages=messages)
    assert got.usage is not None and got.usage.prompt_tokens == 10 + 2 * 300, got.usage
    resp = await client.responses.create(
        model="vision",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "x" * 40},
                    {"type": "input_image", "image_url": SyntheticPng(8, 8).data_url(3), "detail": "auto"},
                ],
            }
        ],
    )
    assert resp.usage is not None and resp.usage.input_tokens == 10 + 300, resp.usage


@pytest.mark.timing
async def test_image_tokens_are_prefilled_like_text(client: openai.AsyncOpenAI) -> None:
    took = []
    for _ in range(3):
        t0 = time.perf_counter()
        messages: list[Any] = [{"role": "user", "content": [image_part(1), image_part(2)]}]
        await client.chat.completions.create(model="prefill", messages=messages)
        took.append((time.perf_counter() - t0) * 1000)
    within(took, 50 + 2000 / 10000 * 1000)  # ttft + 2,000 image tokens at 10,000 a second


@pytest.mark.parametrize(
    ("path", "payload", "message"),
    [
        ("/audio/speech", {"model": "tts", "input": "", "voice": "a"}, "input must be a non-empty string"),
        (
            "/audio/speech",
            {"model": "tts", "input": "x", "response_format": "opus"},
            "speaks wav, pcm and mp3",
        ),
        ("/images/generations", {"model": "draw", "prompt": "x", "size": "9x"}, "size must be WIDTHxHEIGHT"),
        ("/images/generations", {"model": "draw", "prompt": "x", "n": 0}, "n must be an integer"),
        ("/rerank", {"model": "rr", "query": "q", "documents": []}, "documents must be a non-empty list"),
    ],
)
async def test_bad_requests_are_400s_saying_why(
    url: str, path: str, payload: dict[str, Any], message: str
) -> None:
    status, _, raw = await raw_post(url, payload, path)
    assert status == 400 and message in orjson.loads(raw)["error"]["message"], raw


@pytest.mark.parametrize(
    ("fields", "file", "message"),
    [
        ({"model": "stt"}, None, "missing form field: file"),
        ({}, b"RIFF", "missing form field: model"),
        (
            {"model": "stt"},
            b"%PDF-1.7 not audio",
            "file: expected a WAV, MP3, FLAC, Ogg, WebM or MP4 audio file",
        ),
    ],
)
async def test_a_bad_transcription_form_is_a_400(
    url: str, fields: dict[str, str], file: bytes | None, message: str
) -> None:
    fd = aiohttp.FormData(default_to_multipart=True)
    for k, v in fields.items():
        fd.add_field(k, v)
    if file is not None:
        fd.add_field("file", file, filename="a.wav", content_type="audio/wav")
    async with aiohttp.ClientSession() as s, s.post(url + "/audio/transcriptions", data=fd) as r:
        assert r.status == 400
        assert message in orjson.loads(await r.read())["error"]["message"]
