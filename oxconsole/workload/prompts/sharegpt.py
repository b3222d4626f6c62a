"""ShareGPT files (`[prompts] format = "sharegpt"`): conversations in, one prompt per conversation out.

Why this module exists: `vllm bench serve` and guidellm users bring ShareGPT dumps (one JSON array,
or one conversation a line). Each conversation's first human turn becomes the prompt and the
length of the answer that follows it becomes `max_tokens` (about 4 characters a token, the
estimate used everywhere else), so a run asks for answers as long as the real ones were.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oxconsole.workload.bounds import MAX_TOKENS
from oxconsole.workload.problems import fail, json_object
from oxconsole.workload.prompts.boundedlines import Line, bounded_lines
from oxconsole.workload.prompts.jsonarray import array_objects
from oxconsole.workload.prompts.promptdata import Prompt

HUMAN = frozenset({"human", "user"})
ANSWER = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})


def sharegpt_entries(f: Any, label: str) -> Iterator[tuple[str, Line]]:
    """(where, raw object) for each conversation: `entry N` in a JSON array, `line N` in JSONL."""
    head = f.peek(64)[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        for n, raw in array_objects(f, label):
            yield f"entry {n}", raw
        return
    for lineno, line in bounded_lines(f, label):
        if not line.isspace():
            yield f"line {lineno}", line


def parse_conversation(raw: Line, where: str, label: str) -> Prompt | None:
    """The prompt of one conversation (id without pass suffix), or None when it has no human turn
    followed by an answer (such conversations are skipped, and counted). Raises WorkloadError
    naming the entry when it is not a ShareGPT conversation at all."""
    obj = json_object(raw, label, where, 'a JSON object with "conversations"')
    turns = obj.get("conversations")
    if type(turns) is not list:
        fail(label, f"{where}: conversations", 'an array of {"from", "value"} objects', turns)
    prompt: str | None = None
    answer: str | None = None
    for j, t in enumerate(turns):
        if type(t) is not dict or type(t.get("from")) is not str or type(t.get("value")) is not str:
            fail(label, f"{where}: conversations.{j}", 'an object with "from" and "value" strings', t)
        who = t["from"].lower()
        if prompt is None:
            if who in HUMAN and t["value"]:
                prompt = t["value"]
        elif who in ANSWER:
            answer = t["value"]
            break
    if prompt is None or not answer:
        return None
    pid = obj.get("id")
    sid = pid if type(pid) is str and pid else str(pid) if type(pid) is int else where.split()[-1]
    max_tokens = min(MAX_TOKENS, max(1, math.ceil(len(answer) / 4)))
    return Prompt(sid, [{"role": "user", "content": prompt}], max_tokens=max_tokens, input_chars=len(prompt))


def sharegpt_prompts(path: Path, label: str) -> Iterator[tuple[str, Prompt | None]]:
    """(where, prompt or None for a skipped conversation) for the whole file, streamed."""
    with open(path, "rb") as f:
        for where, raw in sharegpt_entries(f, label):
            yield where, parse_conversation(raw, where, label)
