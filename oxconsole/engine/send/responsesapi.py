"""Reading an answer of the OpenAI Responses API (`[[models]] api = "responses"`): its streamed
events timed as they arrive, or its whole response object.

Why this module exists: the Responses API's wire is not chat's. A stream is named events
(`response.output_text.delta`, `response.reasoning_text.delta`, ...) ending with
`response.completed` (or `response.incomplete`) and no `[DONE]`; usage is
`input_tokens`/`output_tokens` with their details; a failure mid-stream is `response.failed` or an
`error` event. The figures are chat's (`stream.py`): TTFT at the first delta of any kind, TTFOT at
the first answer delta (text, refusal or function-call arguments), ITL over every delta, reasoning
and cached tokens from usage. Every event is parsed whole (they are small and carry no shared
prefix worth skipping); the same bounds hold as for chat.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from oxconsole.engine.send.attempt import AttemptResult, BadResponse
from oxconsole.engine.send.stream import BodyLimits, SseLines, json_answer, read_events, sse_object
from oxconsole.engine.send.thinking import text_estimate, usage_details
from oxconsole.engine.send.usage import count

__all__ = ["read_response", "read_response_stream"]

_ANSWER = frozenset(
    {"response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta"}
)
_REASONING = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
_END = frozenset({"response.completed", "response.incomplete"})
_FAILED = frozenset({"response.failed", "error"})


def _usage(resp: Any, res: AttemptResult) -> None:
    u = resp.get("usage") if isinstance(resp, dict) else None
    if not isinstance(u, dict):
        return
    it, ot = count(u, "input_tokens", res), count(u, "output_tokens", res)
    count(u, "total_tokens", res)
    if it is not None:
        res.input_tokens = it
    if ot is not None:
        res.output_tokens = ot
    usage_details(u, res, responses=True)


def _failure(obj: dict[str, Any]) -> str:
    """What a `response.failed` or `error` event says went wrong."""
    err = obj.get("error")
    if obj.get("type") == "response.failed":
        resp = obj.get("response")
        err = resp.get("error") if isinstance(resp, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("code") or "no reason given")
    return str(obj.get("message") or err or "no reason given")


class _ResponseEvents(SseLines):
    """The events of one streamed response, fed one network read at a time (lines as chat's)."""

    __slots__ = ("calls", "parts")

    def __init__(self, res: AttemptResult, save_text: bool, limits: BodyLimits) -> None:
        super().__init__(res, limits)
        self.calls = 0
        self.parts: list[str] | None = [] if save_text else None

    def event(self, payload: bytes, now: float) -> None:
        if not payload or payload == b"[DONE]":
            return
        obj = sse_object(payload, "event")
        kind = obj.get("type")
        if kind in _ANSWER or kind in _REASONING:
            self.delta(obj, kind, now)
        elif kind == "response.output_item.added":
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                self.calls += 1
        elif kind in _END:
            _usage(obj.get("response"), self.res)
            self.done = True
        elif kind in _FAILED:
            raise BadResponse("stream_error", f"{kind} event in stream: {_failure(obj)}")

    def delta(self, obj: dict[str, Any], kind: Any, now: float) -> None:
        self.tick(now)
        if kind in _REASONING:
            self.rn += 1
            return
        if not self.t_answer:
            self.t_answer = now
        text = obj.get("delta")
        if self.parts is not None and kind == "response.output_text.delta" and isinstance(text, str):
            self.parts.append(text)

    def end(self, t0: float, end: float) -> None:
        res = self.res
        if not self.done:
            raise BadResponse(
                "stream_aborted", f"stream ended without response.completed after {self.n} deltas"
            )
        self.timed(t0, end)  # (an answer with no reasoning began at its first delta)
        if self.calls:
            res.tool_calls = self.calls
        if self.parts is not None:
            res.text = "".join(self.parts)


async def read_response_stream(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """A streamed response, read to its `response.completed` (or `.incomplete`) or its end."""
    ev = _ResponseEvents(res, save_text, limits)
    await read_events(resp, ev, t0, (AttributeError, TypeError, KeyError), "event")


def _texts(parts: Any, kinds: tuple[str, ...]) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") in kinds and isinstance(p.get("text"), str)
    ]


async def read_response(
    resp: aiohttp.ClientResponse, res: AttemptResult, t0: float, save_text: bool, limits: BodyLimits
) -> None:
    """A response answered whole: its output's text, reasoning and function calls, and usage."""
    obj = await json_answer(resp, res, t0, limits, "output")
    if obj.get("status") == "failed":
        raise BadResponse(
            "stream_error", f"response failed: {_failure({'type': 'response.failed', 'response': obj})}"
        )
    _usage(obj, res)
    answer: list[str] = []
    reasoning: list[str] = []
    calls = 0
    for item in obj["output"]:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            answer += _texts(item.get("content"), ("output_text", "refusal"))
        elif kind == "reasoning":
            reasoning += _texts(item.get("content"), ("reasoning_text",))
            reasoning += _texts(item.get("summary"), ("summary_text",))
        elif kind == "function_call":
            calls += 1
    text = "".join(answer)
    if reasoning:
        res.reasoning_estimate = text_estimate("".join(reasoning))
    if calls:
        res.tool_calls = calls
    res.content_chunks = 1 if text or reasoning or calls else 0
    if save_text:
        res.text = text
    # kept even beside usage: a usage not believed (`usage.py`) falls back to it
    res.extra["estimated_output"] = text_estimate(text) + (res.reasoning_estimate or 0)
