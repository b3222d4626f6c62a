"""Synthetic WAV audio, a different clip per request, and a WAV's length read from its header.

Why this module exists: `audio_s = 10` asks for a generated clip per request (16 kHz mono 16-bit
PCM: what speech models resample to anyway), different between requests so no server can answer
from a cache, built before the clock. The clip is a header, a fixed body made once (silence, a
tone or noise) and a short seeded-noise tail made per request (`vary_s`, 0.05 s: 1,600 bytes).
The header and fixed body together are a multiple of 3 bytes long, so their base64 (chat's
`input_audio.data`) is made once too; a request costs its tail and one copy.

What a server does with it: a tone or silence costs a speech encoder what speech of the same
length costs (Whisper pads every clip to 30 s windows), but the decoder writes little or nothing
for it, so a transcription's output tokens and its latency's decode part are lower than speech's.
"""

from __future__ import annotations

import base64
import math
import random
import struct
from array import array
from typing import Final, Literal

RATE: Final = 16000
"""Samples per second of the generated clips."""

MAX_SECONDS: Final = 3600.0
"""The longest clip made (an hour: 115 MB, past every provider's upload limit of 25 MB)."""

Fill = Literal["silence", "tone", "noise"]


def header(frames: int, rate: int = RATE, channels: int = 1, width: int = 2) -> bytes:
    """A 44-byte canonical WAV header for `frames` frames of `width`-byte PCM."""
    data = frames * channels * width
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * width, channels * width, 8 * width)
        + b"data"
        + struct.pack("<I", data)
    )


def _samples(fill: Fill, n: int) -> bytes:
    if fill == "silence":
        return bytes(2 * n)
    if fill == "tone":  # 440 Hz at a quarter of full scale, whole periods repeated
        period = [round(8192 * math.sin(2 * math.pi * 440 * i / RATE)) for i in range(RATE // 40)]
        one = array("h", period).tobytes()  # 1/40 s: exactly 11 periods of 440 Hz
        reps, rest = divmod(2 * n, len(one))
        return one * reps + one[:rest]
    rng = random.Random(0x5EED)
    return rng.randbytes(2 * n)


class SyntheticWav:
    """Generated 16 kHz mono 16-bit WAV clips of `seconds`: the same for a seed, different
    between seeds."""

    __slots__ = ("_fixed", "_fixed_b64", "frames", "seconds", "tail_frames")

    def __init__(self, seconds: float, *, fill: Fill = "tone", vary_s: float = 0.05) -> None:
        if not (0.0 < seconds <= MAX_SECONDS) or not math.isfinite(seconds):
            raise ValueError(f"seconds must be > 0 and at most {MAX_SECONDS:g}, got {seconds!r}")
        frames = max(1, round(seconds * RATE))
        tail = min(frames, max(1, round(vary_s * RATE)))
        # 44 + 2 * fixed must be a multiple of 3: fixed ≡ 2 (mod 3); the tail takes the rest
        fixed = frames - tail
        fixed = fixed - (fixed - 2) % 3 if fixed >= 2 else 0
        self.frames = frames
        self.tail_frames = frames - fixed
        self.seconds = frames / RATE
        self._fixed = header(frames) + _samples(fill, fixed)
        aligned = len(self._fixed) % 3 == 0
        self._fixed_b64 = base64.b64encode(self._fixed).decode("ascii") if aligned else None

    def tail(self, seed: int) -> bytes:
        """The per-request samples: low-level seeded noise (0..255 of 32767, about -45 dBFS): random
        low bytes, zero high bytes (one slice assignment, not a loop over samples)."""
        out = bytearray(2 * self.tail_frames)
        out[0::2] = random.Random(seed).randbytes(self.tail_frames)
        return bytes(out)

    def wav(self, seed: int) -> bytes:
        """The clip for `seed`, as a WAV file's bytes."""
        return self._fixed + self.tail(seed)

    def parts(self, seed: int) -> tuple[bytes, bytes]:
        """The clip as (fixed part, tail): to be joined into a larger body with one copy."""
        return self._fixed, self.tail(seed)

    def b64(self, seed: int) -> str:
        """The clip for `seed` in base64 (chat's `input_audio.data`)."""
        tail = base64.b64encode(self.tail(seed)).decode("ascii")
        if self._fixed_b64 is None:
            return base64.b64encode(self.wav(seed)).decode("ascii")
        return "".join((self._fixed_b64, tail))
