"""Media in prompts: a line's `images`, `audio`, `query` and `documents` read and checked, the
synthetic prompts' generated media, and what each API a prompt may go to needs of it.

Why this module exists: a prompt's media is sent by whichever model it reaches, each API taking
what it has a place for (chat and Responses: images and `input_audio`; a transcription: the audio
file; a reranker: the query and documents; speech: the text). A line that would reach an API
without what that API needs (a reranker without documents, speech without text, `input_audio` in
FLAC) is bad input, told before anything is sent with the file, the key and what was expected;
the models a line may reach are those routing can send it to (its pinned model, its tag's rule and
fallbacks, else every model with a weight, and the cascade's steps).
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from oxconsole.media.kinds import (
    INPUT_AUDIO_FORMATS,
    MediaError,
    check_audio,
    check_image,
    check_image_url,
)
from oxconsole.media.pixels import image_size
from oxconsole.workload.problems import WorkloadError, error, fail, printable, show
from oxconsole.workload.prompts.mediafiles import audio_file, image_file
from oxconsole.workload.prompts.promptdata import ImageInput, PromptMedia
from oxconsole.workload.prompts.synthtext import synthetic_text
from oxconsole.workload.schema import Api, SyntheticConfig, Workload

__all__ = [
    "MAX_LINE_IMAGES",
    "MEDIA_KEYS",
    "Reach",
    "check_needs",
    "line_media",
    "media_seed",
    "reach",
    "source_needs",
    "synthetic_documents",
    "synthetic_media",
]

MEDIA_KEYS = ("images", "audio", "query", "documents")
"""A prompts line's media keys."""

MAX_LINE_IMAGES = 100
"""Images one line may send."""

_HEADER_B64 = 87_384
"""Base64 characters of a data URL decoded to read the image's kind and size during a run (64 KiB:
a JPEG's frame header comes after its EXIF, which may be that long); the whole URL is decoded
once, by the check before the run."""

Reach = Callable[[str | None, str | None], dict[Api, str]]
"""(tag, pinned model) -> each API a prompt may reach, with one model that has it."""


def media_seed(run_seed: int, request_id: str) -> int:
    """The seed of a request's generated media: the same id, the same bytes, in every process
    (Python's `hash` of a string differs between processes)."""
    return zlib.crc32(f"{run_seed}:{request_id}".encode())


def line_media(obj: dict[str, Any], label: str, where: str, base: Path, check: bool) -> PromptMedia | None:
    """The media of one prompts line (None without any), files read once (`mediafiles`);
    `WorkloadError` naming the line, the key and the file. `check`: decode data URLs whole (the
    check before a run); without, only their header (a run's own pass)."""
    if not any(k in obj for k in MEDIA_KEYS):
        return None
    query = obj.get("query")
    if query is not None and (type(query) is not str or not query):
        fail(label, f"{where}: query", "a non-empty string (a reranker's query)", query)
    docs = obj.get("documents")
    if docs is not None:
        if type(docs) is not list or not docs:
            fail(label, f"{where}: documents", "a non-empty array of strings (a reranker's documents)", docs)
        for i, d in enumerate(docs):
            if type(d) is not str or not d:
                fail(label, f"{where}: documents.{i}", "a non-empty string", d)
    images = tuple(_images(obj.get("images"), label, where, base, check)) if "images" in obj else ()
    audio = None
    value = obj.get("audio")
    if "audio" in obj:
        if type(value) is not str or not value:
            fail(label, f"{where}: audio", "the path of an audio file (wav, mp3, flac, ogg, webm)", value)
        audio = _file(audio_file, base, value, f"{label}: {where}: audio ({printable(value)})")
    return PromptMedia(
        images=images, audio=audio, query=query, documents=tuple(docs) if docs is not None else None
    )


def _file(read: Callable[[Path, str], Any], base: Path, value: str, where: str) -> Any:
    try:
        return read(base / Path(value).expanduser(), where)
    except MediaError as e:
        raise WorkloadError(printable(str(e))) from None


def _images(value: Any, label: str, where: str, base: Path, check: bool) -> Iterator[ImageInput]:
    what = 'an array of image files, https:// URLs or data URLs ("data:image/png;base64,...")'
    if type(value) is not list or not value:
        fail(label, f"{where}: images", what, value)
    if len(value) > MAX_LINE_IMAGES:
        raise error(label, f"{where}: images", f"at most {MAX_LINE_IMAGES} images", f"{len(value)}")
    for i, v in enumerate(value):
        key = f"{where}: images.{i}"
        if type(v) is not str or not v:
            fail(label, key, "an image file, an https:// URL or a data URL", v)
        if v.startswith(("https://", "http://")):
            yield ImageInput(url=v)
        elif v.startswith("data:"):
            yield ImageInput(url=v, pixels=_data_url_pixels(v, f"{label}: {key}", check))
        else:
            f = _file(image_file, base, v, f"{label}: {key} ({printable(v)})")
            yield ImageInput(file=f, pixels=f.pixels)


