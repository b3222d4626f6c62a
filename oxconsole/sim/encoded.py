"""What the simulator's bytes look like: pre-encoded chunks of both wire formats, and request readers.

Why this module exists: the simulator answers from pieces encoded once at import (each token's
chunk, the finish chunk, the usage tail), so a streamed answer costs joins, not JSON encoding; and
the few request fields it reads (messages, a text-completions prompt) are read the same way by
every handler.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

import orjson
from aiohttp import web

_WORDS: Final = (
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "hex",
    "jolly",
    "boxing",
    "frogs",
    "and",
    "many",
    "small",
    "engines",
    "hum",
    "along",
    "the",
    "river",
    "under",
    "pale",
    "amber",
    "light",
    "as",
    "distant",
    "bells",
    "ring",
    "softly",
    "through",
    "cold",
    "morning",
    "air",
    "near",
    "old",
    "stone",
    "bridges",
)
_TOKEN_TEXT: Final = tuple(w + " " for w in _WORDS)
TOKEN_WORDS: Final = _TOKEN_TEXT
"""The words an answer is made of, each with its space (one token each)."""
HEAD: Final = b'data: {"id":"'


class Kind:
    """What differs between the two wire formats served: chat (``/v1/chat/completions``) and legacy
    text completions (``/v1/completions``). One handler body, `Writer.stream`, `Writer.complete` and the
    template cache serve both; they take the kind and read its pre-encoded pieces, so neither format
    does per-chunk work on the other's behalf."""

    __slots__ = ("chat", "finish_choice", "id_prefix", "object", "role_choice", "slot_mid", "token_choice")

    def __init__(
        self,
        *,
        chat: bool,
        id_prefix: bytes,
        object_: str,
        chunk_object: str,
        token_choice: tuple[bytes, ...],
        role_choice: bytes,
        finish_choice: dict[str, bytes],
    ) -> None:
        self.chat = chat
        self.id_prefix = id_prefix
        """`b"chatcmpl-sim"` / `b"cmpl-sim"`, followed by a hex counter."""
        self.object = object_
        """The non-streamed body's "object"."""
        self.slot_mid = b'","object":' + orjson.dumps(chunk_object) + b',"created":'
        """Between the id and the created time in every streamed chunk."""
        self.token_choice = token_choice
        """The choice (closing the chunk) carrying each token of `_TOKEN_TEXT`."""
        self.role_choice = role_choice
        """The choice of the chunk sent at admission, before the first token: chat's role-only
        delta; b"" (no such chunk) for text completions."""
        self.finish_choice = finish_choice
        """The last choice, by finish reason."""


def _choice(body: bytes, finish: str | None = None) -> bytes:
    """One choice closing its chunk: `{"index":0,BODY,"finish_reason":...}]}` and the blank line."""
    reason = b"null" if finish is None else orjson.dumps(finish)
    return b'{"index":0,' + body + b',"finish_reason":' + reason + b"}]}\n\n"


def _text_choice(text: str, finish: str | None = None) -> bytes:
    return _choice(b'"text":' + orjson.dumps(text) + b',"logprobs":null', finish)


_FINISH: Final = ("stop", "length")
CHAT: Final = Kind(
    chat=True,
    id_prefix=b"chatcmpl-sim",
    object_="chat.completion",
    chunk_object="chat.completion.chunk",
    token_choice=tuple(_choice(b'"delta":{"content":' + orjson.dumps(t) + b"}") for t in _TOKEN_TEXT),
    role_choice=_choice(b'"delta":{"role":"assistant","content":""}'),
    finish_choice={r: _choice(b'"delta":{}', r) for r in _FINISH},
)
# Shaped as OpenAI's and vLLM's text-completion chunks: "text" and "logprobs" in every choice, no role.
TEXT: Final = Kind(
    chat=False,
    id_prefix=b"cmpl-sim",
    object_="text_completion",
    chunk_object="text_completion",
    token_choice=tuple(_text_choice(t) for t in _TOKEN_TEXT),
    role_choice=b"",
    finish_choice={r: _text_choice("", r) for r in _FINISH},
)
# The Responses API: its events are built per answer (`responses.py`); the kind names the route.
RESPONSES: Final = Kind(
    chat=False,
    id_prefix=b"resp_sim",
    object_="response",
    chunk_object="response",
    token_choice=(),
    role_choice=b"",
    finish_choice={},
)
DONE: Final = b"data: [DONE]\n\n"
MALFORMED_CHUNK: Final = b'data: {"choices": [\n\n'
SSE_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
}


@lru_cache(maxsize=1024)
def answer_text(n: int) -> str:
    """The deterministic response text of `n` tokens."""
    k = len(_TOKEN_TEXT)
    return "".join(_TOKEN_TEXT[i % k] for i in range(n))


def usage_tail(prompt_tokens: int, completion_tokens: int) -> bytes:
    return b'],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n' % (
        prompt_tokens,
        completion_tokens,
        prompt_tokens + completion_tokens,
    )


def error_body(message: str, type_: str, code: str | None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}})


def json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


BAD_PROMPT: Final = (
    "prompt must be a string, a list of strings, a list of token ids or a list of token-id lists"
)


def completion_prompt(prompt: object) -> tuple[int, str] | None:
    """Prompt tokens and trace text of a text-completions `prompt`; None when missing or invalid.

    A list of strings or of token-id lists is a batch; the simulator answers only the first prompt
    (n=1 semantics: one choice, index 0), so only its tokens are counted. Strings count
    (chars + 3) // 4 tokens as chat does, token-id lists their length. The trace text is the string,
    the last string of a list (as chat traces the last message), or "" for token ids.
    """
    if isinstance(prompt, str):
        return (len(prompt) + 3) // 4, prompt
    if not isinstance(prompt, list) or not prompt:
        return None
    first = prompt[0]
    if isinstance(first, str) and all(isinstance(p, str) for p in prompt):
        return (len(first) + 3) // 4, prompt[-1]
    if type(first) is int and all(type(t) is int for t in prompt):
        return len(prompt), ""
    if isinstance(first, list) and all(
        isinstance(p, list) and p and all(type(t) is int for t in p) for p in prompt
    ):
        return len(first), ""
    return None


def last_text(messages: object) -> str:
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        if isinstance(content, str):
            return content
    return ""
