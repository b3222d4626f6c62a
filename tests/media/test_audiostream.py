from __future__ import annotations

import random
import struct

import pytest

from oxconsole.media.audiolen import audio_seconds
from oxconsole.media.audiostream import SILENT_MP3_FRAME, AudioCounter, mp3_frame
from oxconsole.media.wav import SyntheticWav
from tests.media import fixture_bytes


def feed(counter: AudioCounter, data: bytes, seed: int) -> float:
    """`data` fed in random pieces of 1 to 3000 bytes, as network reads come."""
    rng = random.Random(seed)
    i = 0
    while i < len(data):
        n = rng.randint(1, 3000)
        counter.feed(data[i : i + n])
        i += n
    return counter.seconds


@pytest.mark.parametrize("seed", range(5))
def test_pcm(seed: int) -> None:
    assert feed(AudioCounter("pcm"), bytes(48000 * 3), seed) == 3.0
    assert feed(AudioCounter("pcm", pcm_rate=16000), bytes(32000), seed) == 1.0


@pytest.mark.parametrize("seed", range(5))
def test_wav_sizes_not_trusted(seed: int) -> None:
    data = bytearray(SyntheticWav(2.0).wav(1))
    assert feed(AudioCounter("wav"), bytes(data), seed) == 2.0
    data[4:8] = data[40:44] = b"\xff\xff\xff\xff"  # as a stream written before its length is known
    assert feed(AudioCounter("wav"), bytes(data), seed) == 2.0


def test_wav_with_a_list_chunk_first() -> None:
    clip = SyntheticWav(1.0).wav(1)
    info = b"LIST" + struct.pack("<I", 10) + b"INFOxxxxxx"
    data = clip[:36] + info + clip[36:]
    data = data[:4] + struct.pack("<I", len(data) - 8) + data[8:]
    assert feed(AudioCounter("wav"), data, 1) == 1.0
    assert audio_seconds(data) == 1.0


@pytest.mark.parametrize("name", ["tone_cbr.mp3", "tone_vbr.mp3", "tone_noxing.mp3", "tone_vbr_noxing.mp3"])
@pytest.mark.parametrize("seed", range(3))
def test_mp3_matches_the_header_reading(name: str, seed: int) -> None:
    data = fixture_bytes(name)
    assert feed(AudioCounter("mp3"), data, seed) == pytest.approx(audio_seconds(data), abs=1e-9)


def test_mp3_frame_header() -> None:
    assert mp3_frame(b"\xff\xfb\x90\x64") == (417, 1152, 44100)  # MPEG-1 layer III 128k 44.1k
    assert mp3_frame(b"\xff\xf3\x48\xc4") == (144, 576, 16000)  # MPEG-2 layer III 32k 16k
    assert mp3_frame(b"\xff\xf1\x50\x80") is None  # ADTS AAC


@pytest.mark.parametrize(("fmt", "data"), [("wav", b"OggS" + bytes(20)), ("mp3", b"RIFF" + bytes(60))])
def test_not_what_the_format_says(fmt: str, data: bytes) -> None:
    with pytest.raises(ValueError):
        AudioCounter(fmt).feed(data)


def test_other_formats_are_not_counted_here() -> None:
    with pytest.raises(ValueError):
        AudioCounter("opus")


def test_the_silent_frame_the_simulator_repeats() -> None:
    # MPEG-2 layer III, 24 kHz mono, 8 kbit/s: 24 bytes and 576 samples a frame
    assert mp3_frame(SILENT_MP3_FRAME) == (24, 576, 24000) and len(SILENT_MP3_FRAME) == 24
    data = SILENT_MP3_FRAME * 1000
    assert feed(AudioCounter("mp3"), data, 0) == 24.0
    assert audio_seconds(data) == 24.0
