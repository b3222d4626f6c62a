"""The request bodies of every kind of model: chat and Responses messages carrying images and
audio, and the bodies of `rerank`, `transcriptions` (a multipart form), `speech` and `images`.

Why this module exists: a body is built before the clock, like every other body, at about a text
body's cost. So what is costly is done once: a file's data URL or base64 once per file per run
(`workload/prompts/mediafiles.py`), a synthetic image size's constant rows once per process (a request
then costs its varying rows: ~60 us for 512x512), a synthetic clip once per length, a
transcription's form once per model (a request joins the form, the file and the closing boundary:
one copy). Each API takes the parts of a prompt it has a place for: chat and Responses the images
(`image_url` parts, files and generated images as data URLs) and the audio (`input_audio`, base64),
a transcription the audio as the form's `file`, a reranker the query and documents, speech the
text, image generation the text as its prompt.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from oxconsole.engine.send.apis import flatten
from oxconsole.engine.send.attempt import Encoded
from oxconsole.media.kinds import INPUT_AUDIO_FORMATS
from oxconsole.media.multipart import FormTemplate
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import SyntheticWav
from oxconsole.workload import ModelConfig, Prompt
from oxconsole.workload.prompts.promptdata import PromptMedia
from oxconsole.workload.schema import SyntheticImages

__all__ = ["SYNTHETIC_NOISE", "Encoded", "MediaBodies", "media_fields", "with_media"]

SYNTHETIC_NOISE: Final = 0.5
"""The share of a synthetic image that is noise rather than flat colour: 0.5 makes a 512x512 PNG
of 530 KB as a data URL, about a photo's PNG (a flat image is 3.5 KB, which no camera makes and
which understates the upload and the server's decoding; all noise is 1.05 MB, twice a photo's).
What a vision encoder costs depends on the pixels' count, not their content."""

SYNTHETIC_KINDS: Final = 16
"""Synthetic image sizes and clip lengths kept per process (a run has one or two)."""

TRANSCRIPTION_FORMAT: Final = "json"
"""The `response_format` a transcription asks for (a model's `extra_body` may ask another)."""

SPEECH_FORMAT: Final = "wav"
"""The `response_format` speech asks for: every server has it, and its header carries the sample
rate, so the seconds received are exact without assuming one (a model's `extra_body` may ask
"mp3", "pcm", "opus", "aac" or "flac")."""


