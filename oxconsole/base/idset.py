"""Sets of request ids in 8 bytes each, for journals and prompt files of millions of lines.

Why this module exists: `--resume` skips the ids already `ok` in a journal, `check_prompts` must see
that every id is unique, and `report` must know which ids repeat. A Python set of a million id
strings costs ~100 MB (a ~60-byte string and a slot each), and a resume held two or three of them,
so memory grew with the journal. Here an id is kept as its 64-bit hash in a sorted `array`: 8 bytes
an id, membership by binary search. Two different ids share a hash with probability 2^-64 a pair
(~3e-8 for a million ids against a million); where a wrong answer would matter, callers re-check
the few ids whose hashes repeat against the ids themselves.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet

__all__ = ["IdSet", "id_hash", "repeated"]


def id_hash(i: str) -> int:
    """The 64-bit key of an id (`hash` of a str: fast, stable within one process)."""
    return hash(i)


_CHUNK = 1 << 16


def sorted_keys(keys: array[int]) -> Iterator[int]:
    """The keys in ascending order, sorted in chunks of 64k and merged, so no list of them all is
    ever built (a list of a million ints costs ~40 MB; this costs a second copy of the array)."""
    if len(keys) <= _CHUNK:
        yield from sorted(keys)
        return
    runs = [array("q", sorted(keys[i : i + _CHUNK])) for i in range(0, len(keys), _CHUNK)]
    yield from heapq.merge(*runs)


def _sorted_unique(keys: array[int]) -> array[int]:
    out = array("q")
    append = out.append
    last: int | None = None
    for k in sorted_keys(keys):
        if k != last:
            append(k)
            last = k
    return out


def repeated(keys: array[int]) -> set[int]:
    """The keys that occur more than once (usually none, so the result is small)."""
    out: set[int] = set()
    last: int | None = None
    for k in sorted_keys(keys):
        if k == last:
            out.add(k)
        last = k
    return out


class IdSet(AbstractSet[str]):
    """An immutable set of ids held as sorted 64-bit hashes (8 bytes an id).

    Iterating yields the ids themselves, read again from where they came from (`reread`), so the
    strings never have to be held; without a source it cannot be iterated.
    """

    __slots__ = ("_keys", "_reread")

    def __init__(self, ids: Iterable[str] = (), *, reread: Callable[[], Iterator[str]] | None = None) -> None:
        keys = array("q")
        append = keys.append
        for i in ids:
            append(hash(i))
        self._keys = _sorted_unique(keys)
        self._reread = reread

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        keys = self._keys
        h = hash(item)
        j = bisect_left(keys, h)
        return j < len(keys) and keys[j] == h

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        if self._reread is None:
            raise TypeError("this IdSet keeps hashes only and has no source to read its ids from")
        return self._reread()

    @property
    def nbytes(self) -> int:
        return len(self._keys) * self._keys.itemsize

    def __repr__(self) -> str:
        return f"IdSet({len(self)} ids, {self.nbytes / 1e6:.1f} MB)"
