"""Reading a results journal back, line by line, with one count of what was skipped and why.

Why this module exists: `oxconsole report` (and the HTML report, the exports, compare) and
`--resume` read the same file, and must agree on what in it is a record: a line torn by a crash,
a line that is not a record, a record without the times a run writes, and a record holding values
no run produces (`latency_ms: 1e308`, `t_sent` in the year 33658, 2^62 tokens, which would grow a
report's charts to gigabytes or overflow a sum). One reader and one `JournalIssues` serve both,
so a resumed run skips, and says it skips, exactly what `report` leaves out.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from oxconsole.base.figures import ITL, LATENCY, QUEUE, TTFOT, TTFT, journal_keys
from oxconsole.journal.identify import not_a_record
from oxconsole.journal.records import (
    OPTIONAL_COUNTS,
    RECORD_MS_MAX,
    RECORD_TOKENS_MAX,
    RUN_TIMES,
    RequestRecord,
    has_run_times,
)

__all__ = ["COST_MAX", "FUTURE_S", "JournalIssues", "implausible", "journal_items", "read_journal"]

FUTURE_S = 86400.0
"""How far past now a record's time may lie: clocks of two machines differ by less than a day."""

COST_MAX = 1e15
"""The largest cost of one request: 10^9 tokens at the largest price a workload accepts (1e6 per
million) is 1e9; far beyond it is a value no run produced."""

_MS_KEYS = (*journal_keys((LATENCY, TTFT, ITL)), "backoff_ms", TTFOT.journal)
"""Times a record keeps in ms, from 0 up (the queue's may be below 0: a clock's step)."""
_TOKEN_KEYS = ("input_tokens", "output_tokens", *OPTIONAL_COUNTS)
SHOWN_LINES = 5
"""Line numbers kept to show for each kind of skipped line."""


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def implausible(d: Mapping[str, Any], now: float) -> str | None:
    """The first value of a record (with run times) that no run produces, as `key=value`; None
    when every value is one a run could have written."""
    for key in RUN_TIMES:
        if d[key] > now + FUTURE_S:
            return f"{key}={d[key]!r}"
    for key in _MS_KEYS:
        v = d.get(key)
        if v is not None and not (_number(v) and 0 <= v <= RECORD_MS_MAX):
            return f"{key}={v!r}"
    q = d.get(QUEUE.journal)
    if q is not None and not (_number(q) and abs(q) <= RECORD_MS_MAX):
        return f"{QUEUE.journal}={q!r}"
    for key in _TOKEN_KEYS:
        v = d.get(key)
        if v is not None and not (_number(v) and 0 <= v <= RECORD_TOKENS_MAX):
            return f"{key}={v!r}"
    for part, whole in (("cached_tokens", "input_tokens"), ("reasoning_tokens", "output_tokens")):
        if d.get(part) is not None and d[part] > (d.get(whole) or 0):  # counted inside it
            return f"{part}={d[part]!r}"
    c = d.get("cost")
    if c is not None and not (_number(c) and 0 <= c <= COST_MAX):
        return f"cost={c!r}"
    return None


@dataclass(slots=True)
class JournalIssues:
    """What a reading of a journal skipped: filled in as it is read."""

    torn_last: bool = False
    """The last line was incomplete or invalid (a crash while writing it): skipped."""
    torn_line: int = 0
    invalid: int = 0
    """Invalid lines before the last one (skipped too; should not happen)."""
    invalid_lines: list[int] = field(default_factory=list)
    """Line numbers of the first few invalid lines."""
    records: int = 0
    no_times: int = 0
    """Records without the times a run writes (`RUN_TIMES`): typed or injected by hand, ignored."""
    refused: int = 0
    """Records with a value no run produces (`implausible`): left out."""
    refused_lines: list[str] = field(default_factory=list)
    """The first few of them: "line N: key=value"."""
    first_problem: tuple[int, str] | None = None
    """The first line that is not a record, and why (to tell a file that is not a journal)."""

    def skipped(self) -> int:
        """Every line left out, whatever the reason."""
        return self.invalid + int(self.torn_last) + self.no_times + self.refused

    def messages(self, path: str | os.PathLike[str]) -> list[str]:
        p = os.fspath(path)
        out: list[str] = []
        if self.torn_last:
            out.append(f"{p}: line {self.torn_line}: skipped an incomplete last line (torn)")
        if self.invalid:
            where = ", ".join(map(str, self.invalid_lines))
            more = ", ..." if self.invalid > len(self.invalid_lines) else ""
            out.append(f"{p}: skipped {self.invalid} invalid line(s) (line {where}{more})")
        if self.no_times:
            times = " and ".join(RUN_TIMES)
            out.append(
                f"{p}: ignored {self.no_times} record(s) without run times ({times}): not written by a run"
            )
        if self.refused:
            where = "; ".join(self.refused_lines)
            more = "; ..." if self.refused > len(self.refused_lines) else ""
            out.append(f"{p}: left out {self.refused} record(s) with values no run produces ({where}{more})")
        return out


