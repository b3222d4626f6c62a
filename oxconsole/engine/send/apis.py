"""The three APIs a model may be called on (`[[models]] api`): their paths and request bodies.

Why this module exists: a prompt is chat messages everywhere in the engine; a model whose `api` is
"completions" or "embeddings" takes text instead (`prompt`, `input`). The messages are flattened
here, the same way for every source: the text of each message (string content, or the text parts
of a content array) joined by a blank line, roles dropped. A prompt given as one user message (a
`prompt` line, inline items, synthetic and ShareGPT prompts) is thus sent exactly as written.
"""

from __future__ import annotations

from typing import Any, Final

from oxconsole.workload import ModelConfig
from oxconsole.workload.schema import API_PATHS

PATHS: Final = API_PATHS
"""The path each API is called on, under the endpoint's base_url (`workload/schema.py`)."""

_UNSTREAMED: Final = frozenset({"embeddings", "rerank", "images"})
"""APIs whose answer comes whole: a vector, a ranking, images (the contract: no TTFT for them)."""


def streams(api: str, stream: bool) -> bool:
    """Whether a request on this API is streamed in a run whose `stream` is `stream`: embeddings,
    rankings and images never are; speech always is (its audio is read as it arrives, whatever
    `run.stream` says: its TTFT is the first audio byte)."""
    return api == "speech" or (stream and api not in _UNSTREAMED)


def flatten(messages: list[dict[str, Any]]) -> str:
    """Chat messages as one text: each message's text joined by a blank line, roles dropped."""
    if len(messages) == 1:
        c = messages[0].get("content")
        if isinstance(c, str):
            return c
    parts: list[str] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts.extend(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "\n\n".join(parts)


def response_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as Responses input items: the same roles, a content string as it is, chat's
    text parts as `input_text` parts, its `image_url` parts as `input_image` (whose `image_url` is
    the URL itself, and `detail` required), `input_audio` as it is, other parts as given."""
    out: list[dict[str, Any]] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            c = [_response_part(p) for p in c]
        out.append({"role": m.get("role", "user"), "content": c})
    return out


def _response_part(p: Any) -> Any:
    kind = p.get("type") if isinstance(p, dict) else None
    if kind == "text":
        return {"type": "input_text", "text": p["text"]}
    if kind == "image_url":
        image = p.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        detail = image.get("detail", "auto") if isinstance(image, dict) else "auto"
        return {"type": "input_image", "image_url": url, "detail": detail}
    return p


def text_body(m: ModelConfig, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The start of a body for a "completions" (`prompt`) or "embeddings" (`input`) model."""
    key = "prompt" if m.api == "completions" else "input"
    return {"model": m.name, key: flatten(messages)}
