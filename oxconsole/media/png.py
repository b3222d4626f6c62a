"""Synthetic PNG images, a different one per request, at the cost of a few kilobytes of work.

Why this module exists: `images = { count, width, height }` asks for a generated PNG per request,
each different (a server that hashes images to cache their encodings must not see the same image
twice), built before the clock. Compressing a 512x512 image costs milliseconds, so the image is
cut in two: every row but the last `vary_rows` is the same for every request and is compressed
once (`SyntheticPng.__init__`), ending with a zlib sync flush so that what follows needs none of
its history; the last rows are seeded noise, stored (deflate level 0) per request, and the
stream's Adler-32 is carried on from the constant part's. The two parts go in two IDAT chunks
(a PNG's zlib stream may span any number of them), so the constant part's bytes, CRC included,
are fixed, and a `tEXt` chunk pads them to a multiple of 3 bytes: its base64 is computed once,
and a data URL costs the base64 of the last rows only, plus one copy.

How big on the wire: `noise` is the share of the constant rows that are random (incompressible)
rather than flat. 0 gives an image of almost nothing but its varying rows (512x512: 3.5 KB, which
no camera produces); 1 gives an incompressible image (512x512: 787 KB, 1.05 MB as base64, about
twice a photo's PNG and ten times its JPEG). A photo's PNG is typically 40-60% of its raw size,
so `noise = 0.5` is the realistic middle. What a vision encoder costs depends on the pixels'
count, not their content.
"""

from __future__ import annotations

import base64
import random
import struct
import zlib
from typing import Final

SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"

MAX_SIDE: Final = 16384
"""The largest width or height made (16384 x 16384 RGB is 768 MiB raw: far past any model's input)."""


def chunk(kind: bytes, data: bytes, crc: int | None = None) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data (`crc` when already known)."""
    if crc is None:
        crc = zlib.crc32(data, zlib.crc32(kind))
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


_IEND: Final = chunk(b"IEND", b"")


class SyntheticPng:
    """Generated RGB PNGs of `width` x `height`: the same for a seed, different between seeds.

    The constant part is made once (512x512: 3 ms flat, 13-40 ms at noise 0.5); `png(seed)` and
    `data_url(seed)` then cost the varying rows only (~20 us at 512 wide) plus one copy of the
    image (or of its base64): 512x512 at noise 0.5, 60 us per data URL."""

    __slots__ = ("_adler", "_prefix", "_prefix_b64", "_row", "height", "vary_rows", "width")

    def __init__(
        self, width: int, height: int, *, noise: float = 0.0, vary_rows: int = 1, colour: int = 0x4A7FB5
    ) -> None:
        if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
            raise ValueError(f"width and height must be between 1 and {MAX_SIDE}, got {width}x{height}")
        if not 0.0 <= noise <= 1.0:
            raise ValueError(f"noise must be between 0 and 1, got {noise!r}")
        if not 1 <= vary_rows <= height:
            raise ValueError(f"vary_rows must be between 1 and the height ({height}), got {vary_rows}")
        self.width = width
        self.height = height
        self.vary_rows = vary_rows
        self._row = 3 * width
        fixed = height - vary_rows
        noisy = round(noise * fixed)
        flat_row = b"\x00" + bytes((colour >> 16 & 255, colour >> 8 & 255, colour & 255)) * width
        rng = random.Random(0x0C0FFEE)  # the constant rows: the same image for every run
        raw = b"".join(b"\x00" + rng.randbytes(self._row) for _ in range(noisy)) + flat_row * (fixed - noisy)
        comp = zlib.compressobj(6)
        head = comp.compress(raw) + comp.flush(zlib.Z_SYNC_FLUSH)
        self._adler = zlib.adler32(raw)
        ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        idat = chunk(b"IDAT", head)
        # tEXt pads the fixed bytes to a multiple of 3, so their base64 is a prefix of the whole's
        bare = len(SIGNATURE) + len(ihdr) + len(idat) + 12 + len(b"Software\x00oxconsole")
        text = chunk(b"tEXt", b"Software\x00oxconsole" + b" " * (-bare % 3))
        self._prefix = SIGNATURE + ihdr + text + idat
        assert len(self._prefix) % 3 == 0
        self._prefix_b64 = "data:image/png;base64," + base64.b64encode(self._prefix).decode("ascii")

    def _suffix(self, seed: int) -> bytes:
        """The varying rows' IDAT chunk (stored deflate, then the whole stream's Adler-32) and IEND."""
        noise = random.Random(seed).randbytes(self._row * self.vary_rows)
        row = self._row
        raw = b"".join(b"\x00" + noise[i : i + row] for i in range(0, len(noise), row))
        comp = zlib.compressobj(0, zlib.DEFLATED, -15)  # raw deflate: no second zlib header
        data = comp.compress(raw) + comp.flush() + struct.pack(">I", zlib.adler32(raw, self._adler))
        return chunk(b"IDAT", data) + _IEND

    def png(self, seed: int) -> bytes:
        """The image for `seed`, as a PNG file's bytes."""
        return self._prefix + self._suffix(seed)

    def data_url(self, seed: int) -> str:
        """The image for `seed` as a `data:image/png;base64,...` URL (chat's `image_url.url`)."""
        # one join: one allocation and one copy of the fixed part (a + b + c would copy it twice)
        return "".join((self._prefix_b64, base64.b64encode(self._suffix(seed)).decode("ascii")))

    @property
    def size(self) -> int:
        """Bytes of one image (the same for every seed)."""
        return len(self._prefix) + len(self._suffix(0))
