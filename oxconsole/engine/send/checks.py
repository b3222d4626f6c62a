"""Whether one answer is valid under `[quality]`: JSON and its schema, the regex, the expected answer.

Why this module exists: the checks run once per ok answer on the client, so everything they need is
built once here and a check is a few calls: the schema compiled once a process by fastjsonschema
with its patterns and formats on RE2 (`workload/userschema.py`), the regexes on RE2
(`workload/userregex.py`: linear in the answer whatever the pattern), `expected_path`'s parts
(`workload/answerpath.py`). The judge, a request of its own, is sent by `engine/send/cascade.py`;
this module only reads its verdict.

The checks run in the order of `workload.quality.REASONS` and the first that fails names the
reason, so a cheap check spares a dear one (the judge comes last). `check` runs on the check
thread (`engine/send/checkthread.py`), and says which check it is in as it goes (`Stage`), so a
check stopped at its deadline, or one that raised, is charged to that check.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from oxconsole.engine.send.judgeprompt import verdict_line
from oxconsole.workload.answerpath import equals_expected, value_at
from oxconsole.workload.prompts.promptdata import Prompt
from oxconsole.workload.schema import QualityConfig
from oxconsole.workload.userregex import compile_pattern
from oxconsole.workload.userschema import compiled_schema

__all__ = ["Checker", "Stage", "answer_json", "prompt_text"]

_FENCE = re.compile(r"\A```[A-Za-z]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.DOTALL)
"""An answer wrapped in a Markdown code fence (```json ... ```): its inside is the JSON (the
project's own pattern: one lazy scan to the closing fence, linear)."""


def answer_json(text: str) -> tuple[bool, Any]:
    """(parsed, value): the answer read as JSON, a fence around it allowed."""
    body = text.strip()
    if body.startswith("```"):
        m = _FENCE.match(body)
        if m is None:
            return False, None
        body = m.group(1)
    try:
        return True, orjson.loads(body)
    except orjson.JSONDecodeError:
        return False, None


class Stage:
    """Which check an answer's `check` is in (a reason of `workload.quality.REASONS`), written as
    it goes and read by the caller when the check was stopped or raised."""

    __slots__ = ("reason",)

    def __init__(self) -> None:
        self.reason = "json"


class Checker:
    """The `[quality]` checks but the judge, ready to run: `check(prompt, text)` is the reason an
    answer fails (None: it passed them)."""

    def __init__(self, q: QualityConfig) -> None:
        self.config = q
        self._schema = compiled_schema(q.json_schema) if q.json_schema is not None else None
        self._regex = compile_pattern(q.regex) if q.regex is not None else None
        self._expected = q.expected
        self._path = q.expected_path
        self.judge = q.judge
        self.judge_pass = compile_pattern(q.judge.pass_) if q.judge is not None else None

    def check(self, prompt: Prompt, text: str | None, at: Stage | None = None) -> str | None:
        """Why the answer is not valid (`json`, `schema`, `regex`, `expected`), or None."""
        at = at or Stage()
        answer = text or ""
        expected = prompt.expected if self._expected else None
        path = self._path if expected is not None else None
        value: Any = None
        if self._schema is not None or path is not None:
            at.reason = "json"
            parsed, value = answer_json(answer)
            if not parsed:
                return "json"
            if self._schema is not None:
                at.reason = "schema"
                if not self._schema.valid(value):
                    return "schema"
        if self._regex is not None:
            at.reason = "regex"
            if not self._regex.search(answer):
                return "regex"
        if expected is not None:
            at.reason = "expected"
            if path is not None:
                found, v = value_at(value, path)
                if not found or not equals_expected(v, expected):
                    return "expected"
            elif answer.strip().casefold() != expected.strip().casefold():
                return "expected"
        return None

    def judged(self, verdict: str | None) -> bool:
        """Whether the judge's answer passes: `judge.pass` on its first non-empty line."""
        assert self.judge_pass is not None
        return verdict is not None and self.judge_pass.search(verdict_line(verdict))


def prompt_text(prompt: Prompt) -> str:
    """The prompt as the judge reads it: its last user message's text."""
    for m in reversed(prompt.messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            if isinstance(c, list):
                parts = [p.get("text") for p in c if isinstance(p, dict)]
                return " ".join(t for t in parts if isinstance(t, str))
    return ""