class MediaBodies:
    """One engine's makers of media: synthetic images and clips by size, forms by model."""

    def __init__(self) -> None:
        self._png: dict[tuple[int, int], SyntheticPng] = {}
        self._wav: dict[float, SyntheticWav] = {}
        self._forms: dict[tuple[str, tuple[tuple[str, str], ...]], FormTemplate] = {}

    def png(self, syn: SyntheticImages) -> SyntheticPng:
        key = (syn.width, syn.height)
        p = self._png.get(key)
        if p is None:
            if len(self._png) >= SYNTHETIC_KINDS:
                self._png.clear()
            p = self._png[key] = SyntheticPng(syn.width, syn.height, noise=SYNTHETIC_NOISE)
        return p

    def wav(self, seconds: float) -> SyntheticWav:
        w = self._wav.get(seconds)
        if w is None:
            if len(self._wav) >= SYNTHETIC_KINDS:
                self._wav.clear()
            w = self._wav[seconds] = SyntheticWav(seconds)
        return w

    def warm(self, media: PromptMedia | None) -> None:
        """Before the clock: make what a prompt's media needs (a synthetic size's constant rows,
        3-40 ms; a file's data URL or base64, 1.2 ms a MB), so the first wave does not wait on it."""
        if media is None:
            return
        if media.synthetic_images is not None:
            self.png(media.synthetic_images)
        if media.audio_s:
            self.wav(media.audio_s)
        for img in media.images:
            if img.file is not None:
                img.file.data_url()
        if media.audio is not None and media.audio.kind in INPUT_AUDIO_FORMATS:
            media.audio.b64()

    # -- chat and Responses ----------------------------------------------------------------------

    def parts(self, media: PromptMedia) -> list[dict[str, Any]]:
        """The content parts a prompt's images and audio add to its last user message."""
        out: list[dict[str, Any]] = []
        for img in media.images:
            url = img.url if img.file is None else img.file.data_url()
            out.append({"type": "image_url", "image_url": {"url": url}})
        syn = media.synthetic_images
        if syn is not None:
            png = self.png(syn)
            for k in range(syn.count):
                out.append({"type": "image_url", "image_url": {"url": png.data_url(media.seed + k)}})
        if media.audio is not None:
            part = {"data": media.audio.b64(), "format": media.audio.kind}
            out.append({"type": "input_audio", "input_audio": part})
        elif media.audio_s:
            part = {"data": self.wav(media.audio_s).b64(media.seed), "format": "wav"}
            out.append({"type": "input_audio", "input_audio": part})
        return out

    def messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        """The prompt's messages, its images and audio in its last user message."""
        media = prompt.media
        if media is None:
            return prompt.messages
        return with_media(prompt.messages, self.parts(media))

    # -- the other kinds -------------------------------------------------------------------------

    def transcription(self, m: ModelConfig, prompt: Prompt, stream: bool) -> Encoded:
        """A `/audio/transcriptions` form: `model`, `response_format`, `stream` when streaming (and
        vLLM's usage switches), the model's `extra_body` as text fields, then `file`."""
        media = prompt.media
        fields = {"model": m.name, "response_format": TRANSCRIPTION_FORMAT}
        if stream:
            fields |= {"stream": "true", "stream_include_usage": "true"}
        fields |= {k: _form_value(v) for k, v in m.extra_body.items()}
        key = (m.name, tuple(fields.items()))
        form = self._forms.get(key)
        if form is None:
            form = self._forms[key] = FormTemplate(fields)
        if media is not None and media.audio is not None:
            f = media.audio
            return Encoded(form.body(f.data, filename=f.name, file_type=f.mime), form.content_type)
        clip = self.wav(media.audio_s if media is not None and media.audio_s else _NO_AUDIO_S)
        seed = media.seed if media is not None else 0
        return Encoded(form.body(*clip.parts(seed), filename="audio.wav"), form.content_type)

    def rerank(self, m: ModelConfig, prompt: Prompt) -> dict[str, Any]:
        media = prompt.media
        docs = list(media.documents or ()) if media is not None else []
        query = media.query if media is not None and media.query is not None else flatten(prompt.messages)
        body = {"model": m.name, "query": query, "documents": docs, "top_n": len(docs)}
        body.update(m.extra_body)
        return body

    def speech(self, m: ModelConfig, prompt: Prompt) -> dict[str, Any]:
        body = {
            "model": m.name,
            "input": flatten(prompt.messages),
            "voice": m.voice,
            "response_format": SPEECH_FORMAT,
        }
        body.update(m.extra_body)
        return body

    def images(self, m: ModelConfig, prompt: Prompt) -> dict[str, Any]:
        body = {"model": m.name, "prompt": flatten(prompt.messages), "size": m.size, "n": m.n}
        body.update(m.extra_body)
        return body


_NO_AUDIO_S: Final = 1.0
"""The clip a transcription sends for a prompt without audio (which only a live weight change can
route there: the check before the run refuses it otherwise)."""


def _form_value(v: Any) -> str:
    """A form field's text: a string as it is, anything else as JSON (`true`, `0.2`, `["word"]`)."""
    return v if isinstance(v, str) else orjson.dumps(v).decode()


def with_media(messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with `parts` after the text of the last user message (its content becomes a list of
    parts: the text first, when there is any; the other messages are shared, not copied)."""
    if not parts:
        return messages
    i = next((j for j in range(len(messages) - 1, -1, -1) if messages[j].get("role") == "user"), None)
    if i is None:
        return [*messages, {"role": "user", "content": parts}]
    msg = messages[i]
    content = msg.get("content")
    if isinstance(content, str):
        head: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    elif isinstance(content, list):
        head = list(content)
    else:
        head = []
    out = list(messages)
    out[i] = {**msg, "content": head + parts}
    return out


def media_fields(prompt: Prompt, api: str) -> dict[str, Any]:
    """What a request sent besides text, for its record: `images_in`, `image_pixels` and
    `audio_in_s` (chat, Responses, a transcription's audio), `documents` (a reranker's),
    `characters` (speech's input text), and `api` for the other kinds."""
    out: dict[str, Any] = {}
    media = prompt.media
    if api in ("chat", "responses"):
        if media is not None:
            if n := media.image_count:
                out["images_in"] = n
                if (px := media.image_pixels) is not None:
                    out["image_pixels"] = px
            if (s := media.audio_seconds) is not None:
                out["audio_in_s"] = s
        return out
    if api in ("completions", "embeddings"):
        return out
    out["api"] = api
    if api == "transcriptions":
        s = media.audio_seconds if media is not None else None
        out["audio_in_s"] = s if s is not None else _NO_AUDIO_S
    elif api == "rerank":
        out["documents"] = len(media.documents or ()) if media is not None else 0
    elif api == "speech":
        out["characters"] = len(flatten(prompt.messages))
    return out
