from __future__ import annotations

import random
import struct

import pytest

from oxconsole.media.kinds import MediaError
from oxconsole.media.pixels import image_size
from oxconsole.media.png import SyntheticPng
from tests.media import fixture_bytes


@pytest.mark.parametrize(("w", "h"), [(1, 1), (512, 512), (1024, 77)])
def test_png(w: int, h: int) -> None:
    assert image_size(SyntheticPng(w, h).png(0)) == (w, h)


def test_gif_header() -> None:
    assert image_size(b"GIF89a" + struct.pack("<HH", 300, 200) + b"\x00" * 8) == (300, 200)


FIXTURE_SIZE = (334, 18)  # what ffprobe reads of each image fixture (fixtures/make.sh)


@pytest.mark.parametrize(
    "name", ["image.jpg", "image.gif", "image_lossy.webp", "image_lossless.webp", "image_alpha.webp"]
)
def test_files_made_by_ffmpeg(name: str) -> None:
    # lossy WebP is VP8, lossless VP8L, with alpha the extended VP8X form: each has its own header
    assert image_size(fixture_bytes(name), name) == FIXTURE_SIZE


def test_jpeg_frame_after_exif_and_fill_bytes() -> None:
    jpg = fixture_bytes("image.jpg")
    exif = b"Exif\x00\x00MM\x00\x2a\x00\x00\x00\x08" + bytes(300)
    app1 = b"\xff\xe1" + struct.pack(">H", len(exif) + 2) + exif
    assert image_size(jpg[:2] + app1 + b"\xff\xff" + jpg[2:]) == FIXTURE_SIZE


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00",  # cut
        b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",  # cut before a frame
        b"\xff\xd8\xff\xda\x00\x08",  # scan before any frame header
        b"RIFF\x00\x00\x00\x00WEBPVP8 \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",  # no start code
        b"BM\x00\x00",  # BMP: not taken
    ],
)
def test_broken_or_other(data: bytes) -> None:
    with pytest.raises(MediaError):
        image_size(data, "prompts.jsonl: line 1: images.0")


@pytest.mark.parametrize(
    "magic",
    [
        b"\x89PNG\r\n\x1a\n",
        b"\xff\xd8\xff",
        b"RIFF\x00\x00\x00\x00WEBPVP8 ",
        b"RIFF\x00\x00\x00\x00WEBPVP8L",
        b"GIF89a",
    ],
)
@pytest.mark.parametrize("seed", range(40))
def test_garbage_after_a_magic_is_a_media_error_or_a_size(magic: bytes, seed: int) -> None:
    rng = random.Random(seed)
    data = magic + rng.randbytes(rng.randint(0, 300))
    try:
        w, h = image_size(data, "x.bin")
    except MediaError as e:
        assert str(e).startswith("x.bin: expected "), e
    else:
        assert w >= 0 and h >= 0
