"""Prompts read ahead of the run's clock.

Why this module exists: a shard's prompts come from a generator that reads, parses and builds them
on the loop that times requests (~1.3 ms for a 1 MB line of a prompts file, ~0.5 ms for a 1 MB
synthetic prompt). For the first wave, all dispatched at once, that work would sit between the
first requests' sends: 16 such prompts hold the loop ~20 ms while the first of them is timed. So
the first wave is read before the clock starts, and served first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from oxconsole.workload import Prompt

__all__ = ["READ_AHEAD_CHARS", "ReadAhead"]

READ_AHEAD_CHARS = 64 << 20
"""The most prompt text read ahead (64 M characters: 64 prompts of 1 MB)."""


class ReadAhead:
    """`source`'s prompts, the first ones read by `fill` before they are asked for."""

    def __init__(self, source: Iterator[Prompt]) -> None:
        self._source = source
        self._ahead: deque[Prompt] = deque()
        self._error: Exception | None = None

    def fill(self, n: int, chars: int = READ_AHEAD_CHARS) -> int:
        """Read up to `n` prompts (stopping once `chars` characters are read); how many are held.
        An error reading them is raised where it was met, after the prompts before it."""
        read = 0
        while len(self._ahead) < n and read < chars and self._error is None:
            try:
                p = next(self._source, None)
            except Exception as e:
                self._error = e
                break
            if p is None:
                break
            self._ahead.append(p)
            read += p.input_chars
        return len(self._ahead)

    def held(self) -> tuple[Prompt, ...]:
        """The prompts read ahead and not yet served."""
        return tuple(self._ahead)

    def __iter__(self) -> Iterator[Prompt]:
        while self._ahead:
            yield self._ahead.popleft()
        if self._error is not None:
            raise self._error
        yield from self._source
