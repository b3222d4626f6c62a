from __future__ import annotations

import base64

import pytest

from oxconsole.media.kinds import (
    INPUT_AUDIO_FORMATS,
    MediaError,
    audio_type,
    check_audio,
    check_image,
    check_image_url,
    data_url,
    image_type,
    parse_data_url,
)
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import SyntheticWav
from tests.media import fixture_bytes

PNG = SyntheticPng(4, 4).png(1)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (PNG, "png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "jpeg"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "webp"),
        (b"GIF89a\x01\x00", "gif"),
        (b"GIF87a\x01\x00", "gif"),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", None),
        (b"%PDF-1.7", None),
        (b"", None),
    ],
)
def test_image_type(data: bytes, kind: str | None) -> None:
    assert image_type(data) == kind


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (SyntheticWav(0.01).wav(1), "wav"),
        (b"ID3\x04\x00", "mp3"),
        (b"\xff\xfb\x90\x64", "mp3"),  # MPEG-1 layer III, 128 kbit/s, 44.1 kHz
        (b"\xff\xf3\x48\xc4", "mp3"),  # MPEG-2 layer III
        (b"\xff\xf1\x50\x80", None),  # ADTS AAC: layer bits 00
        (b"\xff\xfb\xf0\x64", None),  # bitrate index 15 (bad)
        (b"fLaC\x00\x00\x00\x22", "flac"),
        (b"OggS\x00\x02", "ogg"),
        (b"\x1a\x45\xdf\xa3\x9f", "webm"),
        (b"\x00\x00\x00\x20ftypM4A ", "mp4"),
        (b"RIFF\x00\x00\x00\x00WEBP", None),
        (b"hello", None),
    ],
)
def test_audio_type(data: bytes, kind: str | None) -> None:
    assert audio_type(data) == kind


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("tone16k.wav", "wav"),
        ("tone_cbr.mp3", "mp3"),
        ("tone_noxing.mp3", "mp3"),
        ("tone.flac", "flac"),
        ("tone.ogg", "ogg"),
        ("tone.opus", "ogg"),
        ("tone.webm", "webm"),
        ("tone.m4a", "mp4"),
    ],
)
def test_audio_type_of_real_files(name: str, kind: str) -> None:
    assert audio_type(fixture_bytes(name)) == kind


def test_data_url_round_trip() -> None:
    url = data_url("image/png", PNG)
    assert url.startswith("data:image/png;base64,")
    assert parse_data_url(url, "x") == ("image/png", PNG)
    assert check_image_url(url, "x") == "png"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/a.png", "a data URL"),
        ("data:image/png,rawbytes", "a base64 data URL"),
        ("data:image/png;base64,@@@@", "valid base64"),
        ("data:image/png;base64,", "a data URL with content"),
    ],
)
def test_bad_data_urls(url: str, expected: str) -> None:
    with pytest.raises(MediaError, match=expected):
        parse_data_url(url, "prompts.jsonl: line 3: images.0")


def test_declared_type_must_match_the_bytes() -> None:
    url = "data:image/jpeg;base64," + base64.b64encode(PNG).decode()
    with pytest.raises(MediaError) as e:
        check_image_url(url, "prompts.jsonl: line 3: images.1")
    assert str(e.value) == (
        "prompts.jsonl: line 3: images.1: "
        "expected a media type that matches its bytes (image/png), got 'image/jpeg'"
    )


def test_not_an_image_names_what_it_is() -> None:
    with pytest.raises(MediaError) as e:
        check_image(b"%PDF-1.7 ...", "prompts.jsonl: line 9: images.0 (docs/a.png)")
    assert str(e.value) == (
        "prompts.jsonl: line 9: images.0 (docs/a.png): expected a PNG, JPEG, WebP or GIF image, got a PDF"
    )
    with pytest.raises(MediaError, match="got a WAV file"):
        check_image(SyntheticWav(0.01).wav(1), "w")
    with pytest.raises(MediaError, match="got an empty file"):
        check_image(b"", "w")


def test_input_audio_takes_wav_and_mp3_only() -> None:
    assert check_audio(SyntheticWav(0.01).wav(1), "a", allowed=INPUT_AUDIO_FORMATS) == "wav"
    with pytest.raises(MediaError) as e:
        check_audio(b"fLaC\x00\x00\x00\x22", "p.jsonl: line 2: audio (a.flac)", allowed=INPUT_AUDIO_FORMATS)
    assert str(e.value) == (
        "p.jsonl: line 2: audio (a.flac): "
        "expected an MP3 or WAV file (input_audio takes no other), got a FLAC file"
    )
    with pytest.raises(MediaError, match="got a PNG file"):
        check_audio(PNG, "a")
