"""The seconds of audio in a speech answer, counted as its bytes arrive, without keeping them.

Why this module exists: `/audio/speech` answers with the audio itself, streamed (chunked) as it is
synthesised; the journal's `audio_out_s` and a speech request's `rtf` need its length. For `pcm`
(raw 16-bit mono at a rate the provider fixes: 24 kHz for OpenAI) the length is the byte count;
for `wav` it is the bytes after the `data` chunk's header over the `fmt ` chunk's byte rate (a
streamed WAV's sizes are often 0 or 0xFFFFFFFF, so they are not trusted); for `mp3` it is the
frames' samples, each frame's length read from its 4-byte header as the stream passes (a Xing or
Info frame, which holds no audio, is not counted). Other formats (opus, aac, flac) are not
counted here: their answers are kept, within the body bound, and measured from their headers at
the end (`audiolen.audio_seconds`).

`feed` costs a few microseconds per network read for pcm and wav, and about 1 us per MP3 frame
(~26 ms of audio each).
"""

from __future__ import annotations

from typing import Final

PCM_RATE: Final = 24000
"""OpenAI's `pcm`: 24 kHz, 16-bit signed little-endian, mono."""

SILENT_MP3_FRAME: Final = b"\xff\xf3\x14\xc0" + bytes(20)
"""One MPEG-2 layer III frame of silence: 24 kHz mono at 8 kbit/s, 24 bytes, 576 samples (24 ms),
zero side information and data. The simulator's `mp3` speech is this frame repeated (ffmpeg
decodes 1,000 of them to 24.000 s of silence)."""

# bitrates in kbit/s by [MPEG-1?][layer 1..3][index]; index 0 is "free", 15 is bad
_BITRATES: Final = {
    (True, 1): (0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (False, 3): (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_RATES: Final = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


def mp3_frame(h: bytes | bytearray, i: int = 0) -> tuple[int, int, int] | None:
    """The MPEG audio frame whose header is at `h[i:i+4]`: (frame bytes, samples, sample rate);
    None when the four bytes are not a frame header this reader can size (free bitrate included)."""
    b1, b2 = h[i + 1], h[i + 2]
    if h[i] != 0xFF or b1 & 0xE0 != 0xE0:
        return None
    version, layer_bits, index, rate_index = b1 >> 3 & 3, b1 >> 1 & 3, b2 >> 4, b2 >> 2 & 3
    if version == 1 or layer_bits == 0 or index in (0, 15) or rate_index == 3:
        return None
    layer = 4 - layer_bits
    mpeg1 = version == 3
    rate = _RATES[version][rate_index]
    bitrate = _BITRATES[mpeg1, layer][index] * 1000
    pad = b2 >> 1 & 1
    if layer == 1:
        return (12 * bitrate // rate + pad) * 4, 384, rate
    if layer == 3 and not mpeg1:
        return 72 * bitrate // rate + pad, 576, rate
    return 144 * bitrate // rate + pad, 1152, rate


def _id3_size(h: bytes | bytearray) -> int:
    """An ID3v2 tag's whole length from its 10-byte header (syncsafe size, plus a footer)."""
    size = (h[6] & 0x7F) << 21 | (h[7] & 0x7F) << 14 | (h[8] & 0x7F) << 7 | (h[9] & 0x7F)
    return 10 + size + (10 if h[5] & 0x10 else 0)


class AudioCounter:
    """Seconds of `pcm`, `wav` or `mp3` audio in a stream fed one network read at a time.

    `seconds` is exact for pcm and wav, and for mp3 counts whole frames (the encoder's padding
    included, as every MP3 duration does). A stream that is not what its format says raises
    `ValueError` (the attempt's `bad_response`)."""

    __slots__ = ("_bytes", "_first", "_head", "_rate", "_samples", "_skip", "format", "pcm_rate")

    def __init__(self, format: str, *, pcm_rate: int = PCM_RATE) -> None:
        if format not in ("pcm", "wav", "mp3"):
            raise ValueError(f"counts pcm, wav and mp3, not {format!r}")
        self.format = format
        self.pcm_rate = pcm_rate
        self._bytes = 0  # pcm: all; wav: after the data header
        self._head = bytearray()  # what is held until it can be read (wav header, a cut mp3 header)
        self._rate = 0  # wav: bytes per second; mp3: samples per second
        self._samples = 0
        self._skip = 0  # mp3: bytes of the current frame (or ID3 tag) still to pass
        self._first = True

    @property
    def seconds(self) -> float:
        if self.format == "pcm":
            return self._bytes / (2 * self.pcm_rate)
        if self.format == "wav":
            return self._bytes / self._rate if self._rate else 0.0
        return self._samples / self._rate if self._rate else 0.0

    def feed(self, data: bytes) -> None:
        if self.format == "pcm":
            self._bytes += len(data)
        elif self.format == "wav":
            self._wav(data)
        else:
            self._mp3(data)

    def _wav(self, data: bytes) -> None:
        if self._rate:
            self._bytes += len(data)
            return
        head = self._head
        head += data
        if len(head) > 1 << 16:
            raise ValueError("no WAV data chunk in the first 64 KiB")
        if len(head) < 12:
            return
        if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise ValueError(f"not a WAV stream: {bytes(head[:12])!r}")
        i = 12
        rate = 0
        while i + 8 <= len(head):
            cid, size = head[i : i + 4], int.from_bytes(head[i + 4 : i + 8], "little")
            if cid == b"data":
                if not rate:
                    raise ValueError("WAV data before its fmt chunk")
                self._rate = rate
                self._bytes = len(head) - i - 8
                head.clear()
                return
            if i + 8 + size > len(head):
                return  # the chunk is still coming
            if cid == b"fmt ":
                rate = int.from_bytes(head[i + 16 : i + 20], "little")
            i += 8 + size + (size & 1)

    def _mp3(self, data: bytes) -> None:
        buf: bytes | bytearray = data
        if self._head:
            self._head += data
            buf = self._head
        i = 0
        n = len(buf)
        while True:
            if self._skip:
                step = min(self._skip, n - i)
                self._skip -= step
                i += step
            if i + 10 > n:
                break
            if self._first and buf[i : i + 3] == b"ID3":
                self._skip = _id3_size(buf[i : i + 10])
                continue
            if buf[i : i + 3] == b"TAG":  # an ID3v1 tag at the end: 128 bytes, no audio
                self._skip = 128
                continue
            frame = mp3_frame(buf, i)
            if frame is None:
                raise ValueError(f"no MPEG audio frame where one should start: {bytes(buf[i : i + 4])!r}")
            size, samples, rate = frame
            if self._first:
                if i + 48 > n:
                    break  # wait for enough of the first frame to see a Xing/Info/VBRI header
                self._first = False
                if not any(tag in buf[i : i + 48] for tag in (b"Xing", b"Info", b"VBRI")):
                    self._samples += samples
            else:
                self._samples += samples
            self._rate = rate
            self._skip = size
        rest = bytes(buf[i:])
        self._head = bytearray(rest)
