"""Every kind of model on the wire: what a run sends (recorded by a server of the test's own, over
real HTTP) and what it makes of each answer a provider gives, in the journal.

The bodies are read back as a server would: data URLs decoded to the very bytes of the file sent,
generated PNGs decoded to their size, the transcription's form parsed by the stdlib's MIME parser
(its fields, the file's name, type and bytes)."""

from __future__ import annotations

import asyncio
import base64
import email.parser
import email.policy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.send.attempt import Encoded
from oxconsole.engine.send.client import EndpointClient
from oxconsole.media.audiostream import SILENT_MP3_FRAME
from oxconsole.media.multipart import transcription_form
from oxconsole.media.pixels import image_size
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import header
from tests.media import FIXTURES, fixture_bytes
from tests.support import journal, run
from tests.support.http import Handler, Recorded, recording_server
from tests.support.workloads import Sets, load_workload

CHAT_OK: dict[str, Any] = {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 5}}
RESPONSE_OK: dict[str, Any] = {
    "status": "completed",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}],
    "usage": {"input_tokens": 5, "output_tokens": 1},
}


def answer(obj: Any) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.json_response(obj)

    return handle


async def run_against(
    tmp_path: Path, answers: dict[str, Handler], lines: list[dict[str, Any]], sets: Sets | None = None
) -> tuple[list[Recorded], list[dict[str, Any]], dict[str, Any]]:
    """Run tests/workloads/sim_media.toml against a recording server answering `answers`, with
    these prompts lines (the fixtures copied beside them); (requests, journal, summary)."""
    for name in ("tone16k.wav", "tone.flac", "tone_cbr.mp3", "image.jpg"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    prompts = "".join(orjson.dumps(x).decode() + "\n" for x in lines)
    async with recording_server(answers) as (url, got):
        w = load_workload(
            "sim_media", tmp_path, {"endpoints.default.base_url": url, **(sets or {})}, prompts=prompts
        )
        out = await run(w)
    return got, journal(w), out.summary


def data_url_bytes(url: str, mime: str) -> bytes:
    head, _, payload = url.partition(",")
    assert head == f"data:{mime};base64", head
    return base64.b64decode(payload, validate=True)


# -- chat and Responses ------------------------------------------------------------------------


async def test_chat_sends_images_and_audio_as_data_urls_of_the_files(tmp_path: Path) -> None:
    png = SyntheticPng(20, 10).png(7)
    given = "data:image/png;base64," + base64.b64encode(png).decode()
    line = {
        "id": "a",
        "prompt": "what is this",
        "images": ["image.jpg", "https://x.test/c.png", given],
        "audio": "tone_cbr.mp3",
    }
    got, recs, summary = await run_against(
        tmp_path, {"/chat/completions": answer(CHAT_OK)}, [line], {"run.stream": False}
    )
    (req,) = got
    assert req.path == "/chat/completions" and req.headers["Content-Type"] == "application/json"
    (msg,) = orjson.loads(req.body)["messages"]
    text, jpg, remote, data, audio = msg["content"]
    assert text == {"type": "text", "text": "what is this"}
    assert data_url_bytes(jpg["image_url"]["url"], "image/jpeg") == fixture_bytes("image.jpg")
    assert remote == {"type": "image_url", "image_url": {"url": "https://x.test/c.png"}}
    assert data["image_url"]["url"] == given
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "mp3"
    assert base64.b64decode(audio["input_audio"]["data"]) == fixture_bytes("tone_cbr.mp3")
    (r,) = recs
    assert (r["images_in"], r["image_pixels"], r["audio_in_s"]) == (3, 334 * 18 + 200, 1.584), r
    assert summary["media"]["images_in"] == 3, summary["media"]


async def test_responses_sends_input_image_and_input_audio(tmp_path: Path) -> None:
    line = {"id": "a", "prompt": "what", "images": ["image.jpg"], "audio": "tone16k.wav"}
    got, recs, _ = await run_against(
        tmp_path,
        {"/responses": answer(RESPONSE_OK)},
        [line],
        {"run.stream": False, "models.0.api": "responses"},
    )
    (item,) = orjson.loads(got[0].body)["input"]
    text, image, audio = item["content"]
    assert text == {"type": "input_text", "text": "what"}
    assert image["type"] == "input_image" and image["detail"] == "auto"
    assert data_url_bytes(image["image_url"], "image/jpeg") == fixture_bytes("image.jpg")
    assert audio == {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(fixture_bytes("tone16k.wav")).decode(), "format": "wav"},
    }
    assert recs[0]["status"] == "ok" and recs[0]["audio_in_s"] == 1.5, recs


