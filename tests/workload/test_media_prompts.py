"""Prompts lines with images, audio, a query and documents: read into each prompt's media, and
every way a line can be wrong for the models it may reach told before a run, naming the file,
the key and what was expected."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import orjson
import pytest

from oxconsole.media.png import SyntheticPng
from oxconsole.workload import Workload, WorkloadError, check_prompts, iter_prompts
from oxconsole.workload.prompts.mediaprompts import media_seed
from tests.media import FIXTURES
from tests.support.workloads import Sets, load_workload


def lines(*objs: dict[str, object]) -> str:
    return "".join(orjson.dumps(o).decode() + "\n" for o in objs)


def media_workload(tmp_path: Path, *objs: dict[str, object], sets: Sets | None = None) -> Workload:
    for name in ("tone16k.wav", "tone.flac", "tone_cbr.mp3", "image.jpg"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return load_workload("sim_media", tmp_path, sets, prompts=lines(*objs))


def problems(tmp_path: Path, *objs: dict[str, object], sets: Sets | None = None) -> str:
    w = media_workload(tmp_path, *objs, sets=sets)
    with pytest.raises(WorkloadError) as e:
        check_prompts(w)
    return str(e.value)


def test_a_line_s_media_is_read_once_with_its_figures(tmp_path: Path) -> None:
    png = SyntheticPng(20, 10).png(1)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    w = media_workload(
        tmp_path,
        {"id": "a", "prompt": "what is it", "images": ["image.jpg", url, "https://x.test/c.png"]},
        {"id": "b", "prompt": "and this", "images": ["image.jpg"], "audio": "tone16k.wav"},
        {"id": "c", "query": "q", "documents": ["d1", "d2"], "tag": "rerank"},
        {"id": "d", "audio": "tone.flac", "tag": "stt"},
    )
    stats = check_prompts(w)
    assert stats.count == 4
    a, b, c, d = list(iter_prompts(w))
    assert a.media is not None and b.media is not None and c.media is not None and d.media is not None
    jpg, data, remote = a.media.images
    assert jpg.file is not None and jpg.file.kind == "jpeg" and jpg.pixels == 334 * 18
    assert data.url == url and data.pixels == 200
    assert remote.url == "https://x.test/c.png" and remote.pixels is None
    assert a.media.image_count == 3 and a.media.image_pixels == 334 * 18 + 200
    assert b.media.images[0].file is jpg.file, "a file two lines name is read once"
    assert b.media.audio is not None and b.media.audio_seconds == 1.5
    assert (c.media.query, c.media.documents, c.messages[0]["content"]) == ("q", ("d1", "d2"), "q")
    assert d.media.audio is not None and d.media.audio.kind == "flac" and d.messages[0]["content"] == ""


def test_synthetic_media_differs_per_request_and_repeats_per_id(tmp_path: Path) -> None:
    syn = {"count": 2, "input_tokens": 8, "images": {"count": 2, "width": 32, "height": 16}, "documents": 3}
    w = load_workload(
        "sim_media", tmp_path, {"prompts": {"synthetic": syn, "repeat": 2}, "models.1.weight": 1}
    )
    check_prompts(w)
    ps = list(iter_prompts(w))
    seeds = [p.media.seed for p in ps if p.media is not None]
    assert len(set(seeds)) == 4, seeds
    assert seeds[0] == media_seed(w.run.seed, ps[0].id)
    m = ps[0].media
    assert m is not None and m.image_count == 2 and m.image_pixels == 2 * 32 * 16
    assert m.documents is not None and len(m.documents) == 3 and all(len(d) > 16 for d in m.documents)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            {"prompt": "x", "images": ["missing.png"]},
            "prompts.jsonl: line 1: images.0 (missing.png): expected an existing image file, "
            "got no such file",
        ),
        (
            {"prompt": "x", "images": ["tone16k.wav"]},
            "prompts.jsonl: line 1: images.0 (tone16k.wav): expected a PNG, JPEG, WebP or GIF image, "
            "got a WAV file",
        ),
        (
            {"prompt": "x", "audio": "image.jpg"},
            "prompts.jsonl: line 1: audio (image.jpg): expected a WAV, MP3, FLAC, Ogg, WebM or MP4 audio "
            "file, got a JPEG file",
        ),
        (
            {"prompt": "x", "audio": "tone.flac"},
            "prompts.jsonl: line 1: audio (tone.flac): expected an MP3 or WAV file (input_audio takes no "
            'other), got a FLAC file (it may go to model "vision", api = "chat")',
        ),
        (
            {"prompt": "x", "images": ["data:image/jpeg;base64,iVBORw0KGgo="]},
            "prompts.jsonl: line 1: images.0: expected",
        ),
        ({"prompt": "x", "images": []}, "prompts.jsonl: line 1: images: expected an array of image files"),
        ({"prompt": "x", "documents": ["a", 3]}, "prompts.jsonl: line 1: documents.1: expected a non-empty"),
        (
            {"tag": "tts", "images": ["image.jpg"]},
            "prompts.jsonl: line 1: prompt: expected text to speak "
            '(it may go to model "tts", api = "speech"), got none',
        ),
        (
            {"tag": "rerank", "prompt": "q"},
            "prompts.jsonl: line 1: documents: expected an array of strings (a reranker's documents) "
            '(it may go to model "rr", api = "rerank"), got none',
        ),
        (
            {"tag": "stt", "prompt": "hello"},
            "prompts.jsonl: line 1: audio: expected an audio file to transcribe "
            '(it may go to model "stt", api = "transcriptions"), got none',
        ),
        (
            {"turns": ["a", "b"], "images": ["image.jpg"]},
            'prompts.jsonl: line 1: expected no images or audio with "turns" (a session sends text), '
            'got "images"',
        ),
    ],
)
def test_a_bad_line_is_told_before_the_run(tmp_path: Path, line: dict[str, object], expected: str) -> None:
    got = problems(tmp_path, line)
    assert expected in got, got


def test_every_bad_line_is_told(tmp_path: Path) -> None:
    got = problems(
        tmp_path,
        {"prompt": "x", "images": ["nope.png"]},
        {"prompt": "ok"},
        {"tag": "rerank", "prompt": "q"},
    )
    assert "line 1: images.0 (nope.png)" in got and "line 3: documents" in got, got


def test_a_file_that_cannot_be_read_names_why(tmp_path: Path) -> None:
    (tmp_path / "dir.png").mkdir()
    got = problems(tmp_path, {"prompt": "x", "images": ["dir.png"]})
    assert "images.0 (dir.png): expected an image file, got a directory or special file" in got, got


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            {"prompts": {"synthetic": {"count": 2}}, "models.1.weight": 1},
            "workload.toml: prompts.synthetic.documents: expected documents for the reranker (it may go to "
            'model "rr", api = "rerank"), got none in prompts.synthetic',
        ),
        (
            {"prompts": {"items": ["x"]}, "models.2.weight": 1},
            "workload.toml: prompts: expected audio to transcribe",
        ),
    ],
)
def test_prompts_without_a_file_must_give_what_the_models_need(
    tmp_path: Path, sets: Sets, expected: str
) -> None:
    w = load_workload("sim_media", tmp_path, sets)
    with pytest.raises(WorkloadError) as e:
        check_prompts(w)
    assert expected in str(e.value), str(e.value)


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            {"models.0.voice": "x"},
            'models.0.voice: expected nothing on a model whose api is "chat" (voice is for api = "speech")',
        ),
        (
            {"models.4.size": "big"},
            'models.4.size: expected an image size "WIDTHxHEIGHT" (each 1 to 16384) or "auto"',
        ),
        ({"models.4.n": 11}, "models.4.n: expected an integer between 1 and 10 (images per request)"),
        ({"models.0.api": "vision"}, 'models.0.api: expected "chat" | "completions"'),
        (
            {"prompts": {"synthetic": {"count": 1, "audio_s": 0}}},
            "prompts.synthetic.audio_s: expected a number of seconds > 0 and at most 3600",
        ),
        ({"prompts": {"synthetic": {"count": 1, "images": {"width": 0}}}}, "prompts.synthetic.images.width"),
        ({"sim.models.stt.rtf": -1}, "sim.models.stt.rtf: expected a number >= 0"),
    ],
)
def test_bad_keys(tmp_path: Path, sets: Sets, expected: str) -> None:
    with pytest.raises(WorkloadError) as e:
        load_workload("sim_media", tmp_path, sets)
    assert expected in str(e.value), str(e.value)
