"""Keys and header values taken out of whatever text may leave the process: error details, hints.

Why this module exists: a server may echo a key back in an error body in any encoding it likes
(as is, URL-encoded with or without `/` left alone, `+` for spaces, JSON-escaped with or without
`\\/`, HTML-escaped, base64 inside a Basic credential, hex), and a detail cut to its length limit
may keep only a piece of it. Replacing whole known forms misses the form nobody listed and the
piece the cut left, so every `PIECE`-character piece of every form is looked for, and each run of
text covered by pieces is replaced. Pieces are matched without regard to case (percent-escapes
and hex come in both cases; a false match costs a few characters of an error detail).

The same module decides which `--set` overrides carry header values: a resume hint repeats the
flags of a run, and a header given on the command line may be a credential.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import urllib.parse
from collections.abc import Iterable, Sequence

from oxconsole.base.safetext import valid_text

DETAIL_MAX = 200
"""Longest `error_detail` kept (characters)."""

PIECE = 8
"""Length of the pieces of a secret looked for: shorter runs of a key's characters are too common
in ordinary text to take out, and tell an attacker too little to matter (6 bits a character at
best, 48 bits for a whole piece)."""

SCAN_MAX = 8 * DETAIL_MAX
"""Characters of a detail examined at most: it is cut to its limit afterwards, so what lies
beyond this is never shown, and the scan stays cheap on a megabyte-long error body."""

_SECRET_RE = re.compile(r"(Bearer\s+|sk-|api[_-]?key[\"'=:\s]+)[A-Za-z0-9._\-]{4,}", re.IGNORECASE)
"""Anything shaped like a credential, for keys this process was not told about."""

REDACTED = "***"


def redact(text: str) -> str:
    """Remove anything that looks like a credential from an error detail."""
    return _SECRET_RE.sub(lambda m: m.group(1) + REDACTED, text)


def _base64_forms(raw: bytes) -> set[str]:
    """The key's base64 at each of the three alignments it may have inside a longer value (a
    Basic credential `user:KEY`): the characters that depend on the key's bytes alone, in the
    standard and the URL-safe alphabet."""
    out: set[str] = set()
    for shift in range(3):
        enc = base64.b64encode(b"\0" * shift + raw).decode()
        first = -(-8 * shift // 6)  # the first character whose 6 bits all lie in the key
        end = 8 * (shift + len(raw)) // 6  # past the last such character
        inner = enc[first:end]
        if inner:
            out |= {inner, inner.replace("+", "-").replace("/", "_")}
    return out


def secret_forms(secret: str) -> list[str]:
    """A secret as a server may echo it; longest first."""
    raw = secret.encode()
    forms = {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),  # Python's default: "/" left as it is
        urllib.parse.quote_plus(secret),
        urllib.parse.quote_plus(secret, safe="/"),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),  # JSON that escapes "/" (PHP, some proxies)
        html.escape(secret),
        raw.hex(),
        *_base64_forms(raw),
    }
    return sorted((f for f in forms if f), key=len, reverse=True)


class Redactor:
    """Takes every `PIECE`-character piece of the given secrets, in every form, out of a text."""

    __slots__ = ("_pieces", "_short")

    def __init__(self, secrets: Iterable[str]) -> None:
        pieces: set[str] = set()
        short: set[str] = set()
        for secret in secrets:
            if not secret:
                continue
            for form in secret_forms(secret):
                f = form.casefold()
                if len(f) <= PIECE:
                    short.add(f)
                else:
                    pieces.update(f[i : i + PIECE] for i in range(len(f) - PIECE + 1))
        self._pieces = frozenset(pieces)
        self._short = tuple(sorted(short, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        if not self._pieces and not self._short:
            return text
        folded = text.casefold()
        if len(folded) != len(text):  # casefold changed lengths (ß -> ss): match on lower()
            folded = text.lower()
            if len(folded) != len(text):
                folded = text
        hide = bytearray(len(text))
        pieces = self._pieces
        if pieces:
            for i in range(len(text) - PIECE + 1):
                if folded[i : i + PIECE] in pieces:
                    hide[i : i + PIECE] = b"\1" * PIECE
        for s in self._short:
            start = folded.find(s)
            while start >= 0:
                hide[start : start + len(s)] = b"\1" * len(s)
                start = folded.find(s, start + 1)
        if not any(hide):
            return text
        out: list[str] = []
        i, n = 0, len(text)
        while i < n:
            if hide[i]:
                while i < n and hide[i]:
                    i += 1
                out.append(REDACTED)
            else:
                j = hide.find(b"\1", i)
                j = n if j < 0 else j
                out.append(text[i:j])
                i = j
        return "".join(out)


@functools.lru_cache(maxsize=64)
def redactor(secrets: tuple[str, ...]) -> Redactor:
    """One `Redactor` per set of secrets (an endpoint's key and header values), built once."""
    return Redactor(secrets)


def scrub(text: str, secrets: Sequence[str] = (), limit: int = DETAIL_MAX) -> str:
    """An error detail safe to journal: on one line, every piece of each secret taken out, then
        anything shaped like a credential, and only then cut to `limit` characters (a cut first could
        leave a piece of a key too short to be recognised). Lone surrogates become U+FFFD here, so a
    detail is text any encoder takes (the journal, a worker's pipe, the control socket)."""
    text = " ".join(valid_text(text[:SCAN_MAX]).split())
    if secrets:
        text = redactor(tuple(secrets))(text)
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_HEADER_KEY = re.compile(r"(^|\.)headers(\.|$)")


def shown_override(override: str) -> str:
    """A `--set KEY=VALUE` as a hint may repeat it: a header's value (which may be a key) hidden."""
    key, sep, _value = override.partition("=")
    if sep and _HEADER_KEY.search(key.strip()):
        return f"{key}={REDACTED}"
    return override


def hides_a_value(overrides: Iterable[str]) -> bool:
    """Whether `shown_override` hid the value of any of these."""
    return any(shown_override(o) != o for o in overrides)
