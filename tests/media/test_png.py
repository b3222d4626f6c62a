from __future__ import annotations

import base64
import struct
import zlib

import pytest

from oxconsole.media.png import SIGNATURE, SyntheticPng


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """Every chunk of a PNG, each CRC checked."""
    assert png.startswith(SIGNATURE)
    out = []
    i = len(SIGNATURE)
    while i < len(png):
        (n,) = struct.unpack(">I", png[i : i + 4])
        kind, data = png[i + 4 : i + 8], png[i + 8 : i + 8 + n]
        (crc,) = struct.unpack(">I", png[i + 8 + n : i + 12 + n])
        assert crc == zlib.crc32(kind + data), kind
        out.append((kind, data))
        i += 12 + n
    assert i == len(png)
    return out


def rows(png: bytes) -> list[bytes]:
    """The image's scanlines (each with its filter byte), the zlib stream's Adler-32 checked."""
    cs = chunks(png)
    w, h = struct.unpack(">II", cs[0][1][:8])
    raw = zlib.decompress(b"".join(d for k, d in cs if k == b"IDAT"))
    assert len(raw) == h * (1 + 3 * w)
    return [raw[i : i + 1 + 3 * w] for i in range(0, len(raw), 1 + 3 * w)]


@pytest.mark.parametrize(("w", "h", "noise"), [(1, 1, 0.0), (7, 5, 0.5), (512, 512, 0.0), (64, 48, 1.0)])
def test_valid_png_of_the_size(w: int, h: int, noise: float) -> None:
    s = SyntheticPng(w, h, noise=noise)
    png = s.png(3)
    cs = chunks(png)
    assert [k for k, _ in cs] == [b"IHDR", b"tEXt", b"IDAT", b"IDAT", b"IEND"]
    assert struct.unpack(">IIBB", cs[0][1][:10]) == (w, h, 8, 2)
    got = rows(png)
    assert len(got) == h and all(r[0] == 0 for r in got)
    assert s.size == len(png)


def test_same_seed_same_image_other_seed_other_pixels() -> None:
    s = SyntheticPng(32, 16, vary_rows=2)
    assert s.png(1) == s.png(1)
    a, b = rows(s.png(1)), rows(s.png(2))
    assert a[:-2] == b[:-2] and a[-2:] != b[-2:]


def test_data_url_is_the_png_in_base64() -> None:
    s = SyntheticPng(100, 30, noise=0.3)
    url = s.data_url(9)
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1], validate=True) == s.png(9)


def test_noise_sets_the_size_on_the_wire() -> None:
    flat, half, full = (SyntheticPng(128, 128, noise=n).size for n in (0.0, 0.5, 1.0))
    raw = 128 * (1 + 3 * 128)
    assert flat < 0.05 * raw and 0.4 * raw < half < 0.6 * raw and full > raw


@pytest.mark.parametrize(
    "kwargs",
    [
        {"width": 0, "height": 1},
        {"width": 1, "height": 1, "noise": 2.0},
        {"width": 4, "height": 2, "vary_rows": 3},
    ],
)
def test_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SyntheticPng(**kwargs)  # type: ignore[arg-type]
