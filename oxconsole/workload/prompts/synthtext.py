"""Synthetic prompt text: seeded words, deterministic per seed and prompt, at the cost of a copy.

Why this module exists: synthetic prompts (`[prompts] synthetic`) are built on the loop that
dispatches requests, one as each is sent. Short ones draw every word from their own seeded RNG (the
text they have always had); long ones (over 1,024 tokens, up to a model's whole context) would cost
a `random.choice` a word, ~170,000 for 250,000 tokens, so they are a few words of their own and a
slice of one seeded text drawn once (`_WordText`).
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
from array import array

from oxconsole.workload.schema import SyntheticConfig

__all__ = ["synthetic_text", "warm_text"]

_WORD_TEXT = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government number "
    "night point home water room mother area money story fact month lot right study book eye job word "
    "business issue side kind head house service friend father power hour game line end member law car "
    "city community name president team minute idea kid body information back parent face others level "
    "office door health person art war history party result change morning reason research girl guy "
    "moment air teacher force education river garden window market light table paper music energy "
    "model token engine signal memory cloud server request answer latency stream batch vector graph "
    "simple quick bright quiet gentle rapid careful early final green heavy local modern recent strong "
    "build write read learn measure compare explain describe summarize classify extract translate"
)
_WORDS = tuple(_WORD_TEXT.split())


_SHORT_CHARS = 4096
"""Synthetic prompts up to this many characters (1,024 tokens) draw every word from their own RNG."""
_HEAD_WORDS = 8
"""Words a long synthetic prompt draws for itself before its slice of the shared text: they make its
first block its own, so no two prompts share a prefix (a server's prefix cache finds none)."""
_BASE_WORDS = 65_536
"""Words of the seeded text long prompts are cut from (about 450 KB), repeated as often as needed."""


class _WordText:
    """One seeded run of words, repeated: the text every long synthetic prompt is a slice of.

    Why: a 250,000-token prompt drawn a word at a time is ~170,000 `random.choice` calls (tens of
    milliseconds on the loop that dispatches requests); a slice of this text costs a copy. The base
    is drawn once (tens of milliseconds, at the first long prompt or when the prompts are checked);
    longer texts repeat it, which costs a copy too. Built under a lock for runs whose prompts are
    built on several threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.base = ""
        self.starts = array("q")
        """Offset of each word in `base`, then len(base) (its words are joined by one space, and one
        ends it)."""
        self.text = ""

    def need(self, chars: int) -> str:
        """The repeated text, at least `chars` characters long."""
        with self._lock:
            if not self.base:
                words = random.Random("oxconsole-synthetic-text").choices(_WORDS, k=_BASE_WORDS)
                self.starts.extend(itertools.accumulate((len(w) + 1 for w in words), initial=0))
                self.base = " ".join(words) + " "
                self.text = self.base
            if len(self.text) < chars:
                self.text = self.base * -(-chars // len(self.base))
            return self.text

    def cut(self, start_word: int, chars: int) -> str:
        """The text from word `start_word` of the base on, at least `chars` characters, ending with a
        whole word."""
        self.need(0)
        starts = self.starts
        period = len(self.base)
        start = starts[start_word]
        laps, at = divmod(start + chars, period)
        end = laps * period + starts[bisect.bisect_left(starts, at + 1)] - 1  # the space after a word
        return self.need(end)[start:end]


_TEXT = _WordText()


def synthetic_text(seed: int, index: int | str, input_tokens: int) -> str:
    """Words of at least `input_tokens * 4` characters (ending with a whole word), deterministic per
    seed and index. Short prompts draw each word; long ones draw `_HEAD_WORDS` words, then take a
    slice of the shared text from a drawn word on, so they cost a copy, not a draw a word."""
    rng = random.Random(f"oxconsole-synthetic:{seed}:{index}")
    target = max(1, input_tokens * 4)
    if target <= _SHORT_CHARS:
        return " ".join(_draw_words(rng, target))
    head = " ".join(_draw_words(rng, 0, _HEAD_WORDS))
    return head + " " + _TEXT.cut(rng.randrange(_BASE_WORDS), target - len(head) - 1)


def warm_text(syn: SyntheticConfig) -> None:
    """Draw the shared text now, while the prompts are checked, when prompts may be long enough to
    need it: not at the first long prompt, on the loop that times requests."""
    spec = syn.input_tokens
    if not isinstance(spec, int) or (spec + syn.prefix_tokens) * 4 > _SHORT_CHARS:
        _TEXT.need(0)


def _draw_words(rng: random.Random, target: int, count: int = 0) -> list[str]:
    """Words drawn one by one until their joined length reaches `target` (or `count` words)."""
    words: list[str] = []
    length = -1
    while length < target or len(words) < count:
        w = rng.choice(_WORDS)
        words.append(w)
        length += len(w) + 1
    return words
