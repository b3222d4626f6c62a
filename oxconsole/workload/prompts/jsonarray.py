"""The objects of a JSON file that is one big array, read a piece at a time (never loaded whole).

Why this module exists: ShareGPT dumps come as one JSON array of hundreds of megabytes; reading
them with one `orjson.loads` would hold the whole file and every parsed object in memory at once.
This reader finds where each top-level object starts and ends (strings and escapes respected) in
1 MiB reads and hands out each object's bytes, so memory stays one read plus one object, and an
object is at most `lines.LINE_MAX` long, as a line of a JSONL file is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from oxconsole.workload.problems import error
from oxconsole.workload.prompts.boundedlines import LINE_MAX, size_words

_STRUCTURE = re.compile(rb'[\[\]{}"\\]')
_GAP = b" \t\r\n,"
READ_SIZE = 1 << 20


# The scan's state: `pos` is where scanning resumes in `buf`; `skip_at` the byte after a backslash
# inside a string; `start` where the current object began (depth 2), else -1; `gap_from` where the
# text between objects began (depth 1).
def array_objects(f: BinaryIO, label: str) -> Iterator[tuple[int, bytes]]:
    """(entry number from 1, the object's bytes) for each object of the top-level array in `f`.

    Raises WorkloadError naming the entry for anything between objects that is not a comma or
    whitespace (a number, a string, a nested array), and for a file that is not one array."""
    buf, pos, depth, entry = b"", 0, 0, 0
    in_str = began = ended = False
    skip_at = start = gap_from = -1
    while True:
        chunk = f.read(READ_SIZE)
        if not chunk:
            break
        buf += chunk
        for m in _STRUCTURE.finditer(buf, pos):
            j = m.start()
            c = buf[j]
            if j == skip_at:
                continue
            if in_str:
                if c == 0x5C:  # backslash
                    skip_at = j + 1
                elif c == 0x22:
                    in_str = False
                continue
            if ended:
                raise error(label, "", "one JSON array", "more data after the closing ]")
            if not began:
                _opening(buf, j, label)
                began = True
                depth = 1
                gap_from = j + 1
                continue
            if c == 0x22:
                in_str = True
            elif c in (0x7B, 0x5B):
                if depth == 1:
                    if c == 0x5B or buf[gap_from:j].strip(_GAP):
                        raise error(label, f"entry {entry + 1}", "a JSON object", "something else")
                    start = j
                depth += 1
            else:
                depth -= 1
                if depth == 1:
                    entry += 1
                    if j + 1 - start > LINE_MAX:
                        raise _too_long(label, entry)
                    yield entry, buf[start : j + 1]
                    start = -1
                    gap_from = j + 1
                elif depth == 0:
                    if buf[gap_from:j].strip(_GAP):
                        raise error(label, f"entry {entry + 1}", "a JSON object", "something else")
                    ended = True
        cut = _kept_from(len(buf), start, gap_from, began and not ended)
        buf = buf[cut:]
        if len(buf) > LINE_MAX:  # one entry (or the space before it) longer than any line may be
            raise _too_long(label, entry + 1)
        pos = len(buf)
        skip_at -= cut
        if start >= 0:
            start -= cut
        gap_from -= cut
    _ending(began, ended, entry, label)


def _too_long(label: str, entry: int) -> Exception:
    return error(label, f"entry {entry}", f"an entry of at most {size_words(LINE_MAX)}", "a longer one")


def _opening(buf: bytes, j: int, label: str) -> None:
    """The first structural byte, at `j`, must be the array's `[` with only a BOM or blanks before."""
    if buf[j] != 0x5B or buf[:j].lstrip(b"\xef\xbb\xbf \t\r\n"):
        raise error(label, "", "a JSON array of objects or one JSON object a line", "other JSON")


def _kept_from(size: int, start: int, gap_from: int, in_array: bool) -> int:
    """Where the buffer is cut after a read: only an unfinished object (from `start`) or, inside
    the array, the gap between objects (from `gap_from`) is still needed."""
    cut = start if start >= 0 else (gap_from if in_array else size)
    return max(0, min(cut, size))


def _ending(began: bool, ended: bool, entry: int, label: str) -> None:
    if not began:
        raise error(label, "", "a JSON array of objects", "an empty file")
    if not ended:
        raise error(label, "", "a complete JSON array", f"the file ends inside it (after entry {entry})")
