"""Telling a results journal from any other file, and saying what the file is instead.

Why this module exists: `oxconsole report` is given paths by hand, and the files nearest a journal
are the ones most often given by mistake (the workload, the prompts file, `summary.json`, a
binary). Such a file is bad input (exit 2) with a message naming it, what was expected and what
was found, not an empty summary or a traceback. A journal with a few bad lines (a torn last line)
is still a journal: only a file with no record at all is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from oxconsole.journal.records import RUN_TIMES

__all__ = ["SNIFF_BYTES", "NotAJournal", "not_a_journal", "not_a_record", "sniff"]

SNIFF_BYTES = 8192
"""How much of a file is looked at first: a binary file (often one long "line") is refused
before it is read whole, and the first bytes tell a workload or a summary apart."""


_TOML_LINE = re.compile(rb"^(\[\[?[A-Za-z_][\w.\"-]*\]\]?|[A-Za-z_][\w.-]*\s*=.*)$")
"""A TOML table header or `key = value`: the first line of a workload file."""


class NotAJournal(Exception):
    """The file given as a results journal holds no record a run writes: bad input (exit 2)."""


def not_a_record(d: Any) -> str | None:
    """Why a parsed journal line is not a request record (None when it is one), in words for the
    user of a file that may not be a journal at all."""
    if not isinstance(d, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(d), "a number")
        return f"JSON {'null' if d is None else kind}, not an object"
    missing = [k for k in ("id", "status") if k not in d]
    if missing:
        what = " and ".join(f'"{k}"' for k in missing)
        hint = " (a prompts file?)" if "prompt" in d or "messages" in d else ""
        return f"a JSON object without {what}{hint}"
    return None


def sniff(path: Path) -> None:
    """Refuse a binary file at once (NotAJournal); OSError when it cannot be read."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if b"\0" in head:
        raise NotAJournal(not_a_journal(path, 1, "binary data"))


def not_a_journal(path: Path, line_no: int, why: str) -> str:
    """The message for a file that is not a journal: its first line that is not a record, and why."""
    fields = ", ".join(f'"{k}"' for k in ("id", "status", *RUN_TIMES))
    return (
        f"{path}: not a results journal: expected one JSON object a line with {fields} (the "
        f"records a run writes, e.g. runs/NAME/results.jsonl), but line {line_no} is "
        f"{why}{_looks_like(path)}"
    )


def _looks_like(path: Path) -> str:
    """A hint for the files most often given by mistake: a workload, a summary."""
    try:
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError:
        return ""
    text = head.lstrip()
    if text[:1] == b"{" and b'"requests"' in head and b'"started_at"' in head:
        return " (it looks like a run summary: its journal is the .jsonl beside it)"
    first = text.split(b"\n", 1)[0].strip()
    if _TOML_LINE.match(first):
        return " (it looks like TOML, e.g. a workload file)"
    return ""
