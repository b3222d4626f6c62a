"""Traces as prompt sources: Mooncake JSONL, Azure LLM inference CSV and BurstGPT CSV.

Why this module exists: real traffic arrives as a trace (when each request came, how long its
prompt and answer were), not at a constant rate. Each row becomes one request due at its
timestamp counted from the first row's (`Prompt.due`, seconds; the dispatcher replays it on an
absolute schedule, `run.trace_speed` times faster), with a prompt of the row's input length and
`max_tokens` of its output length. The file is streamed like every prompt source.

Prompts are synthetic words (`synthtext.py`, a copy each) of exactly `4 * input_length`
characters, the simulator's count. Mooncake's `hash_ids` name blocks of `BLOCK_TOKENS` tokens:
equal ids make equal text, so rows that share their first ids share a prompt prefix that a prefix
cache (the simulator's `prefix_cache`, vLLM's, a provider's) finds. Rows without ids get text of
their own. A bad row stops the check with its file, line and what was expected (exit 2), and so
does a row due more than a year after the first (`bounds.MAX_DURATION`: no run is that long).
"""

from __future__ import annotations

import csv
from collections import OrderedDict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson

from oxconsole.workload.bounds import MAX_DURATION, MAX_TOKENS
from oxconsole.workload.problems import error, fail
from oxconsole.workload.prompts.boundedlines import TRACE_LINE_MAX, bounded_lines, too_long
from oxconsole.workload.prompts.promptdata import Prompt
from oxconsole.workload.prompts.synthtext import synthetic_text

__all__ = ["BLOCK_TOKENS", "TRACE_FORMATS", "trace_prompts"]

TRACE_FORMATS: Final = ("mooncake", "azure-trace", "burstgpt")
BLOCK_TOKENS: Final = 512
"""Tokens per Mooncake hash id."""
_CHARS: Final = 4
"""Characters a token, as the simulator and the journal's estimates count them."""
_BLOCK_CACHE: Final = 1024
"""Block texts kept (2 KB each): a trace's shared prefixes are built once, not per row."""
_COLUMNS: Final = {
    "azure-trace": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}


class _Text:
    """Prompt text of exact lengths: one seeded block per hash id (kept, least recent dropped)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._blocks: OrderedDict[int | str, str] = OrderedDict()

    def block(self, hid: int | str) -> str:
        text = self._blocks.get(hid)
        if text is None:
            text = synthetic_text(self.seed, f"trace-block:{hid}", BLOCK_TOKENS)[: BLOCK_TOKENS * _CHARS]
            self._blocks[hid] = text
            if len(self._blocks) > _BLOCK_CACHE:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(hid)
        return text

    def prompt(self, row_id: str, tokens: int, hash_ids: list[Any] | None) -> str:
        chars = tokens * _CHARS
        if not hash_ids:
            return synthetic_text(self.seed, f"trace:{row_id}", tokens)[:chars]
        parts = []
        left = chars
        for hid in hash_ids:
            if left <= 0:
                break
            b = self.block(hid)
            parts.append(b if left >= len(b) else b[:left])
            left -= len(b)
        if left > 0:  # ids cover less than the length: the rest is the row's own
            parts.append(synthetic_text(self.seed, f"trace:{row_id}", left // _CHARS + 1)[:left])
        return "".join(parts)


def _count(label: str, where: str, key: str, v: Any) -> int:
    if isinstance(v, str):
        try:
            v = float(v) if "." in v else int(v)
        except ValueError:
            pass
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0 or v > MAX_TOKENS:
        fail(label, f"{where}: {key}", f"a token count between 0 and {MAX_TOKENS}", v)
    return int(v)


def _seconds(label: str, where: str, key: str, v: Any, scale: float) -> float:
    """A timestamp in seconds: a number (times `scale`) or, for CSV traces, an ISO datetime."""
    if isinstance(v, str):
        s = v.strip()
        try:
            v = float(s)
        except ValueError:
            try:
                return _datetime(s).timestamp()
            except ValueError:
                fail(label, f"{where}: {key}", "a number or a date and time (2023-11-16 18:15:46.68)", v)
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or abs(v) == float("inf"):
        fail(label, f"{where}: {key}", "a number", v)
    return float(v) * scale


def _datetime(s: str) -> datetime:
    """The Azure traces' `2023-11-16 18:15:46.6805900` (seven digits of fraction) and ISO forms."""
    head, dot, frac = s.partition(".")
    if dot:
        digits = frac[: len(frac) - len(frac.lstrip("0123456789"))]
        s = f"{head}.{digits[:6].ljust(6, '0')}{frac[len(digits) :]}"
    d = datetime.fromisoformat(s)
    return d if d.tzinfo is not None else d.replace(tzinfo=datetime.now().astimezone().tzinfo)


