"""What an admitted request will be answered with: its lengths, cached prefix, prefill and faults.

Why this module exists: chat, text completions and the Responses API read their limits from
different keys (`max_completion_tokens` / `max_tokens` / `max_output_tokens`) and their prompts from
different places, but are answered by one plan (`Answer`), so the timing, the usage and the faults of
all three come from the same rules.
"""

from __future__ import annotations

from typing import Any

from oxconsole.sim.encoded import CHAT, RESPONSES, Kind
from oxconsole.sim.faults import stream_faults
from oxconsole.sim.packing import pack_pieces
from oxconsole.sim.quality import answer_pieces, last_user_text
from oxconsole.sim.responses import input_text
from oxconsole.sim.state import ModelState
from oxconsole.sim.streams import Answer
from oxconsole.workload import SimModelProfile

__all__ = ["answer_length", "cache_key", "plan"]


def _max_tokens(body: dict[str, Any], kind: Kind) -> Any:
    if kind is RESPONSES:
        return body.get("max_output_tokens")
    value = body.get("max_completion_tokens") if kind is CHAT else None
    return body.get("max_tokens") if value is None else value


def answer_length(body: dict[str, Any], prof: SimModelProfile, kind: Kind) -> tuple[int, str, Any]:
    """Answer tokens (the profile's output_tokens capped by the request's limit; reasoning tokens
    come on top and are not capped), the finish reason, and the request's limit as given."""
    limit = _max_tokens(body, kind)
    if type(limit) is int and limit < prof.output_tokens:
        return max(1, limit), "length", limit
    return prof.output_tokens, "stop", limit


def cache_key(body: dict[str, Any], kind: Kind) -> str | list[int]:
    """What the prefix cache cuts into blocks: the text tokens are counted from (messages' content
    joined; instructions then input; a text prompt), or a text completion's first token-id list."""
    if kind is CHAT:
        return _content_text(body.get("messages"))
    if kind is RESPONSES:
        text = input_text(body)
        return text[0] if text is not None else ""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt:
        first = prompt[0]
        if isinstance(first, str):
            return first
        if isinstance(first, list):
            return [t for t in first if type(t) is int]
        return [t for t in prompt if type(t) is int]
    return ""


def _content_text(messages: object) -> str:
    """Message content joined (strings, or the text of content parts), as `content_chars` counts it."""
    if not isinstance(messages, list):
        return ""
    parts: list[str] = []
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += (p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "".join(parts)


def plan(body: dict[str, Any], kind: Kind, prompt_tokens: int, ms: ModelState) -> Answer:
    """The request's answer: lengths, streaming and usage, the cached prefix and the prefill it
    costs, and the stream faults drawn for it."""
    prof = ms.profile
    n, finish, limit = answer_length(body, prof, kind)
    stream = body.get("stream") is True
    if kind is RESPONSES:
        include_usage = prof.usage  # the Responses API always reports usage
    else:
        opts = body.get("stream_options")
        include_usage = prof.usage and stream and isinstance(opts, dict) and opts.get("include_usage") is True
    abort, malformed = stream_faults(ms) if ms.stream_faults else (False, False)
    pieces = pack_pieces(body.get("messages"), ms, limit) if kind is CHAT else None
    if pieces is None and ms.truth is not None and kind is CHAT:
        pieces = right_or_wrong(body.get("messages"), ms)
    if pieces is not None:  # a pack's sections, or an answer right or wrong: as long as they are
        n, finish = len(pieces), "stop"
    cached: int | None = None
    written = 0
    if ms.cache is not None:
        cached, written = ms.cache.serve(cache_key(body, kind))
        cached = min(cached, prompt_tokens)
    prefill = 0.0
    if prof.prefill_tokens_per_s > 0.0:
        prefill = (prompt_tokens - (cached or 0)) / prof.prefill_tokens_per_s
    return Answer(
        n,
        finish,
        prompt_tokens,
        stream,
        include_usage,
        abort,
        malformed,
        pieces,
        reasoning=prof.reasoning_tokens,
        field=prof.reasoning_field,
        cached=cached,
        written=written,
        prefill=prefill,
    )


def right_or_wrong(messages: Any, ms: ModelState) -> tuple[str, ...] | None:
    """The answer of a model with a `quality` (`sim/quality.py`), as tokens; None = filler."""
    text = last_user_text(messages)
    truth, quality = ms.truth, ms.profile.quality
    if text is None or truth is None or quality is None:
        return None
    answer = truth.answer(text, ms.name, quality, ms.seed)
    return None if answer is None else answer_pieces(answer)
