"""Lines of a prompts file or a trace, each read within a bound.

Why this module exists: a file read a line at a time holds a whole line, however long it is; one
line of 2 GB (a file that is not JSONL, a dump gone wrong, a hostile file) took 4.3 GB to read and
parse. Every line of a prompts file (oxconsole's JSONL, OpenAI Batch input, ShareGPT) and of a
trace (Mooncake JSONL, Azure and BurstGPT CSV) is read here with `readline(bound + 1)`, so no more
than the bound is ever held, and a longer line is bad input naming the file, the line and the
bound (exit 2, at `validate` and before a run sends anything). The bounds and their reasons are
in docs/workload.md ("Prompts file").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Final

from oxconsole.workload.problems import WorkloadError, error

__all__ = ["LINE_MAX", "TRACE_LINE_MAX", "Line", "bounded_lines", "too_long"]

Line = bytes | bytearray
"""A line as read: a long one (over `_PIECE`) comes in the buffer it was read into, not copied."""

LINE_MAX: Final = 16 << 20
"""The longest line of a prompts file (and entry of a ShareGPT array), 16 MiB. A 250,000-token
prompt is about 1 MB of JSON (4 characters a token), 2-3 MB when its text is not ASCII and
written as `\\u` escapes; 16 MiB leaves room for long conversations and inlined images. Reading
one costs a few milliseconds and the bound itself in memory (docs/performance.md)."""

TRACE_LINE_MAX: Final = 1 << 20
"""The longest line of a trace, 1 MiB: a row is a timestamp and two lengths, plus in a Mooncake
trace a block id per 512 tokens, about 200 KB for the longest request a workload can ask for
(10 million tokens)."""

_PIECE: Final = 1 << 20
"""What is read at once of a long line: one read for a 250,000-token prompt."""


def size_words(n: int) -> str:
    """A bound in words: "16 MiB", "128 KiB"."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    return f"{n >> 10} KiB" if n % 1024 == 0 else f"{n:,} bytes"


def too_long(label: str, lineno: int, bound: int, what: str = "a line") -> WorkloadError:
    """`label: line N: expected a line of at most BOUND, got a longer one`."""
    return error(label, f"line {lineno}", f"{what} of at most {size_words(bound)}", "a longer one")


def bounded_lines(
    f: BinaryIO, label: str, bound: int = LINE_MAX, bad: list[WorkloadError] | None = None
) -> Iterator[tuple[int, Line]]:
    """(line number from 1, line) for every line of `f`, blank ones included, each held to at most
    `bound` bytes (plus its newline) while it is read. A longer line raises `too_long`; with `bad`
    given (a check that tells every bad line), it is added there and the rest of it skipped."""
    piece = min(_PIECE, bound + 1)
    lineno = 0
    while True:
        line: Line = f.readline(piece)
        if not line:
            return
        lineno += 1
        if len(line) == piece and not line.endswith(b"\n"):
            whole = _rest_of(f, line, bound)
            if whole is None:
                err = too_long(label, lineno, bound)
                if bad is None:
                    raise err
                bad.append(err)
                while (rest := f.readline(_PIECE)) and not rest.endswith(b"\n"):
                    pass
                continue
            line = whole
        yield lineno, line


def _rest_of(f: BinaryIO, start: Line, bound: int) -> bytearray | None:
    """A line longer than one piece, read a piece at a time into one buffer (no list of pieces
    joined: that would hold the line twice); None once it is longer than `bound`."""
    line = bytearray(start)
    while len(line) <= bound and not line.endswith(b"\n"):
        more = f.readline(min(_PIECE, bound + 1 - len(line)))
        if not more:
            break
        line += more
    if len(line) > bound and not line.endswith(b"\n"):
        return None
    return line  # a bytearray: parsed as bytes are, without a copy
