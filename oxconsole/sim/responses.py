"""The simulator's `/v1/responses`: OpenAI's Responses API, streamed as events or answered whole.

Why this module exists: clients call reasoning models through the Responses API as often as through
chat, and its wire is different: named SSE events with a `sequence_number` (`response.created`,
`response.output_item.added`, `response.reasoning_text.delta`, `response.output_text.delta`, ...,
`response.completed` with `usage`) and no `[DONE]`. The timing is chat's, token for token: one
delta event a token, the reasoning's first, due when the schedule says; the item and part events
ride with the delta that needs them, so the first token's write is still the first event a client
can time. Requests read `input` (a string, or a list of messages whose `content` is a string or
parts with `text`), `instructions`, `max_output_tokens` and `stream`; an answer cut by
`max_output_tokens` is `incomplete` (`response.incomplete`), as OpenAI's is.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from oxconsole.sim.bodies import filler_words
from oxconsole.sim.encoded import answer_text
from oxconsole.sim.streams import Answer, Wire

__all__ = ["BAD_INPUT", "input_text", "response_body", "response_wire"]

BAD_INPUT: Final = "input must be a string or a list of input items"


def _item_text(item: Any) -> str | None:
    """The text of one input item: a string, a message's content string, or its parts' text."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict):
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def input_text(body: dict[str, Any]) -> tuple[str, str] | None:
    """The prompt's text (instructions, then the input's, as tokens are counted) and the last
    item's text (for the trace); None when `input` is missing or not a string or list."""
    value = body.get("input")
    instructions = body.get("instructions")
    head = instructions if isinstance(instructions, str) else ""
    if isinstance(value, str):
        return head + value, value
    if not isinstance(value, list):
        return None
    texts = [_item_text(item) for item in value]
    parts = [t for t in texts if t is not None]
    return head + "".join(parts), parts[-1] if parts else ""


def _event(kind: str, seq: int, fields: dict[str, Any]) -> bytes:
    data = {"type": kind, "sequence_number": seq, **fields}
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


class _Ids:
    """The ids and indexes of one answer's items."""

    __slots__ = ("msg", "msg_index", "resp", "rs")

    def __init__(self, rid: str, reasoning: bool) -> None:
        self.resp = rid
        self.rs = "rs_" + rid.removeprefix("resp_")
        self.msg = "msg_" + rid.removeprefix("resp_")
        self.msg_index = 1 if reasoning else 0


def _usage(ans: Answer) -> dict[str, Any]:
    output = ans.total
    return {
        "input_tokens": ans.prompt_tokens,
        "input_tokens_details": {"cached_tokens": ans.cached or 0, "cache_write_tokens": ans.written},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": ans.reasoning},
        "total_tokens": ans.prompt_tokens + output,
    }


def _reasoning_item(ids: _Ids, text: str | None) -> dict[str, Any]:
    done = text is not None
    return {
        "type": "reasoning",
        "id": ids.rs,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}] if done else [],
        "status": "completed" if done else "in_progress",
    }


def _message_item(ids: _Ids, text: str | None, status: str) -> dict[str, Any]:
    content = [] if text is None else [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": ids.msg, "role": "assistant", "status": status, "content": content}


def _output(ids: _Ids, ans: Answer) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if ans.reasoning:
        out.append(_reasoning_item(ids, "".join(filler_words(ans.reasoning))))
    status = "completed" if ans.finish == "stop" else "incomplete"
    out.append(_message_item(ids, answer_text(ans.n), status))
    return out


def _response(
    ids: _Ids, name: str, created: int, ans: Answer, body: dict[str, Any], done: bool
) -> dict[str, Any]:
    """The response object: in progress (no output yet), or finished with its output and usage."""
    status = "in_progress"
    if done:
        status = "completed" if ans.finish == "stop" else "incomplete"
    max_out = body.get("max_output_tokens")
    return {
        "id": ids.resp,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": name,
        "output": _output(ids, ans) if done else [],
        "usage": (_usage(ans) if ans.include_usage else None) if done else None,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": None,
        "max_output_tokens": max_out if type(max_out) is int else None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def response_body(rid: str, name: str, created: int, ans: Answer, body: dict[str, Any]) -> bytes:
    """A whole (non-streamed) Responses answer."""
    return orjson.dumps(_response(_Ids(rid, ans.reasoning > 0), name, created, ans, body, True))


def response_wire(rid: str, name: str, created: int, ans: Answer, body: dict[str, Any]) -> Wire:
    """A streamed Responses answer: created and in_progress with the headers, one delta event a token
    (the events opening an item or part in the same write as its first delta), and the closing
    events with `response.completed` (or `response.incomplete`) last."""
    ids = _Ids(rid, ans.reasoning > 0)
    seq = 0

    def ev(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        out = _event(kind, seq, fields)
        seq += 1
        return out

    first = ev("response.created", response=_response(ids, name, created, ans, body, False))
    first += ev("response.in_progress", response=_response(ids, name, created, ans, body, False))
    chunks: list[bytes] = []
    rs_at = {"item_id": ids.rs, "output_index": 0, "content_index": 0}
    words = filler_words(ans.reasoning)
    for i, w in enumerate(words):
        pre = b""
        if i == 0:
            pre = ev("response.output_item.added", output_index=0, item=_reasoning_item(ids, None))
            pre += ev("response.content_part.added", part={"type": "reasoning_text", "text": ""}, **rs_at)
        chunks.append(pre + ev("response.reasoning_text.delta", delta=w, **rs_at))
    msg_at = {"item_id": ids.msg, "output_index": ids.msg_index, "content_index": 0}
    msg_part = {"type": "output_text", "text": "", "annotations": []}
    pre = b""
    if words:
        text = "".join(words)
        pre = ev("response.reasoning_text.done", text=text, **rs_at)
        pre += ev("response.content_part.done", part={"type": "reasoning_text", "text": text}, **rs_at)
        pre += ev("response.output_item.done", output_index=0, item=_reasoning_item(ids, text))
    item = _message_item(ids, None, "in_progress")
    pre += ev("response.output_item.added", output_index=ids.msg_index, item=item)
    pre += ev("response.content_part.added", part=msg_part, **msg_at)
    for i, w in enumerate(filler_words(ans.n)):
        delta = ev("response.output_text.delta", delta=w, logprobs=[], **msg_at)
        chunks.append(pre + delta if i == 0 else delta)
    answer = answer_text(ans.n)
    status = "completed" if ans.finish == "stop" else "incomplete"
    tail = ev("response.output_text.done", text=answer, logprobs=[], **msg_at)
    tail += ev("response.content_part.done", part={**msg_part, "text": answer}, **msg_at)
    item = _message_item(ids, answer, status)
    tail += ev("response.output_item.done", output_index=ids.msg_index, item=item)
    tail += ev("response." + status, response=_response(ids, name, created, ans, body, True))
    return Wire(b"", tuple(chunks), first, tail)
