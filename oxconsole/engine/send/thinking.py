"""What a reasoning model's answer adds to a request's figures: reasoning and cached tokens from
usage, `<think>` tags inside the answer's text, and the record fields made of them.

Why this module exists: chat streams, chat bodies and the Responses API (`responsesapi.py`) carry the
same three facts in different places (usage details, a reasoning field or event, tags in the
text); reading them here once keeps each reader's own path short and the records alike.
"""

from __future__ import annotations

from typing import Any, Final

from oxconsole.base.figures import TTFOT
from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.engine.send.usage import count

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"
HELD_MAX: Final = 64
"""Characters of leading content held to see whether a `<think>` tag opens the answer; more is
the answer itself."""


def _count(d: Any, key: str, res: AttemptResult) -> int | None:
    return count(d, key, res) if isinstance(d, dict) else None


def usage_details(u: dict[str, Any], res: AttemptResult, responses: bool = False) -> None:
    """The cached and reasoning tokens of a `usage` object (chat's `prompt_tokens_details` and
    `completion_tokens_details`, or the Responses API's `input_tokens_details` and
    `output_tokens_details`), when it says them."""
    pre = ("input", "output") if responses else ("prompt", "completion")
    cached = _count(u.get(pre[0] + "_tokens_details"), "cached_tokens", res)
    if cached is None and not responses:
        cached = _count(u, "prompt_cache_hit_tokens", res)  # DeepSeek's own name for it
    if cached is not None:
        res.cached_tokens = cached
    reasoning = _count(u.get(pre[1] + "_tokens_details"), "reasoning_tokens", res)
    if reasoning is not None:
        res.reasoning_tokens = reasoning


def llama_cache(obj: dict[str, Any], res: AttemptResult) -> None:
    """llama.cpp's cached prompt tokens (`timings.cache_n`, beside its usage), when usage says none."""
    if res.cached_tokens is None:
        cached = _count(obj.get("timings"), "cache_n", res)
        if cached is not None:
            res.cached_tokens = cached


def split_think(text: str) -> tuple[str, str | None]:
    """A whole answer's text split into (answer, reasoning) when it opens with `<think>`; an
    unclosed tag makes all of it reasoning."""
    s = text.lstrip()
    if not s.startswith(THINK_OPEN):
        return text, None
    i = s.find(THINK_CLOSE)
    if i < 0:
        return "", s[len(THINK_OPEN) :]
    return s[i + len(THINK_CLOSE) :].lstrip(), s[len(THINK_OPEN) : i]


def text_estimate(text: str) -> int:
    """Tokens of a text nobody counted: a quarter of its characters, at least 1."""
    return max(1, round(len(text) / 4)) if text else 0


def record_fields(res: AttemptResult, input_tokens: int, output_tokens: int) -> tuple[dict[str, Any], bool]:
    """The record's `ttfot_ms`, `reasoning_tokens`, `cached_tokens` and `tool_calls` (only those
    known), and whether the reasoning count is an estimate. A server's zero is not believed when
    reasoning was seen (some send `reasoning_tokens: 0` always); the counts stay inside the input
    and output tokens they are part of."""
    out: dict[str, Any] = {}
    if res.ttfot_ms is not None:
        out[TTFOT.journal] = res.ttfot_ms
    reasoning = res.reasoning_tokens
    estimated = False
    if res.reasoning_estimate and not reasoning:
        reasoning = res.reasoning_estimate
        estimated = True
    if reasoning is not None:
        out["reasoning_tokens"] = min(reasoning, output_tokens)
    if res.cached_tokens is not None:
        out["cached_tokens"] = min(res.cached_tokens, input_tokens)
    if res.tool_calls is not None:
        out["tool_calls"] = res.tool_calls
    return out, estimated
