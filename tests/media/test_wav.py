from __future__ import annotations

import base64
import io
import wave

import pytest

from oxconsole.media.audiolen import riff_seconds
from oxconsole.media.wav import RATE, SyntheticWav, header


@pytest.mark.parametrize("fill", ["silence", "tone", "noise"])
@pytest.mark.parametrize("seconds", [0.001, 0.05, 1.0, 2.5, 30.0])
def test_length_and_format(fill: str, seconds: float) -> None:
    s = SyntheticWav(seconds, fill=fill)  # type: ignore[arg-type]
    data = s.wav(1)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, RATE)
        assert w.getnframes() == round(seconds * RATE) == s.frames
    assert len(data) == 44 + 2 * s.frames
    assert riff_seconds(data) == pytest.approx(seconds, abs=1 / RATE)


def test_seeds_differ_and_repeat() -> None:
    s = SyntheticWav(1.0)
    assert s.wav(1) == s.wav(1) != s.wav(2)
    fixed, tail = s.parts(2)
    assert fixed + tail == s.wav(2)


@pytest.mark.parametrize("seconds", [0.0001, 0.05, 1.0, 10.0])
def test_b64_is_the_wav(seconds: float) -> None:
    s = SyntheticWav(seconds)
    assert base64.b64decode(s.b64(4), validate=True) == s.wav(4)


def test_header_is_canonical() -> None:
    h = header(10)
    assert len(h) == 44 and h[:4] == b"RIFF" and h[8:16] == b"WAVEfmt " and h[36:40] == b"data"


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf"), 4000.0])
def test_bad_lengths(seconds: float) -> None:
    with pytest.raises(ValueError):
        SyntheticWav(seconds)
