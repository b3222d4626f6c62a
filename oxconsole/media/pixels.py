"""An image's width and height from its header: PNG, JPEG, WebP and GIF, with the stdlib only.

Why this module exists: the journal's `image_pixels` counts what a request asked a vision
encoder to see (a model's image tokens grow with it), and a prompts line's images are checked
before the run anyway; decoding them to learn their size would cost milliseconds each and a
dependency (Pillow), where the size is in the first bytes of every format.
"""

from __future__ import annotations

import struct

from oxconsole.media.kinds import MediaError, image_type

_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG start-of-frame markers (baseline, progressive, lossless, arithmetic); C4 (Huffman tables),
C8 (reserved) and CC (arithmetic conditioning) are not frames."""


def image_size(data: bytes, where: str = "image") -> tuple[int, int]:
    """(width, height) in pixels; a file that is not one of the four types, or whose header is
    cut or inconsistent, is a `MediaError` naming `where`."""
    kind = image_type(data)
    try:
        if kind == "png":
            return _png(data)
        if kind == "gif":
            w, h = struct.unpack("<HH", data[6:10])
            return w, h
        if kind == "webp":
            return _webp(data)
        if kind == "jpeg":
            return _jpeg(data)
    except (struct.error, IndexError, ValueError) as e:
        raise MediaError(where, f"a readable {kind.upper() if kind else 'image'} header", str(e)) from None
    raise MediaError(where, "a PNG, JPEG, WebP or GIF image", f"a file starting with {data[:8]!r}")


def _png(data: bytes) -> tuple[int, int]:
    if data[12:16] != b"IHDR":
        raise ValueError("no IHDR chunk first")
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def _webp(data: bytes) -> tuple[int, int]:
    fourcc = data[12:16]
    if fourcc == b"VP8 ":  # lossy: a key frame's start code, then 14-bit width and height
        if data[23:26] != b"\x9d\x01\x2a":
            raise ValueError("VP8 frame without its start code")
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if fourcc == b"VP8L":  # lossless: signature 0x2f, then width-1 and height-1 in 14 bits each
        if data[20] != 0x2F:
            raise ValueError("VP8L without its signature")
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1
    if fourcc == b"VP8X":  # extended: canvas width-1 and height-1 in 24 bits each
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    raise ValueError(f"unknown WebP chunk {fourcc!r}")


def _jpeg(data: bytes) -> tuple[int, int]:
    """The first start-of-frame's size, walking the marker segments from the top (EXIF and other
    APPn segments are skipped by their lengths; nothing is decoded)."""
    i = 2
    n = len(data)
    while i < n:
        if data[i] != 0xFF:
            raise ValueError(f"no marker at byte {i}")
        while data[i] == 0xFF:  # fill bytes
            i += 1
        marker = data[i]
        i += 1
        if marker == 0xD8 or marker == 0x01 or 0xD0 <= marker <= 0xD7:
            continue  # no length
        if marker in (0xD9, 0xDA):
            break  # end of image, or scan data before any frame header
        (length,) = struct.unpack(">H", data[i : i + 2])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[i + 3 : i + 7])
            if h == 0:
                raise ValueError("height 0 (a DNL marker's height is not supported)")
            return w, h
        i += length
    raise ValueError("no frame header before the image data")