def _mooncake(f: Any, label: str) -> Iterator[tuple[str, float, int, int, list[Any] | None]]:
    for lineno, line in bounded_lines(f, label, TRACE_LINE_MAX):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise error(label, where, "a JSON object", f"invalid JSON ({e.msg.split(':')[0]})") from None
        if type(obj) is not dict:
            fail(label, where, 'a JSON object with "timestamp", "input_length", "output_length"', obj)
        for key in ("timestamp", "input_length", "output_length"):
            if key not in obj:
                raise error(label, f"{where}: {key}", "a number", "nothing (the key is required)")
        ids = obj.get("hash_ids")
        if ids is not None and (type(ids) is not list or any(type(i) not in (int, str) for i in ids)):
            fail(label, f"{where}: hash_ids", "an array of block ids (integers or strings)", ids)
        yield (
            where,
            _seconds(label, where, "timestamp", obj["timestamp"], 0.001),
            _count(label, where, "input_length", obj["input_length"]),
            _count(label, where, "output_length", obj["output_length"]),
            ids,
        )


def _text_lines(f: Any, label: str) -> Iterator[str]:
    """A CSV trace's lines as text, each within `TRACE_LINE_MAX` (a BOM before the first dropped)."""
    for lineno, line in bounded_lines(f, label, TRACE_LINE_MAX):
        try:
            yield line.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            raise error(label, f"line {lineno}", "UTF-8 text", "bytes that are not") from None


def _rows(f: Any, label: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, row) of a CSV trace; a field over the csv module's bound
    (`csv.field_size_limit()`, 131,072 characters unless a program changed it) is bad input
    naming its line, as a line over its bound is."""
    rows = csv.reader(_text_lines(f, label))
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as e:
            if "field limit" in str(e):
                raise too_long(label, rows.line_num, csv.field_size_limit(), "a field") from None
            raise error(label, f"line {rows.line_num}", "a CSV row", str(e)) from None
        yield rows.line_num, row


def _csv(f: Any, label: str, fmt: str) -> Iterator[tuple[str, float, int, int, list[Any] | None]]:
    rows = _rows(f, label)
    want = _COLUMNS[fmt]
    _, header = next(rows, (1, []))
    names = [h.strip() for h in header]
    missing = [c for c in want if c not in names]
    if missing:
        fail(label, "line 1", "a header naming the columns " + ", ".join(want), ",".join(names))
    cols = [names.index(c) for c in want]
    scale = 1.0
    for lineno, row in rows:
        if not row or all(not c.strip() for c in row):
            continue
        where = f"line {lineno}"
        if len(row) <= max(cols):
            fail(label, where, f"{len(names)} columns ({', '.join(want)} among them)", ",".join(row))
        ts, ins, outs = (row[i] for i in cols)
        yield (
            where,
            _seconds(label, where, want[0], ts, scale),
            _count(label, where, want[1], ins),
            _count(label, where, want[2], outs),
            None,
        )


def trace_prompts(path: Path, label: str, fmt: str, seed: int) -> Iterator[tuple[str, Prompt | None]]:
    """(where, prompt) for each row of a trace, its `due` counted from the first row's timestamp
    (a row before the first is due at once)."""
    text = _Text(seed)
    first: tuple[float, str] | None = None
    key = "timestamp" if fmt == "mooncake" else _COLUMNS[fmt][0]
    with open(path, "rb") as f:
        rows = _mooncake(f, label) if fmt == "mooncake" else _csv(f, label, fmt)
        for n, (where, t, ins, outs, ids) in enumerate(rows, 1):
            if first is None:
                first = (t, where)
            if t - first[0] > MAX_DURATION:  # a run would idle for it (and its ETA say nothing)
                raise error(
                    label,
                    f"{where}: {key}",
                    f"a time at most a year after the first row's ({first[1]})",
                    f"{(t - first[0]) / (365 * 86400.0):,.1f} years after it",
                )
            rid = f"row-{n}"
            body = text.prompt(rid, max(1, ins), ids)
            yield (
                where,
                Prompt(
                    rid,
                    [{"role": "user", "content": body}],
                    max_tokens=max(1, outs),
                    input_chars=len(body),
                    due=max(0.0, t - first[0]),
                ),
            )
