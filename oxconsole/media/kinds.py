"""What kind of image or audio a file is, from its first bytes; data URLs made and read.

Why this module exists: a prompts line's `images` may hold `data:image/png;base64,...` URLs and
file paths, and its `audio` a file path; each is checked before anything is sent (a file that is
not an image, a URL whose base64 is broken, a type the API does not take), and the error names
the file, the key and what was expected, as every workload error does. A file's type is told by
its magic bytes, never by its name: `photo.png` holding a JPEG is sent as `image/jpeg`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Final

IMAGE_MIME: Final = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
"""The image types chat and Responses take (OpenAI's vision guide: PNG, JPEG, WEBP, non-animated GIF)."""

AUDIO_MIME: Final = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
    "webm": "audio/webm",
    "mp4": "audio/mp4",
}
"""The audio types a transcription takes (OpenAI: flac, mp3, mp4, mpeg, mpga, m4a, ogg, wav, webm)."""

INPUT_AUDIO_FORMATS: Final = frozenset({"wav", "mp3"})
"""What chat's and Responses' `input_audio.format` takes (openai SDK: `Literal["wav", "mp3"]`)."""


class MediaError(ValueError):
    """A media value that cannot be sent: `where` (file and key path), what was expected, what
    was found; `str()` reads as a workload error: `FILE: KEY: expected ..., got ...`."""

    def __init__(self, where: str, expected: str, got: str) -> None:
        super().__init__(f"{where}: expected {expected}, got {got}")
        self.where = where
        self.expected = expected
        self.got = got


def image_type(data: bytes) -> str | None:
    """The image type, "png", "jpeg", "webp" or "gif", from the first bytes; None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def _mpeg_frame(data: bytes) -> bool:
    """An MPEG audio frame header: 11 sync bits, a version and layer that exist, a bitrate index
    that is not 'bad' and a sample rate index that is not reserved."""
    if len(data) < 4 or data[0] != 0xFF or data[1] & 0xE0 != 0xE0:
        return False
    version, layer = data[1] >> 3 & 3, data[1] >> 1 & 3
    bitrate, rate = data[2] >> 4, data[2] >> 2 & 3
    return version != 1 and layer != 0 and bitrate != 15 and rate != 3


def audio_type(data: bytes) -> str | None:
    """The audio type ("wav", "mp3", "flac", "ogg", "webm" or "mp4") from the first bytes; None
    for anything else.
    (An EBML file is "webm" whether its DocType is webm or matroska; an ADTS AAC stream, which also
    starts with a sync word, is not mistaken for MP3: its layer bits are 00.)"""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data.startswith(b"ID3") or _mpeg_frame(data):
        return "mp3"
    if data.startswith(b"fLaC"):
        return "flac"
    if data.startswith(b"OggS"):
        return "ogg"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    if data[4:8] == b"ftyp":
        return "mp4"
    return None


def an(word: str) -> str:
    """`word` with its article: "a PNG", "an MP3", "a FLAC" (enough for the names used here)."""
    return ("an " if word[:1] in "AEIOUM" else "a ") + word


def _starts(data: bytes) -> str:
    """What a file that is not the expected kind starts with, in words."""
    if not data:
        return "an empty file"
    kind = image_type(data) or audio_type(data)
    if kind is not None:
        return an(f"{kind.upper()} file")
    for magic, name in ((b"%PDF", "a PDF"), (b"PK\x03\x04", "a ZIP file"), (b"<", "text or HTML")):
        if data.startswith(magic):
            return name
    return f"a file starting with {data[:8]!r}"


def data_url(mime: str, data: bytes) -> str:
    """`data:MIME;base64,...` for `data` (one base64 pass, one join)."""
    return "".join(("data:", mime, ";base64,", base64.b64encode(data).decode("ascii")))


def parse_data_url(url: str, where: str) -> tuple[str, bytes]:
    """A base64 data URL's media type and bytes; anything else (no `;base64`, broken base64, an
    empty payload) is a `MediaError` naming `where`."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:"):
        raise MediaError(where, "a data URL (data:MEDIA/TYPE;base64,...)", f"{url[:40]!r}")
    params = head[5:].split(";")
    if params[-1].lower() != "base64":
        raise MediaError(where, "a base64 data URL (data:MEDIA/TYPE;base64,...)", f"{head[:40]!r}")
    mime = params[0].strip().lower()
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(where, "valid base64 after the comma", "characters base64 does not use") from None
    if not data:
        raise MediaError(where, "a data URL with content", "an empty payload")
    return mime, data


def check_image(data: bytes, where: str) -> str:
    """The image type of `data` (see `image_type`); else a `MediaError` naming `where`."""
    kind = image_type(data)
    if kind is None:
        raise MediaError(where, "a PNG, JPEG, WebP or GIF image", _starts(data))
    return kind


def check_image_url(url: str, where: str) -> str:
    """A data URL's image type, checked against its bytes: `data:image/png` holding a JPEG is an
    error (a server trusting the declared type would fail to decode it)."""
    mime, data = parse_data_url(url, where)
    kind = check_image(data, where)
    if mime != IMAGE_MIME[kind]:
        raise MediaError(where, f"a media type that matches its bytes ({IMAGE_MIME[kind]})", repr(mime))
    return kind


def check_audio(data: bytes, where: str, *, allowed: frozenset[str] | None = None) -> str:
    """The audio type of `data` (see `audio_type`), one of `allowed` when given (chat's
    `input_audio` takes only WAV and MP3); else a `MediaError` naming `where`."""
    kind = audio_type(data)
    if kind is None:
        raise MediaError(where, "a WAV, MP3, FLAC, Ogg, WebM or MP4 audio file", _starts(data))
    if allowed is not None and kind not in allowed:
        names = " or ".join(sorted(k.upper() for k in allowed))
        raise MediaError(where, an(f"{names} file (input_audio takes no other)"), an(f"{kind.upper()} file"))
    return kind
