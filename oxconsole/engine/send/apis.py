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
    text parts as `input_text` parts (other parts as given)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            c = [
                {"type": "input_text", "text": p["text"]}
                if isinstance(p, dict) and p.get("type") == "text"
                else p
                for p in c
            ]
        out.append({"role": m.get("role", "user"), "content": c})
    return out


def text_body(m: ModelConfig, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The start of a body for a "completions" (`prompt`) or "embeddings" (`input`) model."""
    key = "prompt" if m.api == "completions" else "input"
    return {"model": m.name, key: flatten(messages)}
