from __future__ import annotations

import random
import struct

import pytest

from oxconsole.media.audiolen import audio_seconds, riff_seconds, webm_seconds
from oxconsole.media.kinds import MediaError
from oxconsole.media.wav import SyntheticWav
from tests.media import fixture_bytes

TONE_S = 1.5  # tone16k.wav: 24,000 frames at 16 kHz (sox made it; ffprobe reads 1.500000)


def chunk(cid: bytes, data: bytes) -> bytes:
    return cid + struct.pack("<I", len(data)) + data + (b"\x00" if len(data) & 1 else b"")


def test_synthetic_wav() -> None:
    assert audio_seconds(SyntheticWav(2.5).wav(1)) == 2.5


def test_extensible_float_wav_with_a_list_chunk() -> None:
    # WAVE_FORMAT_EXTENSIBLE, 2 channels of 32-bit float at 48 kHz: Python 3.11's wave refuses it
    fmt = struct.pack("<HHIIHH", 0xFFFE, 2, 48000, 48000 * 8, 8, 32) + struct.pack("<HHI", 22, 32, 3)
    fmt += b"\x00" * 16  # the subformat GUID
    body = chunk(b"fmt ", fmt) + chunk(b"LIST", b"INFOISFT\x05\x00\x00\x00sox!\x00")
    body += chunk(b"data", bytes(48000 * 8))
    data = b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body
    assert riff_seconds(data) == 1.0


def test_wav_whose_data_size_runs_past_the_end() -> None:
    data = SyntheticWav(1.0).wav(1)
    assert riff_seconds(data[: 44 + 16000]) == 0.5


@pytest.mark.parametrize(
    ("name", "seconds", "tolerance"),
    [
        ("tone16k.wav", TONE_S, 1e-9),
        ("tone.flac", TONE_S, 1e-9),
        ("tone.ogg", TONE_S, 1e-9),
        ("tone.opus", TONE_S, 1e-9),  # the granule position less the pre-skip (ffprobe: 1.5065)
        ("tone.m4a", TONE_S, 0.001),
        ("tone.webm", 1.508, 1e-9),  # Info Duration, the encoder's pre-skip included (ffprobe: 1.508)
        ("tone_live.webm", 1.508, 0.021),  # no Duration: the last block's time, a frame short
        # MP3 holds whole 1152-sample frames plus the encoder's delay: 1.584 s for 1.5 s of audio
        ("tone_cbr.mp3", 1.584, 1e-9),
        ("tone_vbr.mp3", 1.584, 1e-9),
        ("tone_noxing.mp3", 1.584, 1e-9),
        ("tone_vbr_noxing.mp3", 1.584, 1e-9),  # a frame scan (mutagen's first-frame estimate is wrong)
    ],
)
def test_real_files(name: str, seconds: float, tolerance: float) -> None:
    assert audio_seconds(fixture_bytes(name), name) == pytest.approx(seconds, abs=tolerance)


def test_webm_without_segment() -> None:
    with pytest.raises(ValueError):
        webm_seconds(b"\x1a\x45\xdf\xa3\x80")


@pytest.mark.parametrize("data", [b"%PDF-1.7", b"RIFF\x04\x00\x00\x00WAVE", b"\x1a\x45\xdf\xa3\x84\x42\x86"])
def test_not_audio_or_broken(data: bytes) -> None:
    with pytest.raises(MediaError) as e:
        audio_seconds(data, "prompts.jsonl: line 4: audio (a.wav)")
    assert str(e.value).startswith("prompts.jsonl: line 4: audio (a.wav): expected ")


MAGICS = [b"RIFF\x00\x00\x00\x00WAVE", b"ID3\x04", b"\xff\xfb\x90\x64", b"fLaC", b"OggS", b"\x1a\x45\xdf\xa3"]


@pytest.mark.parametrize("magic", MAGICS)
@pytest.mark.parametrize("seed", range(40))
def test_garbage_after_a_magic_is_a_media_error_or_a_length(magic: bytes, seed: int) -> None:
    # a prompts line's file is the user's, a server's audio is anyone's: a broken one is told, never
    # a traceback from the header readers (tinytag's own exceptions included)
    rng = random.Random(seed)
    data = magic + rng.randbytes(rng.randint(0, 600))
    try:
        seconds = audio_seconds(data, "x.bin")
    except MediaError as e:
        assert str(e).startswith("x.bin: expected "), e
    else:
        assert seconds >= 0, seconds


@pytest.mark.parametrize("name", ["tone.flac", "tone.ogg", "tone.m4a", "tone_cbr.mp3", "tone.webm"])
def test_a_cut_file_is_a_media_error_or_a_length(name: str) -> None:
    data = fixture_bytes(name)
    for cut in (4, 40, 400, len(data) // 2):
        try:
            audio_seconds(data[:cut], name)
        except MediaError as e:
            assert str(e).startswith(f"{name}: expected "), e
