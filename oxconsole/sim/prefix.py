"""The simulator's prefix cache: which prompt prefixes a model has already served, in whole blocks.

Why this module exists: providers and servers (vLLM, SGLang) report the prompt tokens they found in
their KV cache (`usage.prompt_tokens_details.cached_tokens`), and clients need a server whose report
is exact to be tested against. A prompt is cut into blocks of `cache_block` tokens, counted as the
simulator counts them (4 characters a token for text, one id a token for token ids); each block is
known by a hash chained from the blocks before it, so equal hashes mean equal prefixes, as in
vLLM's automatic prefix caching. The cached tokens of a request are the blocks from its start whose
hashes are already remembered. Memory is bounded: at most `MAX_BLOCKS` hashes per model, the least
recently used forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

MAX_BLOCKS: Final = 262_144
"""Block hashes remembered per model (4M tokens at 16 a block; about 30 MB at worst)."""
CHARS_PER_TOKEN: Final = 4
"""How the simulator counts text tokens: (characters + 3) // 4."""


class PrefixCache:
    """Block hashes of the prompts served, least recently used first."""

    __slots__ = ("_blocks", "block", "cap")

    def __init__(self, block: int, cap: int = MAX_BLOCKS) -> None:
        self.block = max(1, block)
        """Tokens per block."""
        self.cap = max(1, cap)
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def serve(self, prompt: str | list[int]) -> tuple[int, int]:
        """Remember the prompt's whole blocks; returns (cached tokens: the whole blocks from its start
        that were already remembered, written tokens: the whole blocks that were not)."""
        if isinstance(prompt, str):
            width = self.block * CHARS_PER_TOKEN
            pieces: list[object] = [prompt[i : i + width] for i in range(0, len(prompt) - width + 1, width)]
        else:
            width = self.block
            pieces = [tuple(prompt[i : i + width]) for i in range(0, len(prompt) - width + 1, width)]
        blocks = self._blocks
        h = 0
        hits = 0
        missed = False
        for piece in pieces:
            h = hash((h, piece))
            if h in blocks:
                blocks.move_to_end(h)
                if not missed:
                    hits += 1
            else:
                missed = True
                blocks[h] = None
        while len(blocks) > self.cap:
            blocks.popitem(last=False)
        return hits * self.block, (len(pieces) - hits) * self.block
