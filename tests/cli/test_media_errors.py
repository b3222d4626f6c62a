"""Bad media input from the command line: `validate` and a run both exit 2 before anything is sent,
naming the file, the key and what was expected, every bad line at once; the media example
validates and runs on the simulator with no key."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from tests.media import FIXTURES
from tests.support import oxconsole_here, read_jsonl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "media.toml"

WORKLOAD = """
[endpoints.default]
base_url = "http://127.0.0.1:9/v1"
[[models]]
name = "vision"
[[models]]
name = "tts"
api = "speech"
weight = 0
[[models]]
name = "stt"
api = "transcriptions"
weight = 0
[prompts]
file = "p.jsonl"
[[routing.rules]]
tag = "tts"
models = ["tts"]
[[routing.rules]]
tag = "stt"
models = ["stt"]
[output]
results = "out/results.jsonl"
"""


def write(tmp_path: Path, *lines: dict[str, object], workload: str = WORKLOAD) -> None:
    shutil.copy(FIXTURES / "image.jpg", tmp_path / "photo.png")  # a JPEG, whatever its name
    shutil.copy(FIXTURES / "tone.flac", tmp_path / "a.flac")
    (tmp_path / "p.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    (tmp_path / "w.toml").write_text(workload)


BAD_LINES: list[dict[str, object]] = [
    {"prompt": "x", "images": ["gone.png"]},
    {"prompt": "x", "images": ["a.flac"]},
    {"prompt": "x", "audio": "a.flac"},
    {"tag": "tts", "images": ["photo.png"]},
    {"tag": "stt", "prompt": "no audio"},
    {"prompt": "fine", "images": ["photo.png"]},
]

EXPECTED = [
    "p.jsonl: line 1: images.0 (gone.png): expected an existing image file, got no such file",
    "p.jsonl: line 2: images.0 (a.flac): expected a PNG, JPEG, WebP or GIF image, got a FLAC file",
    "p.jsonl: line 3: audio (a.flac): expected an MP3 or WAV file (input_audio takes no other), "
    'got a FLAC file (it may go to model "vision", api = "chat")',
    'p.jsonl: line 4: prompt: expected text to speak (it may go to model "tts", api = "speech"), got none',
    "p.jsonl: line 5: audio: expected an audio file to transcribe "
    '(it may go to model "stt", api = "transcriptions"), got none',
]


@pytest.mark.parametrize("command", [("validate", "w.toml"), ("w.toml", "--headless")])
def test_every_bad_media_line_is_told_before_anything_is_sent(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    write(tmp_path, *BAD_LINES)
    r = oxconsole_here(*command, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    for line in EXPECTED:
        assert line in r.stderr, (line, r.stderr)
    assert "line 6" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists(), "nothing sent, nothing journaled"


def test_an_unknown_api_is_bad_input(tmp_path: Path) -> None:
    write(tmp_path, {"prompt": "x"}, workload=WORKLOAD.replace('api = "speech"', 'api = "speach"'))
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert (
        'w.toml: models.1.api: expected "chat" | "completions" | "embeddings" | "responses" | "rerank"'
        in r.stderr
    )
    assert '(did you mean "speech"?)' in r.stderr, r.stderr


def test_the_media_example_validates(tmp_path: Path) -> None:
    r = oxconsole_here("validate", str(EXAMPLE), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "whisper  api transcriptions (/audio/transcriptions)" in r.stdout, r.stdout
    assert "price 0.006/audio minute" in r.stdout and "price 0.04/image" in r.stdout, r.stdout


@pytest.mark.slow
def test_the_media_example_runs_on_the_simulator_with_no_key(tmp_path: Path) -> None:
    r = oxconsole_here(
        str(EXAMPLE), "--headless", "--output", "r.jsonl", "--set", "prompts.repeat=1", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    recs = read_jsonl(tmp_path / "r.jsonl")
    kinds = {r.get("api", "chat") for r in recs}
    assert kinds == {"chat", "transcriptions", "speech", "rerank", "images"}, recs
    assert all(r["status"] == "ok" and r["cost"] > 0 for r in recs), recs
