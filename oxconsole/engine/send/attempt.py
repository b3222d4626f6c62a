"""What one attempt of one request gave: the result both the sender and the body readers fill.

Why this module exists: `client.py` sends an attempt and `stream.py` reads its body into the same
result; each needs the type, neither should import the other's module for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class AttemptResult:
    ok: bool
    error: str | None = None
    detail: str | None = None
    retry_after: float | None = None
    t_sent: float = 0.0  # unix time
    latency_ms: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    content_chunks: int = 0
    text: str | None = None
    status: int | None = None
    unstreamed: bool = False
    """Asked to stream, the server answered with one JSON body (no TTFT or inter-token figures)."""
    param: str | None = None
    """The request field a 4xx error names (OpenAI's `error.param`), when it names one."""
    extra: dict[str, Any] = field(default_factory=dict)
    ttfot_ms: float | None = None
    """Time to the first answer token (after any reasoning)."""
    reasoning_tokens: int | None = None
    """From usage's reasoning details; None when the server did not say."""
    reasoning_estimate: int | None = None
    """Reasoning tokens counted by the reader (chunks, or text / 4), for when usage says nothing."""
    cached_tokens: int | None = None
    tool_calls: int | None = None
    usage_doubt: str | None = None
    """The first count of the answer's usage that was not believed (`usage.py`): then it keeps none."""
    audio_out_s: float | None = None
    """Speech: the seconds of audio received."""
    images_out: int | None = None
    """Image generation: the images received."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """A request body already in bytes, with its content type (a transcription's multipart form);
    every other body is a dict, encoded as JSON by the attempt."""

    data: bytes
    content_type: str


class BadResponse(Exception):
    """A body that is not a well-formed answer (or is over a bound): `cls` is the error class."""

    def __init__(self, cls: str, detail: str) -> None:
        super().__init__(detail)
        self.cls = cls
