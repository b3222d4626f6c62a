"""The simulator's answers to packs: one section per task, in the format the client splits.

Why this module exists: a pack (`[packing]`) is a request whose last user message holds N tasks
(workload/packs.py); a server that answered it with filler would give the client nothing to split.
The simulator answers it as a model that followed the instruction would: "### Answer K" sections,
in order, each echoing the start of its own task, with the pack's total output (each task the
profile's output_tokens, capped by the pack's max_tokens over N), and, for a fraction
`pack_error_rate` of packs (drawn from the model's seeded RNG), one section missing.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from oxconsole.sim.encoded import TOKEN_WORDS
from oxconsole.sim.quality import answer_pieces
from oxconsole.sim.state import ModelState
from oxconsole.workload import parse_pack

__all__ = ["ECHO_WORDS", "pack_choices", "pack_pieces"]

ECHO_WORDS: Final = 6
"""Words of its task a section starts with (so each task's answer is its own)."""

_MARK: Final = "Answer each task separately."


def pack_pieces(messages: Any, ms: ModelState, max_tokens: Any) -> tuple[str, ...] | None:
    """The answer's tokens when the last message is a user's pack, else None (one token a piece)."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    last = messages[-1]
    text = last.get("content")
    if last.get("role") != "user" or not isinstance(text, str) or not text.startswith(_MARK):
        return None
    tasks = parse_pack(text)
    if tasks is None:
        return None
    n = len(tasks)
    per = ms.profile.output_tokens
    if type(max_tokens) is int and max_tokens > 0:
        per = min(per, max(1, max_tokens // n))
    skip = n - 1 if ms.chance(ms.profile.pack_error_rate) else -1
    pieces: list[str] = []
    truth, quality = ms.truth, ms.profile.quality
    for k, task in enumerate(tasks, 1):
        if k - 1 == skip:
            continue
        answer = None if truth is None or quality is None else truth.answer(task, ms.name, quality, ms.seed)
        if answer is None:
            pieces.extend(_section(k, task, per))
        else:  # a model with a quality answers each task right or wrong, as it would alone
            pieces.extend((f"### Answer {k}\n", *answer_pieces(answer), "\n\n"))
    return tuple(pieces)


def _section(k: int, task: str, tokens: int) -> list[str]:
    """Section k: its heading line, the first words of its task, filler up to `tokens` pieces."""
    out = [f"### Answer {k}\n", "Re: "]
    out += (w + " " for w in task.split()[:ECHO_WORDS])
    words = len(TOKEN_WORDS)
    out += (TOKEN_WORDS[i % words] for i in range(max(0, tokens - len(out))))
    out[-1] = out[-1].rstrip() + "\n\n"
    return out


def pack_choices(pieces: tuple[str, ...]) -> tuple[bytes, ...]:
    """Each piece as a streamed chat chunk's choice (the tail of a chunk after its head)."""
    return tuple(
        b'{"index":0,"delta":{"content":' + orjson.dumps(p) + b'},"finish_reason":null}]}\n\n' for p in pieces
    )
