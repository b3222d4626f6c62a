"""The image and audio files prompts lines name: read, checked and measured once per file, kept in
a byte-bounded cache, and encoded for the wire once.

Why this module exists: many lines often share a file (one chart asked about a hundred ways; every
`repeat` pass), and what a file costs is in reading it, telling its kind, measuring it (pixels,
seconds) and base64-encoding it (1.2 ms per MB with the stdlib: work that would otherwise land on
the loop that times requests, per request). So a file is read when a line first names it (by
`oxconsole validate` and the check before a run, then by the run's own pass), and a `MediaFile`
keeps its bytes, its figures and, once asked, its data URL or base64; the lines that share it
share that object. The cache is keyed by the file's path, size and modification time (an edited
file is read again) and holds at most `CACHE_BYTES` (a file still held by a prompt in flight stays
alive however the cache evicts it).
"""

from __future__ import annotations

import base64
import os
from collections import OrderedDict
from pathlib import Path
from typing import Final

from oxconsole.media.audiolen import audio_seconds
from oxconsole.media.kinds import AUDIO_MIME, IMAGE_MIME, MediaError, check_audio, check_image
from oxconsole.media.pixels import image_size

__all__ = ["CACHE_BYTES", "MAX_FILE_BYTES", "MediaFile", "audio_file", "image_file"]

MAX_FILE_BYTES: Final = 64 << 20
"""The largest image or audio file a prompts line may name: the largest request body the simulator
reads, and past what providers take (OpenAI: 20 MB an image, 25 MB a transcription file)."""

CACHE_BYTES: Final = 256 << 20
"""Bytes of files (and their encodings) kept between the lines that name them."""

_ENCODED: Final = 4 / 3
"""A file's base64 is 4/3 of its size: what an encoding adds to the cache's count."""


class MediaFile:
    """One image or audio file as read: `kind` ("png", "wav", ...), `mime`, its bytes and its
    figures (`pixels` for an image, `seconds` for audio)."""

    __slots__ = ("_b64", "_url", "data", "kind", "mime", "name", "path", "pixels", "seconds")

    def __init__(self, path: Path, kind: str, mime: str, data: bytes) -> None:
        self.path = path
        self.name = path.name
        """The file's name, without its folder: what a multipart form says the file is called."""
        self.kind = kind
        self.mime = mime
        self.data = data
        self.pixels: int | None = None
        self.seconds: float | None = None
        self._b64: str | None = None
        self._url: str | None = None

    def b64(self) -> str:
        """The file in base64 (chat's `input_audio.data`), encoded once."""
        if self._b64 is None:
            self._b64 = base64.b64encode(self.data).decode("ascii")
        return self._b64

    def data_url(self) -> str:
        """`data:MIME;base64,...` (chat's `image_url.url`), made once."""
        if self._url is None:
            self._url = "".join(("data:", self.mime, ";base64,", self.b64()))
            self._b64 = None  # the URL holds it; images are asked for their URL only
        return self._url


_cache: OrderedDict[tuple[str, str, int, int], MediaFile] = OrderedDict()
_held = [0]
"""Bytes the cache holds, its encodings counted."""


def _read(path: Path, where: str, what: str) -> tuple[bytes, tuple[str, int, int]]:
    """The file's bytes and its identity (path, size, mtime); a `MediaError` naming `where`."""
    try:
        st = os.stat(path)
        if not os.path.isfile(path):
            raise MediaError(where, f"an {what} file", f"a directory or special file ({path})")
        if st.st_size > MAX_FILE_BYTES:
            mib = MAX_FILE_BYTES >> 20
            raise MediaError(where, f"an {what} file of at most {mib} MiB", f"{st.st_size:,} bytes ({path})")
        data = path.read_bytes()
    except FileNotFoundError:
        raise MediaError(where, f"an existing {what} file", f"no such file ({path})") from None
    except PermissionError:
        raise MediaError(where, f"a readable {what} file", f"permission denied ({path})") from None
    except OSError as e:
        raise MediaError(where, f"a readable {what} file", f"{e.strerror} ({path})") from None
    return data, (str(path), st.st_size, st.st_mtime_ns)


def _cached(role: str, path: Path) -> MediaFile | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (role, str(path), st.st_size, st.st_mtime_ns)
    f = _cache.get(key)
    if f is not None:
        _cache.move_to_end(key)
    return f


def _keep(role: str, ident: tuple[str, int, int], f: MediaFile) -> MediaFile:
    size = int(len(f.data) * (1 + _ENCODED))
    if size > CACHE_BYTES:
        return f
    while _cache and _held[0] + size > CACHE_BYTES:
        _, old = _cache.popitem(last=False)
        _held[0] -= int(len(old.data) * (1 + _ENCODED))
    _cache[(role, *ident)] = f
    _held[0] += size
    return f


def image_file(path: Path, where: str) -> MediaFile:
    """An image file (PNG, JPEG, WebP, GIF) with its `pixels`; a `MediaError` naming `where` when it
    is missing, unreadable, too large, not an image or its header is broken."""
    f = _cached("image", path)
    if f is not None:
        return f
    data, ident = _read(path, where, "image")
    kind = check_image(data, where)
    w, h = image_size(data, where)
    f = MediaFile(path, kind, IMAGE_MIME[kind], data)
    f.pixels = w * h
    return _keep("image", ident, f)


def audio_file(path: Path, where: str) -> MediaFile:
    """An audio file (WAV, MP3, FLAC, Ogg, WebM, MP4) with its `seconds`; a `MediaError` naming
    `where` when it is missing, unreadable, too large, not audio or its length cannot be read."""
    f = _cached("audio", path)
    if f is not None:
        return f
    data, ident = _read(path, where, "audio")
    kind = check_audio(data, where)
    seconds = audio_seconds(data, where)
    if not seconds > 0:
        raise MediaError(where, "audio at least one sample long", f"{seconds:g} seconds")
    f = MediaFile(path, kind, AUDIO_MIME[kind], data)
    f.seconds = seconds
    return _keep("audio", ident, f)
