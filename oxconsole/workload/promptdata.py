"""What reading the prompts gives: one `Prompt` per request, and `PromptStats` of a whole pass.

Why this module exists: these are not keys of the workload file (`schema.py` holds those) but the
values the prompt sources produce (`prompts.py`, `sources.py`, `batch.py`, `sharegpt.py`) and the
engine, `validate` and the journal read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Prompt:
    id: str
    """Unique per run (repeats carry "#n")."""
    messages: list[dict[str, Any]]
    """Chat messages sent as-is."""
    tag: str | None = None
    """Routing tag (matched by [[routing.rules]])."""
    model: str | None = None
    """Pin this prompt to one model (bypasses routing)."""
    max_tokens: int | None = None
    """Per-prompt cap (synthetic prompts set it from output_tokens); None = the model's max_tokens."""
    input_chars: int = 0
    """Characters of message content, for input-token estimates (~4 chars a token)."""
    body: dict[str, Any] | None = None
    """A request body to send as given (an OpenAI Batch input line's), its model set to the model's
    name; None = the body is built from `messages` and the model's settings."""
    turns: tuple[str, ...] | None = None
    """A multi-turn session's user turns (a prompts line's `"turns"`): the engine sends them one
    by one, each with the whole history (`engine/send/conversations.py`); None = a single request."""
    input_tokens: int | None = None
    """Its input tokens counted by `[prompts] tokenizer`; None = estimated from `input_chars`."""
    keep_text: bool = False
    """Read the answer's text even when `save_text` is off (a session's turn: the next turn's
    history needs it)."""
    expected: str | None = None
    """The right answer (a prompts line's `"expected"`), for `[quality] expected`."""
    due: float | None = None
    """A trace's row: seconds after the first row that it is due (`traces.py`, replayed at
    `run.trace_speed`); None = the run's arrival decides."""


@dataclass(frozen=True)
class PromptStats:
    """What `check_prompts` learned from one full pass over the prompt source."""

    count: int
    """Prompts in one pass."""
    total_requests: int | None
    """Requests the run will send; None = unbounded (cycling until run.duration)."""
    tags: frozenset[str] = frozenset()
    """Tags seen on prompts."""
    models_referenced: frozenset[str] = frozenset()
    """Models named by prompts' own `model` key."""
    input_lengths: LengthStats | None = None
    """Prompt lengths in tokens (estimated) over the pass, where the source has varying lengths."""
    output_lengths: LengthStats | None = None
    """max_tokens over the pass, where the source sets them per prompt."""
    skipped: int = 0
    """Entries of the file that give no prompt (ShareGPT conversations without a human turn and
    an answer)."""
    sessions: int = 0
    """Multi-turn sessions (prompts with `"turns"`) in one pass."""
    turns: int = 0
    """Their turns, all together (one request each)."""


@dataclass(frozen=True)
class LengthStats:
    """Lengths in tokens seen in one pass: how many, their mean, median, 99th percentile, extremes."""

    count: int
    """Lengths seen (one per prompt of the pass)."""
    mean: float
    """Their mean, over all of them."""
    p50: int
    """Median, over the first `sampled`."""
    p99: int
    """99th percentile, over the first `sampled`."""
    min: int
    """Shortest, over all of them."""
    max: int
    """Longest, over all of them."""
    sampled: int
    """How many of them the percentiles are taken over (the first ones, when there are very many)."""


def content_chars(messages: object) -> int:
    """Characters of message content (strings, or the text of content parts): a prompt's
    `input_chars`, and what the simulator counts of a request's messages."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            total += len(c)
        elif isinstance(c, list):
            for part in c:
                if isinstance(part, dict):
                    text = part.get("text")
                    if isinstance(text, str):
                        total += len(text)
    return total