NO_TIMES = "a record without run times"

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class _Bad:
    """A line that holds no record, and why (to tell a file that is not a journal)."""

    why: str


@dataclass(slots=True, frozen=True)
class _Left:
    """A record ignored (`NO_TIMES`) or refused (its odd value, `key=value`)."""

    why: str


def _parse(line: bytes, now: float, convert: Callable[[dict[str, Any]], T]) -> T | _Bad | _Left:
    """What `convert` makes of the record on a line, or why there is none to count."""
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _Bad("binary data" if b"\0" in line else "not JSON")
    problem = not_a_record(d)
    if problem is not None:
        return _Bad(problem)
    if not has_run_times(d):
        return _Left(NO_TIMES)
    odd = implausible(d, now)
    if odd is not None:
        return _Left(odd)
    try:
        return convert(d)
    except (ValueError, TypeError, KeyError):
        return _Bad("a JSON object with values of the wrong type")


def journal_items(
    path: str | os.PathLike[str],
    convert: Callable[[dict[str, Any]], T],
    issues: JournalIssues | None = None,
    on_skip: Callable[[int, bool], None] | None = None,
) -> Iterator[T]:
    """`convert` of each record of a journal, in file order, in constant memory; what is skipped
    is counted in `issues` (see `read_journal`). Raises OSError when the file cannot be read."""
    iss = issues if issues is not None else JournalIssues()
    pending = 0  # line number of an invalid line not yet known to be the last one
    now = time.time()

    def middle(line_no: int) -> None:
        iss.invalid += 1
        if len(iss.invalid_lines) < SHOWN_LINES:
            iss.invalid_lines.append(line_no)
        if on_skip is not None:
            on_skip(line_no, False)

    with open(path, "rb") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if pending:
                middle(pending)
                pending = 0
            item = _parse(line, now, convert)
            if isinstance(item, _Left):
                if item.why is NO_TIMES:
                    iss.no_times += 1
                else:
                    iss.refused += 1
                    if len(iss.refused_lines) < SHOWN_LINES:
                        iss.refused_lines.append(f"line {line_no}: {item.why}")
                continue
            if isinstance(item, _Bad):
                if iss.first_problem is None:
                    iss.first_problem = (line_no, item.why)
                pending = line_no
                continue
            iss.records += 1
            yield item
    if pending:
        iss.torn_last = True
        iss.torn_line = pending
        if on_skip is not None:
            on_skip(pending, True)


def read_journal(
    path: str | os.PathLike[str],
    issues: JournalIssues | None = None,
    on_skip: Callable[[int, bool], None] | None = None,
) -> Iterator[RequestRecord]:
    """Stream the records of a results journal, in file order, in constant memory.

    Invalid lines are skipped: a bad *last* line (torn by a crash) sets ``issues.torn_last``,
    any other bad line counts in ``issues.invalid``; ``on_skip(line_no, is_last)`` is called for
    each. Records without the times a run writes are ignored (``issues.no_times``), records with
    a value no run produces are left out (``issues.refused``). Blank lines are ignored. Raises
    OSError when the file cannot be opened or read.
    """
    return journal_items(path, RequestRecord.from_json_dict, issues, on_skip)
