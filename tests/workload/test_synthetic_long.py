"""Long synthetic prompts: built at the cost of a copy, deterministic per seed and prompt, of the
lengths short ones have, made of whole words, and never sharing a prefix."""

from __future__ import annotations

import random
import time
from pathlib import Path

from oxconsole.workload import iter_prompts
from oxconsole.workload.prompts.synthtext import synthetic_text
from tests.support.workloads import load_workload


def drawn_a_word_at_a_time(seed: int, index: int | str, input_tokens: int) -> str:
    """The rule short prompts keep (and long ones had): one `random.choice` a word until the text
    reaches 4 characters a token."""
    from oxconsole.workload.prompts.synthtext import _WORDS

    rng = random.Random(f"oxconsole-synthetic:{seed}:{index}")
    words: list[str] = []
    length = -1
    while length < max(1, input_tokens * 4):
        w = rng.choice(_WORDS)
        words.append(w)
        length += len(w) + 1
    return " ".join(words)


def test_short_prompts_keep_their_text() -> None:
    cases: list[tuple[int, int | str, int]] = [(0, 0, 1), (1, 5, 50), (7, "prefix", 300), (2, 3, 1024)]
    for seed, index, n in cases:
        assert synthetic_text(seed, index, n) == drawn_a_word_at_a_time(seed, index, n), (seed, index, n)


def test_long_prompts_are_whole_words_of_their_length() -> None:
    from oxconsole.workload.prompts.synthtext import _WORDS

    known = set(_WORDS)
    for i in range(30):
        for n in (1025, 40_000, 250_000):
            text = synthetic_text(3, i, n)
            assert n * 4 <= len(text) <= n * 4 + 16, (i, n, len(text))
            assert not text.endswith(" ") and "  " not in text, (i, n)
            assert set(text[:2000].split(" ")[:-1]) <= known and set(text[-2000:].split(" ")[1:]) <= known
    assert synthetic_text(3, 1, 250_000) == synthetic_text(3, 1, 250_000)
    assert synthetic_text(3, 1, 250_000) != synthetic_text(4, 1, 250_000)
    heads = {synthetic_text(0, i, 250_000)[:64] for i in range(300)}
    assert len(heads) == 300, "two long prompts share their first 16 tokens"


def test_long_prompts_cost_a_copy_not_a_draw_a_word() -> None:
    """A 250,000-token prompt drawn a word at a time is ~170,000 draws; a slice is a copy. Measured
    against the old rule on the same machine, so a loaded one slows both: 10 times cheaper at least
    (about 100 times when idle)."""
    synthetic_text(0, 0, 250_000)  # the shared text is drawn once
    t0 = time.process_time()
    for i in range(20):
        synthetic_text(0, i, 250_000)
    new = time.process_time() - t0
    t0 = time.process_time()
    for i in range(3):
        drawn_a_word_at_a_time(0, i, 250_000)
    old = (time.process_time() - t0) * 20 / 3
    assert new * 10 < old, (new, old)


def test_the_runs_prompts(tmp_path: Path) -> None:
    synthetic = {"count": 3, "input_tokens": 100000, "output_tokens": 4, "prefix_tokens": 2000}
    sets = {
        "endpoints": {"sim": {"base_url": "sim"}},
        "models.0.endpoint": "sim",
        "prompts": {"synthetic": synthetic},
    }
    w = load_workload("minimal", tmp_path, sets)
    ps = list(iter_prompts(w))
    texts = [p.messages[0]["content"] for p in ps]
    assert all(t.startswith(texts[0][:7000]) for t in texts), "the shared prefix comes first"
    assert all(p.input_chars == len(t) >= 102_000 * 4 for p, t in zip(ps, texts, strict=True)), [
        (p, t) for p, t in zip(ps, texts, strict=True) if not (p.input_chars == len(t) >= 102000 * 4)
    ][:5]
    assert len(set(texts)) == 3
