"""The workload keys of every kind of model: a model's `voice`, `size`, `n` and its prices per
image, audio minute and million characters; the synthetic prompts' `images`, `audio_s` and
`documents`.

Why this module exists: these keys mean something for some APIs only (a `voice` is a speech
model's), so besides its type and range each is checked against the model's `api`: a key that the
model's requests would never carry is an error naming the API it belongs to, not a silent no-op.
"""

from __future__ import annotations

import re
from typing import Any

from oxconsole.media.png import MAX_SIDE
from oxconsole.media.wav import MAX_SECONDS
from oxconsole.workload import bounds as b
from oxconsole.workload.schema import SyntheticImages, toml_keys
from oxconsole.workload.values import Table, is_num

__all__ = ["IMAGE_SIZE", "MAX_DOCUMENTS", "MAX_IMAGES", "media_keys", "synthetic_media"]

IMAGE_SIZE = re.compile(r"(\d{1,5})x(\d{1,5})")
"""`size = "WIDTHxHEIGHT"` (or "auto")."""

MAX_IMAGES = 10
"""Images per generation request (`n`): OpenAI's limit."""

MAX_DOCUMENTS = 10_000
"""Documents per synthetic rerank prompt (each of `input_tokens`)."""

_ONLY = {"voice": "speech", "size": "images", "n": "images"}
"""Keys that only one API's requests carry."""

_WHY = " (a price per image, per audio minute or per million characters)"

_SYN_IMAGES = toml_keys(SyntheticImages)


def media_keys(t: Table) -> dict[str, Any]:
    """A `[[models]]` table's media keys, as `ModelConfig` fields (defaults where absent or bad)."""
    api = t.data.get("api", "chat")
    for key, owner in _ONLY.items():
        if t.has(key) and api != owner:
            t.fail(key, f'nothing on a model whose api is "{api}" ({key} is for api = "{owner}")')
    out: dict[str, Any] = {
        "price_per_image": t.num("price_per_image", 0.0, b.MAX_PRICE, _WHY),
        "price_per_audio_minute": t.num("price_per_audio_minute", 0.0, b.MAX_PRICE, _WHY),
        "price_per_1m_characters": t.num("price_per_1m_characters", 0.0, b.MAX_PRICE, _WHY),
    }
    if t.has("voice"):
        out["voice"] = t.str_("voice", "alloy", "a voice name (non-empty string)")
    if t.has("size"):
        size = t.str_("size", "1024x1024", 'an image size "WIDTHxHEIGHT" (such as "1024x1024") or "auto"')
        m = IMAGE_SIZE.fullmatch(size)
        if size != "auto" and (m is None or not all(1 <= int(x) <= MAX_SIDE for x in m.groups())):
            t.fail("size", f'an image size "WIDTHxHEIGHT" (each 1 to {MAX_SIDE}) or "auto"')
        else:
            out["size"] = size
    if t.has("n"):
        out["n"] = t.int_("n", 1, 1, MAX_IMAGES, " (images per request)")
    return out


def synthetic_media(s: Table) -> dict[str, Any]:
    """`prompts.synthetic`'s media keys, as `SyntheticConfig` fields."""
    out: dict[str, Any] = {
        "documents": s.int_("documents", 0, 0, MAX_DOCUMENTS, " (documents per prompt)"),
    }
    if s.has("audio_s"):
        v = s.data["audio_s"]
        if not is_num(v) or not 0 < v <= MAX_SECONDS:
            s.fail("audio_s", f"a number of seconds > 0 and at most {MAX_SECONDS:g} (generated audio)")
        else:
            out["audio_s"] = float(v)
    if s.has("images"):
        i = Table(s.errs, s.data["images"], s.p("images"), _SYN_IMAGES, "synthetic.images")
        if not i.broken:
            d = SyntheticImages()
            out["images"] = SyntheticImages(
                count=i.int_("count", d.count, 1, MAX_IMAGES * 10, " (images per request)"),
                width=i.int_("width", d.width, 1, MAX_SIDE, " (pixels)"),
                height=i.int_("height", d.height, 1, MAX_SIDE, " (pixels)"),
            )
    return out