def _data_url_pixels(url: str, where: str, check: bool) -> int:
    """A data URL's width x height: checked whole (`check`), else read from its first bytes."""
    try:
        if check:
            check_image_url(url, where)
        head = url.partition(",")[2][:_HEADER_B64]
        data = base64.b64decode(head[: len(head) // 4 * 4])
        check_image(data, where)
        w, h = image_size(data, where)
    except MediaError as e:
        raise WorkloadError(printable(str(e))) from None
    except ValueError:
        raise error(where, "", "a base64 data URL of an image", show(url[:40])) from None
    return w * h


def synthetic_media(
    syn: SyntheticConfig, run_seed: int, request_id: str, docs: tuple[str, ...] | None
) -> PromptMedia | None:
    """A synthetic prompt's media (None when it has none): its generated images and audio, seeded by
    its id, and `docs`, its documents."""
    if syn.images is None and not syn.audio_s and docs is None:
        return None
    seed = media_seed(run_seed, request_id)
    return PromptMedia(synthetic_images=syn.images, audio_s=syn.audio_s, seed=seed, documents=docs)


def synthetic_documents(
    syn: SyntheticConfig, run_seed: int, index: int, tokens: int
) -> tuple[str, ...] | None:
    """A synthetic prompt's documents: `syn.documents` texts of `tokens` tokens each."""
    if not syn.documents:
        return None
    return tuple(synthetic_text(run_seed, f"{index}.doc{k}", tokens) for k in range(syn.documents))


def reach(w: Workload) -> Reach:
    """Which APIs a prompt with this tag and pinned model may be sent to (see the module's
    docstring), each with one model that has it, for the error messages."""
    models = {m.name: m for m in w.models}
    everywhere = [m.name for m in w.models if m.weight > 0]
    cascade = list(w.routing.cascade)
    memo: dict[tuple[str | None, str | None], dict[Api, str]] = {}

    def apis(tag: str | None, model: str | None) -> dict[Api, str]:
        got = memo.get((tag, model))
        if got is not None:
            return got
        if model is not None and model in models:
            names = [model]
        else:
            rule = next((r for r in w.routing.rules if tag is not None and r.tag == tag), None)
            names = [*rule.models, *rule.fallback] if rule is not None else everywhere + cascade
        out: dict[Api, str] = {}
        for n in names:
            if n in models:
                out.setdefault(models[n].api, n)
        memo[(tag, model)] = out
        return out

    return apis


def _to(api: Api, model: str) -> str:
    return f'(it may go to model "{printable(model)}", api = "{api}")'


def check_needs(
    apis: dict[Api, str], media: PromptMedia | None, has_text: bool, label: str, where: str
) -> None:
    """What each API a line may reach needs of it; `WorkloadError` naming the first it lacks."""
    if "speech" in apis and not has_text:
        raise error(label, f"{where}: prompt", f"text to speak {_to('speech', apis['speech'])}", "none")
    if "rerank" in apis and (media is None or media.documents is None):
        what = f"an array of strings (a reranker's documents) {_to('rerank', apis['rerank'])}"
        raise error(label, f"{where}: documents", what, "none")
    if "transcriptions" in apis and (media is None or media.audio_seconds is None):
        what = f"an audio file to transcribe {_to('transcriptions', apis['transcriptions'])}"
        raise error(label, f"{where}: audio", what, "none")
    audio = media.audio if media is not None else None
    for api in ("chat", "responses"):
        if audio is not None and api in apis:
            at = f"{label}: {where}: audio ({printable(audio.name)})"
            try:
                check_audio(audio.data, at, allowed=INPUT_AUDIO_FORMATS)
            except MediaError as e:
                raise WorkloadError(f"{printable(str(e))} {_to(api, apis[api])}") from None


_SYNTHETIC_ONLY = (
    ("rerank", "documents", "documents for the reranker",
     '; a prompts file whose lines carry "documents", or synthetic documents = N'),
    ("transcriptions", "audio_s", "audio to transcribe",
     '; a prompts file whose lines carry "audio", or synthetic audio_s = SECONDS'),
)  # fmt: skip
"""What an API needs that only synthetic prompts give here: (API, the `prompts.synthetic` key that
gives it, what is needed, what to use without synthetic prompts)."""


def source_needs(w: Workload, label: str) -> None:
    """For prompts that are not a JSONL file (synthetic, inline items, other formats): what the
    APIs of the models they may reach need, which only synthetic prompts can give."""
    apis = reach(w)(None, None)
    syn = w.prompts.synthetic
    source = "prompts.synthetic" if syn is not None else f'prompts of format "{w.prompts.format}"'
    if w.prompts.items is not None:
        source = "prompts.items"
    file = printable(str(w.path))
    for api, field, need, instead in _SYNTHETIC_ONLY:
        if api in apis and (syn is None or not getattr(syn, field)):
            key = f"prompts.synthetic.{field}" if syn is not None else "prompts"
            what = f"{need} {_to(api, apis[api])}"
            if syn is None:
                what += instead
            raise error(file, key, what, f"none in {source}")