async def test_synthetic_images_differ_per_request_and_per_image(tmp_path: Path) -> None:
    syn = {"count": 3, "input_tokens": 8, "images": {"count": 2, "width": 64, "height": 32}}
    got, recs, _ = await run_against(
        tmp_path,
        {"/chat/completions": answer(CHAT_OK)},
        [],
        {"run.stream": False, "prompts": {"synthetic": syn}},
    )
    pngs = []
    for req in got:
        (msg,) = orjson.loads(req.body)["messages"]
        assert msg["content"][0]["type"] == "text"
        for part in msg["content"][1:]:
            pngs.append(data_url_bytes(part["image_url"]["url"], "image/png"))
    assert len(pngs) == 6 and len(set(pngs)) == 6, "every image of every request differs"
    assert {image_size(p) for p in pngs} == {(64, 32)}
    assert all(r["images_in"] == 2 and r["image_pixels"] == 2 * 64 * 32 for r in recs), recs


# -- transcriptions ------------------------------------------------------------------------------


def form(req: Recorded) -> dict[str, tuple[str | None, str, bytes]]:
    """The request's multipart form as the stdlib's MIME parser reads it: name -> (filename,
    content type, bytes)."""
    ctype = req.headers["Content-Type"]
    assert ctype.startswith("multipart/form-data; boundary="), ctype
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {ctype}\r\n\r\n".encode() + req.body
    )
    assert msg.is_multipart() and not msg.defects
    out = {}
    for part in msg.iter_parts():
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        out[str(part.get_param("name", header="content-disposition"))] = (
            part.get_filename(),
            part.get_content_type(),
            payload,
        )
    return out


@pytest.mark.parametrize("stream", [False, True])
async def test_a_transcription_is_a_multipart_form_with_the_file(tmp_path: Path, stream: bool) -> None:
    usage = {"type": "tokens", "input_tokens": 12, "output_tokens": 3, "total_tokens": 15}
    got, recs, _ = await run_against(
        tmp_path,
        {"/audio/transcriptions": answer({"text": "hello there", "usage": usage})},
        [{"id": "a", "audio": "tone.flac", "tag": "stt"}],
        {"run.stream": stream, "models.2.extra_body": {"language": "en", "temperature": 0}},
    )
    (req,) = got
    fields = form(req)
    assert fields["file"] == ("tone.flac", "audio/flac", fixture_bytes("tone.flac"))
    assert fields["model"][2] == b"stt" and fields["response_format"][2] == b"json"
    assert fields["language"][2] == b"en" and fields["temperature"][2] == b"0"
    assert ("stream" in fields) is stream and list(fields)[-1] == "file"
    (r,) = recs
    assert (r["api"], r["audio_in_s"], r["input_tokens"], r["output_tokens"]) == (
        "transcriptions",
        1.5,
        12,
        3,
    )
    # rtf is kept to six places in the journal, latency_ms to three
    assert r["rtf"] == pytest.approx(r["latency_ms"] / 1000 / 1.5, rel=1e-3, abs=1e-6)
    assert r["text"] == "hello there"


async def test_a_synthetic_clip_is_a_wav_of_its_length(tmp_path: Path) -> None:
    syn = {"count": 2, "audio_s": 2.5}
    got, recs, _ = await run_against(
        tmp_path,
        {"/audio/transcriptions": answer({"text": "x"})},
        [],
        {"prompts": {"synthetic": syn}, "models.0.weight": 0, "models.2.weight": 1},
    )
    clips = [form(req)["file"] for req in got]
    assert [c[:2] for c in clips] == [("audio.wav", "audio/wav")] * 2
    assert clips[0][2] != clips[1][2] and all(len(c[2]) == 44 + 2 * 16000 * 5 // 2 for c in clips)
    assert all(r["audio_in_s"] == 2.5 for r in recs), recs


@pytest.mark.parametrize(
    ("ctype", "body", "text", "ttft"),
    [
        ("text/plain", b"plain words", "plain words", False),
        (
            "application/json",
            orjson.dumps({"text": "verbose", "duration": 1.5, "segments": []}),
            "verbose",
            False,
        ),
        (
            "text/event-stream",
            b'data: {"type":"transcript.text.delta","delta":"he"}\n\n'
            b'data: {"type":"transcript.text.delta","delta":"llo"}\n\n'
            b'data: {"type":"transcript.text.done","text":"hello",'
            b'"usage":{"input_tokens":4,"output_tokens":2}}\n\n',
            "hello",
            True,
        ),
        (
            "text/event-stream",
            b'data: {"object":"transcription.chunk","choices":[{"delta":{"content":"vl"}}]}\n\n'
            b'data: {"object":"transcription.chunk",'
            b'"choices":[{"delta":{"content":"lm"},"finish_reason":"stop"}],'
            b'"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n'
            b"data: [DONE]\n\n",
            "vllm",
            True,
        ),
    ],
)
async def test_every_transcription_answer_is_read(
    tmp_path: Path, ctype: str, body: bytes, text: str, ttft: bool
) -> None:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type=ctype)

    _, recs, _ = await run_against(
        tmp_path, {"/audio/transcriptions": handle}, [{"id": "a", "audio": "tone16k.wav", "tag": "stt"}]
    )
    (r,) = recs
    assert r["status"] == "ok" and r["text"] == text, r
    assert ("ttft_ms" in r) is ttft, r
    if ttft:
        assert (r["input_tokens"], r["output_tokens"], r["tokens_source"]) == (4, 2, "usage"), r


