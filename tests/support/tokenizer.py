"""A small byte-level BPE tokenizer.json trained here on a few sentences, so that words split into
several tokens (for `[prompts] tokenizer` tests; needs the `tokenizers` package)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SENTENCES = [
    "the model reads a token stream and answers the request quickly",
    "time year people way day man thing woman life child world school",
    "simple quick bright quiet gentle rapid careful early final green heavy",
]


def build_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(SENTENCES, trainer)
    tok.save(str(path))
    return tok
