"""Exact token counts with the model's own tokenizer (`[prompts] tokenizer = "PATH/tokenizer.json"`).

Why this module exists: without a tokenizer, lengths are estimated at about 4 characters a token,
which can be off by a third for code or other languages; a benchmark that asks for prompts of
200 tokens then measures prompts of 150 or 260. With a Hugging Face `tokenizer.json` (loaded by
the `tokenizers` package, optional extra `oxconsole[tokenizers]`, from the local file only:
nothing is ever downloaded) synthetic prompts are cut to exactly the tokens asked for, and every
prompt's input tokens are counted with it where an estimate is needed (the token budget, and
records whose server sent no `usage`). Counts are of the prompt's text: a server's chat template
adds its own few tokens around it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from oxconsole.workload.problems import show
from oxconsole.workload.values import Table

INSTALL = "pip install 'oxconsole[tokenizers]'"


class TokenizerError(Exception):
    """The tokenizer cannot be used: the package is missing, or the file is not a tokenizer."""


@lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Any:
    """The `tokenizers.Tokenizer` of a tokenizer.json file (loaded once a process)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerError(f"the tokenizers package ({INSTALL})") from None
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # the Rust side raises plain Exceptions for unreadable or bad files
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise TokenizerError(f"a Hugging Face tokenizer.json file ({first[:120]})") from None


def tokenizer_path(t: Table, base: Path) -> Path | None:
    """`[prompts] tokenizer`: resolved against the workload's folder, checked loadable."""
    if not t.has("tokenizer"):
        return None
    rel = t.str_("tokenizer", None, "a path to a tokenizer.json file")
    if not rel:
        return None
    path = base / Path(rel).expanduser()
    if not path.is_file():
        t.errs.add(
            "prompts.tokenizer", "an existing tokenizer.json file", f"{show(rel)} (no such file: {path})"
        )
        return None
    try:
        load_tokenizer(str(path))
    except TokenizerError as e:
        t.errs.add("prompts.tokenizer", str(e), show(rel))
        return None
    return path


Counter = Callable[[str], int]
"""Tokens of a text."""


def counter(path: Path | None) -> Counter | None:
    """A function counting the tokens of a text with the tokenizer at `path` (None without one)."""
    if path is None:
        return None
    tok = load_tokenizer(str(path))

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    return count


def exact_text(path: Path, text: str, n: int) -> str | None:
    """The start of `text` that is exactly `n` tokens (re-encoding the result gives `n`); None when
    `text` has fewer than `n` tokens.

    Cut at token `n` and decoded; where decoding and encoding again do not give the same count (a
    word split in two at the cut), one token more or less is tried until they do.
    """
    tok = load_tokenizer(str(path))
    ids = tok.encode(text, add_special_tokens=False).ids
    if len(ids) < n:
        return None
    for m in (n, n - 1, n + 1, n - 2, n + 2):
        if 0 <= m <= len(ids):
            cut: str = tok.decode(ids[:m])
            if len(tok.encode(cut, add_special_tokens=False).ids) == n:
                return cut
    last: str = tok.decode(ids[:n])  # pragma: no cover - a tokenizer that never round-trips
    return last