# -- rerank, speech, images ----------------------------------------------------------------------


async def test_a_rerank_request_and_a_ranking_as_llama_cpp_answers(tmp_path: Path) -> None:
    ranking = {
        "model": "rr",
        "object": "list",
        "usage": {"prompt_tokens": 9, "total_tokens": 9},
        "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": -2.5}],
    }
    got, recs, summary = await run_against(
        tmp_path,
        {"/rerank": answer(ranking)},
        [{"id": "a", "query": "which", "documents": ["one", "two"], "tag": "rerank"}],
    )
    assert orjson.loads(got[0].body) == {
        "model": "rr",
        "query": "which",
        "documents": ["one", "two"],
        "top_n": 2,
    }
    (r,) = recs
    assert (r["api"], r["documents"], r["input_tokens"], r["output_tokens"]) == ("rerank", 2, 9, 0), r
    assert orjson.loads(r["text"]) == [[1, 0.9], [0, -2.5]] and "ttft_ms" not in r
    assert summary["media"]["documents"] == 2


def chunked(pieces: list[bytes], ctype: str, gap: float = 0.01) -> Handler:
    """An answer written in `pieces` (chunked transfer), `gap` seconds apart."""

    async def handle(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": ctype})
        await resp.prepare(request)
        for p in pieces:
            await asyncio.sleep(gap)
            await resp.write(p)
        await resp.write_eof()
        return resp

    return handle


def sse_speech(audio: bytes, parts: int) -> list[bytes]:
    n = len(audio) // parts
    events = [
        b"data: "
        + orjson.dumps(
            {"type": "speech.audio.delta", "audio": base64.b64encode(audio[i * n : (i + 1) * n]).decode()}
        )
        + b"\n\n"
        for i in range(parts)
    ]
    usage = {"input_tokens": 7, "output_tokens": 30, "total_tokens": 37}
    return [*events, b"data: " + orjson.dumps({"type": "speech.audio.done", "usage": usage}) + b"\n\n"]


WAV_STREAMED = bytearray(header(24000 * 2, rate=24000) + bytes(2 * 24000 * 2))
WAV_STREAMED[4:8] = WAV_STREAMED[40:44] = b"\xff\xff\xff\xff"  # sizes unknown when the header left


@pytest.mark.parametrize(
    ("fmt", "handler", "seconds"),
    [
        ("mp3", chunked([SILENT_MP3_FRAME * 100] * 5, "audio/mpeg"), 500 * 0.024),
        ("wav", chunked([bytes(WAV_STREAMED[:1000]), bytes(WAV_STREAMED[1000:])], "audio/wav"), 2.0),
        ("pcm", chunked([bytes(24000)] * 4, "audio/pcm"), 2.0),
        (
            "flac",
            chunked([fixture_bytes("tone.flac")[:5000], fixture_bytes("tone.flac")[5000:]], "audio/flac"),
            1.5,
        ),
        ("pcm", chunked(sse_speech(bytes(48000 * 3), 3), "text/event-stream"), 3.0),
    ],
)
async def test_speech_is_counted_as_it_streams(
    tmp_path: Path, fmt: str, handler: Handler, seconds: float
) -> None:
    got, recs, summary = await run_against(
        tmp_path,
        {"/audio/speech": handler},
        [{"id": "a", "prompt": "say this aloud", "tag": "tts"}],
        {"models.3.extra_body": {"response_format": fmt}, "models.3.voice": "nova"},
    )
    assert orjson.loads(got[0].body) == {
        "model": "tts",
        "input": "say this aloud",
        "voice": "nova",
        "response_format": fmt,
    }
    (r,) = recs
    assert r["status"] == "ok" and r["audio_out_s"] == pytest.approx(seconds, abs=1e-9), r
    assert 0 < r["ttft_ms"] < r["latency_ms"] and r["characters"] == len("say this aloud"), r
    assert r["rtf"] == pytest.approx(r["latency_ms"] / 1000 / seconds, rel=1e-3, abs=1e-6)
    assert summary["media"]["audio_out_s"] == pytest.approx(seconds, abs=1e-3)


async def test_images_request_and_answer(tmp_path: Path) -> None:
    png = base64.b64encode(SyntheticPng(8, 8).png(1)).decode()
    body = {
        "created": 1,
        "data": [{"b64_json": png, "revised_prompt": "a red cat"}, {"url": "https://x.test/2.png"}],
    }
    got, recs, _ = await run_against(
        tmp_path, {"/images/generations": answer(body)}, [{"id": "a", "prompt": "a cat", "tag": "draw"}]
    )
    assert orjson.loads(got[0].body) == {"model": "draw", "prompt": "a cat", "size": "64x32", "n": 2}
    (r,) = recs
    assert (r["api"], r["images_out"], r["text"], r["output_tokens"]) == ("images", 2, "a red cat", 0), r
    assert "ttft_ms" not in r


# -- answers that are not what their API gives -----------------------------------------------------

BadCase = tuple[str, dict[str, Any], Callable[[], Handler], str]


def _json(obj: Any) -> Callable[[], Handler]:
    return lambda: answer(obj)


@pytest.mark.parametrize(
    ("tag", "line", "make", "detail"),
    [
        (
            "rerank",
            {"query": "q", "documents": ["a"]},
            _json({"results": [{"index": 3, "relevance_score": 1}]}),
            "not an index below 1",
        ),
        ("rerank", {"query": "q", "documents": ["a"]}, _json({"data": []}), "unexpected rerank body"),
        (
            "draw",
            {"prompt": "x"},
            _json({"data": [{"b64_json": base64.b64encode(b"%PDF-1.7 ....").decode()}]}),
            "is not an image",
        ),
        ("draw", {"prompt": "x"}, _json({"data": [{}]}), "neither b64_json nor url"),
        ("tts", {"prompt": "x"}, _json({"error": "none"}), "a JSON body where audio was expected"),
        (
            "tts",
            {"prompt": "x"},
            lambda: chunked([b"OggS" + bytes(100)], "audio/wav"),
            "audio that is not wav",
        ),
        ("tts", {"prompt": "x"}, lambda: chunked([], "audio/wav"), "an answer without audio"),
        ("stt", {"audio": "tone16k.wav"}, _json({"words": []}), "unexpected transcription body"),
    ],
)
async def test_a_wrong_answer_is_a_bad_response(
    tmp_path: Path, tag: str, line: dict[str, Any], make: Callable[[], Handler], detail: str
) -> None:
    paths = {
        "rerank": "/rerank",
        "draw": "/images/generations",
        "tts": "/audio/speech",
        "stt": "/audio/transcriptions",
    }
    _, recs, _ = await run_against(
        tmp_path, {paths[tag]: make()}, [{"id": "a", "tag": tag, **line}], {"retry.max_attempts": 1}
    )
    (r,) = recs
    assert (r["status"], r["error"]) == ("error", "bad_response") and detail in r["error_detail"], r
    assert r["cost"] == 0.0


async def test_our_transcription_form_is_the_sdks_own() -> None:
    """The SDK builds the endpoint's request once (as JSON) and a transcription replaces its body
    and Content-Type with a form: what reaches the server must be what the SDK's own
    `audio.transcriptions.create` sends, but for the form's boundary (and so its length)."""
    wav = fixture_bytes("tone16k.wav")
    async with recording_server({"/audio/transcriptions": answer({"text": "ok"})}) as (url, got):
        c = EndpointClient("e", url, "sk-test-123456", max_connections=2, timeout=5.0)
        try:
            tmpl = transcription_form("stt", filename="tone16k.wav")
            res = await c.attempt(
                Encoded(tmpl.body(wav), tmpl.content_type),
                stream=False,
                timeout=5.0,
                save_text=True,
                api="transcriptions",
            )
            assert res.ok and res.text == "ok", res
            sdk = await c.sdk.audio.transcriptions.create(
                model="stt", file=("tone16k.wav", wav, "audio/wav"), response_format="json"
            )
            assert sdk.text == "ok"
        finally:
            await c.close()
    ours, theirs = got
    assert form(ours) == form(theirs), (form(ours).keys(), form(theirs).keys())

    def same(h: dict[str, str]) -> dict[str, str]:
        skip = {"content-type", "content-length", "x-stainless-retry-count", "x-stainless-read-timeout"}
        return {k.lower(): v for k, v in h.items() if k.lower() not in skip}

    assert same(ours.headers) == same(theirs.headers), set(same(ours.headers).items()) ^ set(
        same(theirs.headers).items()
    )
    assert theirs.headers["Content-Type"].startswith("multipart/form-data; boundary=")
