"""The simulator's `/v1/embeddings`: deterministic vectors, token usage, the model's timing and faults.

Why this module exists: a workload with an `api = "embeddings"` model needs a server that answers
embeddings the way OpenAI, vLLM and TEI do (`{"object": "list", "data": [{"embedding": [...]}],
"usage": {"prompt_tokens", "total_tokens"}}`), reproducibly. Each input's vector is drawn from a
hash of its text (the same text always gets the same vector, of unit length), `dimensions` long
when the request asks (as OpenAI's `text-embedding-3` models take it), else `DEFAULT_DIMENSIONS`.
The answer is sent once the profile's `ttft` has passed from admission (an embedding has no tokens
to stream); rate limits, throttling, 500s, resets and stalls are drawn as for chat.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Final

DEFAULT_DIMENSIONS: Final = 16
"""Vector length when the request does not ask for `dimensions` (small: tests read them)."""
MAX_DIMENSIONS: Final = 4096
"""Longest vector the simulator builds (OpenAI's largest model has 3072)."""

BAD_INPUT: Final = (
    "input must be a non-empty string, a list of strings, a list of token ids or a list of those"
)


def embedding_inputs(value: object) -> list[tuple[int, str]] | None:
    """(tokens, text) of each input of an embeddings request; None when missing or invalid.

    Strings count (chars + 3) // 4 tokens as chat does; a list of token ids is one input of that
    many tokens (its text is the ids written out, for the vector's seed).
    """
    if isinstance(value, str):
        return [((len(value) + 3) // 4, value)] if value else None
    if not isinstance(value, list) or not value:
        return None
    if all(type(t) is int for t in value):
        return [(len(value), repr(value))]
    out: list[tuple[int, str]] = []
    for item in value:
        if isinstance(item, str) and item:
            out.append(((len(item) + 3) // 4, item))
        elif isinstance(item, list) and item and all(type(t) is int for t in item):
            out.append((len(item), repr(item)))
        else:
            return None
    return out


def dimensions(body: dict[str, Any]) -> int | None:
    """The vector length asked for (`dimensions`), DEFAULT_DIMENSIONS without it; None when invalid."""
    d = body.get("dimensions", DEFAULT_DIMENSIONS)
    if type(d) is not int or not 1 <= d <= MAX_DIMENSIONS:
        return None
    return d


def vector(text: str, dims: int) -> list[float]:
    """The deterministic unit vector of `text`, `dims` long."""
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    rng = random.Random(seed)
    v = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / norm, 6) for x in v]


def embeddings_body(model: str, inputs: list[tuple[int, str]], dims: int) -> dict[str, Any]:
    """The response body: one embedding per input, in order, and the prompt tokens of all."""
    tokens = sum(n for n, _ in inputs)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": vector(text, dims)}
            for i, (_, text) in enumerate(inputs)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
