"""`--set KEY=VALUE`: one dotted TOML key and a TOML value written into the raw document.

Why this module exists: overrides are applied to the parsed TOML before validation, so a value set
on the command line is checked exactly like one written in the file.
"""

from __future__ import annotations

import tomllib
from typing import Any

from oxconsole.workload.problems import WorkloadError, did_you_mean, join_key, show
from oxconsole.workload.values import is_int


def _split_assignment(arg: str) -> tuple[str, str] | None:
    """Split KEY=VALUE at the first '=' outside quotes (keys may be quoted: sim.models."a.b".ttft)."""
    quote = ""
    for i, ch in enumerate(arg):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return arg[:i], arg[i + 1 :]
    return None


def _parse_key(key: str) -> list[str] | None:
    """A dotted TOML key as its parts, parsed by tomllib itself; None when it is not a key."""
    if not key or "\n" in key or "\r" in key:
        return None
    try:
        doc: Any = tomllib.loads(f"{key} = 0")
    except (tomllib.TOMLDecodeError, RecursionError):
        return None
    parts: list[str] = []
    while isinstance(doc, dict):
        if len(doc) != 1:
            return None
        ((k, doc),) = doc.items()
        parts.append(k)
    return parts if doc == 0 and is_int(doc) else None


def _parse_value(text: str) -> tuple[bool, Any]:
    """Parse a --set value as TOML; a bare word that is not TOML becomes a string."""
    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        doc = tomllib.loads(f"v = {stripped}")
    except (tomllib.TOMLDecodeError, RecursionError):
        if stripped[0] in "[{\"'" or "\n" in stripped:
            return False, None
        return True, stripped
    if len(doc) != 1 or "v" not in doc:
        return False, None
    return True, doc["v"]


def _index(items: list[Any], part: str, where: str, done: str) -> int:
    """An array entry by its index (`models.0`) or, for tables with a `name`, by that name
    (`models.qwen.weight`); the index is checked against the length by the caller."""
    if part.isdigit():
        return int(part)
    names = [t.get("name") if isinstance(t, dict) else None for t in items]
    if part in names:
        return names.index(part)
    known = [n for n in names if isinstance(n, str)]
    hint = did_you_mean(part, known) if known else None
    also = f" or a name ({', '.join(show(n) for n in known)})" if known else ""
    raise WorkloadError(
        f"{where}: expected an array index (0, 1, ...){also} after {done or 'the top level'}, "
        f"got {show(part)}" + (f' (did you mean "{hint}"?)' if hint else "")
    )


def apply_override(raw: dict[str, Any], arg: str, label: str) -> None:
    """Apply one `--set KEY=VALUE` to the raw TOML dict (in place)."""
    where = f"{label}: --set {show(arg)}"
    split = _split_assignment(arg)
    if split is None:
        raise WorkloadError(f"{where}: expected KEY=VALUE (such as run.concurrency=200), got no '='")
    key_text, value_text = split[0].strip(), split[1]
    if not key_text:
        raise WorkloadError(f"{where}: expected a dotted key before '=' (such as run.concurrency), got none")
    parts = _parse_key(key_text)
    if parts is None:
        raise WorkloadError(f"{where}: expected a dotted key (such as models.0.weight), got {show(key_text)}")
    ok, value = _parse_value(value_text)
    if not ok:
        raise WorkloadError(
            f"{where}: expected a TOML value after '=' (such as 200, 1.5, true, \"90s\", [429, 500]), "
            f"got {show(value_text)}"
        )
    cur: Any = raw
    done = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            idx = _index(cur, part, where, done)
            if idx >= len(cur):
                raise WorkloadError(
                    f"{where}: expected an index below {len(cur)} for {done} "
                    f"(it has {len(cur)} entr{'y' if len(cur) == 1 else 'ies'}), got {idx}"
                )
            if last:
                cur[idx] = value
            else:
                cur = cur[idx]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                if part not in cur:
                    cur[part] = {}
                cur = cur[part]
        else:
            raise WorkloadError(f"{where}: expected {done} to be a table or an array, got {show(cur)}")
        done = join_key(done, part)
