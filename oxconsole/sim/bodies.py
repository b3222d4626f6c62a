"""What chat and text-completion answers hold: reasoning before the answer, usage with its details.

Why this module exists: a reasoning model's answer is two runs of tokens, the reasoning then the
answer, and servers put the reasoning in one of three places (`reasoning_field`): a delta field of
its own, `reasoning_content` (DeepSeek, vLLM, SGLang) or `reasoning` (newer vLLM, OpenRouter), or
inside `content` between `<think>` and `</think>` (a server with no reasoning parser; always so for
legacy text completions, which have no other place). The choices of each run are encoded here once
per (kind, shape, length), so a streamed answer still costs joins; the usage carries
`prompt_tokens_details.cached_tokens` when the prefix cache is on and
`completion_tokens_details.reasoning_tokens` when the model reasons.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

import orjson
from aiohttp import web

from oxconsole.sim.encoded import DONE, HEAD, SSE_HEADERS, TOKEN_WORDS, Kind, answer_text
from oxconsole.sim.packing import pack_choices
from oxconsole.sim.state import ModelState
from oxconsole.sim.streams import Answer, Wire

__all__ = [
    "THINK_CLOSE",
    "THINK_OPEN",
    "chat_body",
    "filler_words",
    "stream_choices",
    "stream_wire",
    "usage_fields",
    "whole_stream",
]

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"


def _content_choice(kind: Kind, text: str) -> bytes:
    if kind.chat:
        return b'{"index":0,"delta":{"content":' + orjson.dumps(text) + b'},"finish_reason":null}]}\n\n'
    return b'{"index":0,"text":' + orjson.dumps(text) + b',"logprobs":null,"finish_reason":null}]}\n\n'


def in_content(kind: Kind, field: str) -> bool:
    """Whether the reasoning goes inside the answer's text (between think tags)."""
    return field == "think_tags" or not kind.chat


def filler_words(r: int) -> list[str]:
    """The texts of r tokens of filler (reasoning and answers are made of the same words)."""
    k = len(TOKEN_WORDS)
    return [TOKEN_WORDS[i % k] for i in range(r)]


@lru_cache(maxsize=256)
def reasoning_choices(kind: Kind, field: str, r: int) -> tuple[bytes, ...]:
    """The r streamed reasoning chunks' choices; in think tags, the first opens them and the last
    closes them (so the reasoning is still r chunks)."""
    words = filler_words(r)
    if not words:
        return ()
    if in_content(kind, field):
        words[0] = THINK_OPEN + words[0]
        words[-1] = words[-1] + THINK_CLOSE
        return tuple(_content_choice(kind, w) for w in words)
    key = orjson.dumps(field)
    return tuple(
        b'{"index":0,"delta":{' + key + b":" + orjson.dumps(w) + b'},"finish_reason":null}]}\n\n'
        for w in words
    )


@lru_cache(maxsize=256)
def _choices(kind: Kind, field: str, r: int, n: int) -> tuple[bytes, ...]:
    tokens = kind.token_choice
    k = len(tokens)
    return reasoning_choices(kind, field, r) + tuple(tokens[i % k] for i in range(n))


def stream_choices(kind: Kind, ans: Answer) -> tuple[bytes, ...]:
    """The choices of the answer's streamed chunks, one a token: the reasoning's, then the answer's
    (the kind's filler cycled, or a pack's pieces). Without reasoning the kind's own filler tuple,
    indexed modulo its length, so a plain stream builds nothing."""
    if ans.pieces is not None:
        return reasoning_choices(kind, ans.field, ans.reasoning) + pack_choices(ans.pieces)
    if ans.reasoning == 0:
        return kind.token_choice
    return _choices(kind, ans.field, ans.reasoning, ans.n)


def usage_fields(ans: Answer) -> dict[str, Any]:
    """Chat / text-completion `usage`: completion tokens count the reasoning ones."""
    completion = ans.reasoning + ans.n
    usage: dict[str, Any] = {
        "prompt_tokens": ans.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": ans.prompt_tokens + completion,
    }
    if ans.cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": ans.cached}
    if ans.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": ans.reasoning}
    return usage


def usage_tail(ans: Answer) -> bytes:
    """The end of the streamed usage chunk (after its head)."""
    return b'],"usage":' + orjson.dumps(usage_fields(ans)) + b"}\n\n"


def stream_wire(kind: Kind, ms_json: bytes, slot: bytes, ans: Answer) -> Wire:
    """A streamed chat or text-completion answer's pieces: chat's role chunk first, the chunks'
    head and choices, and the tail (finish, usage when asked, [DONE])."""
    head = HEAD + slot + b',"model":' + ms_json + b',"choices":['
    tail = [head + kind.finish_choice[ans.finish]]
    if ans.include_usage:
        tail.append(head + usage_tail(ans))
    tail.append(DONE)
    first = head + kind.role_choice if kind.role_choice else b""
    return Wire(head, stream_choices(kind, ans), first, b"".join(tail))


def whole_stream(ms: ModelState, kind: Kind, slot: bytes, ans: Answer) -> web.Response:
    """A zero-latency stream (ttft 0, tokens_per_s 0, no fault): the whole body in one write; a
    plain answer from the model's pre-encoded template."""
    if ans.reasoning == 0 and ans.pieces is None:
        parts = [slot.join(ms.template(ans.n, ans.finish, kind))]
        if ans.include_usage:
            parts += (HEAD, slot, b',"model":', ms.model_json, b',"choices":[', usage_tail(ans))
        parts.append(DONE)
        return web.Response(body=b"".join(parts), headers=SSE_HEADERS)
    wire = stream_wire(kind, ms.model_json, slot, ans)
    head = wire.head
    body = wire.first + b"".join([head + c for c in wire.tokens[: ans.total]]) + wire.tail
    return web.Response(body=body, headers=SSE_HEADERS)


def chat_body(kind: Kind, name: str, rid: bytes, created: int, ans: Answer) -> bytes:
    """A whole (non-streamed) chat or text-completion answer."""
    answer = answer_text(ans.n) if ans.pieces is None else "".join(ans.pieces)
    reasoning = "".join(filler_words(ans.reasoning))
    choice: dict[str, Any]
    if ans.reasoning and in_content(kind, ans.field):
        answer = THINK_OPEN + reasoning + THINK_CLOSE + answer
    if kind.chat:
        message: dict[str, Any] = {"role": "assistant", "content": answer, "refusal": None}
        if ans.reasoning and not in_content(kind, ans.field):
            message[ans.field] = reasoning
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": ans.finish}
    else:
        choice = {"index": 0, "text": answer, "logprobs": None, "finish_reason": ans.finish}
    return orjson.dumps(
        {
            "id": rid.decode(),
            "object": kind.object,
            "created": created,
            "model": name,
            "choices": [choice],
            "usage": usage_fields(ans),
        }
    )
