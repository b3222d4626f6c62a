"""Packing tasks into one request: the contract's message format, its answer's split, `[packing]`.

Why this module exists: the engine writes packs and splits their answers, and the simulator reads
packs and answers them; both must agree on one format to the byte, so the format lives here, in
pure functions below both (the simulator sits above the workload layer, the engine above it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oxconsole.workload.bounds import MAX_COUNT
from oxconsole.workload.problems import Problems
from oxconsole.workload.prompts.promptdata import Prompt
from oxconsole.workload.schema import PackingConfig, toml_keys
from oxconsole.workload.values import Table

__all__ = [
    "MAX_PACK_SIZE",
    "Pack",
    "describe_packing",
    "format_pack",
    "pack_head",
    "parse_pack",
    "parse_packing",
    "split_answer",
]

MAX_PACK_SIZE = 1000
"""The most tasks one request may carry (a pack's answer is N sections of one model's output)."""

_HEAD = (
    "Answer each task separately. Reply with exactly {n} sections, each starting with a line "
    '"### Answer K" (K = 1..{n}), in order, and nothing else.'
)
_HEAD_RE = re.compile(
    r"Answer each task separately\. Reply with exactly (\d+) sections, each starting with a line "
    r'"### Answer K" \(K = 1\.\.\1\), in order, and nothing else\.\n\n### Task 1\n'
)
_ANSWER_RE = re.compile(r"^### Answer (\d+)[ \t]*\r?$", re.MULTILINE)


def pack_head(n: int) -> str:
    """The instruction line of a pack of n tasks."""
    return _HEAD.format(n=n)


def format_pack(tasks: Sequence[str]) -> str:
    """The last user message of a pack: the instruction, then "### Task K" and each task's prompt,
    joined with one blank line."""
    parts = [pack_head(len(tasks))]
    parts.extend(f"### Task {k}\n{t}" for k, t in enumerate(tasks, 1))
    return "\n\n".join(parts)


def parse_pack(text: str) -> list[str] | None:
    """The tasks of a pack's message (as `format_pack` wrote them), or None when it is not one."""
    m = _HEAD_RE.match(text)
    if m is None:
        return None
    n = int(m.group(1))
    if n < 1:
        return None
    tasks: list[str] = []
    start = m.end()
    for k in range(2, n + 1):
        sep = f"\n\n### Task {k}\n"
        end = text.find(sep, start)
        if end < 0:
            return None
        tasks.append(text[start:end])
        start = end + len(sep)
    tasks.append(text[start:])
    return tasks


def split_answer(text: str | None, n: int) -> list[str] | None:
    """The n sections of a pack's answer, split on lines "### Answer K" (each stripped, its heading
    line left out); None unless there are exactly n, numbered 1..n in order, with nothing but
    blank space before the first."""
    if not text:
        return None
    heads = list(_ANSWER_RE.finditer(text))
    if len(heads) != n or text[: heads[0].start()].strip():
        return None
    out: list[str] = []
    for k, h in enumerate(heads, 1):
        if int(h.group(1)) != k:
            return None
        end = heads[k].start() if k < n else len(text)
        out.append(text[h.end() : end].strip())
    return out


@dataclass(frozen=True)
class Pack(Prompt):
    """A request carrying several tasks: its `id` is the pack's id, its `messages` the tasks' shared
    earlier messages and the packed user message, its `max_tokens` the tasks' sum."""

    tasks: tuple[Prompt, ...] = ()
    """The tasks, in the order of their sections."""


_PACKING = toml_keys(PackingConfig)


def parse_packing(errs: Problems, data: Any) -> PackingConfig:
    """The `[packing]` table, checked (every error recorded in `errs`)."""
    t = Table(errs, data, "packing", _PACKING, "[packing]")
    d = PackingConfig()
    if t.broken:
        return d
    tags = t.str_list("tags", "tag strings")
    return PackingConfig(
        size=t.int_("size", d.size, 1, MAX_PACK_SIZE, " (tasks per request; 1 = off)"),
        max_input_tokens=t.int_(
            "max_input_tokens", d.max_input_tokens, 0, MAX_COUNT, " (estimated input tokens; 0 = no cap)"
        ),
        tags=tuple(dict.fromkeys(tags)) if tags else (),
    )


def describe_packing(cfg: PackingConfig) -> list[str]:
    """`oxconsole validate`'s lines for `[packing]` (none when it is off)."""
    if cfg.size <= 1:
        return []
    cap = f" (closed early past ~{cfg.max_input_tokens:,} input tokens)" if cfg.max_input_tokens else ""
    which = "prompts tagged " + ", ".join(cfg.tags) if cfg.tags else "every prompt"
    return [
        "",
        "packing",
        f"  up to {cfg.size} tasks a request{cap}",
        f"  packed: {which}, with the same tag, model and earlier messages",
        "  one journal record per task; an answer that does not split is sent again task by task",
    ]
