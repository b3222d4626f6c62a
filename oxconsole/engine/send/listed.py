"""The models an endpoint lists (`GET /models`), and what a run's model names make of them.

Why this module exists: a server may answer a model name it does not serve (llama.cpp's server
answered "gpt-4o" with its Gemma), or refuse a name that differs from one it serves only by case
(vLLM's 404); either way the figures are of another model than the workload says, or none. Before
the run's clock each endpoint is asked once what it serves (`EndpointClient.listed`, bounded in
size and time); a model it does not list is a warning naming what it does list, closest first, and
the run goes on (some servers answer any name). A server without `/models` says nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson

from oxconsole.workload.problems import printable

__all__ = ["LIST_BYTES_MAX", "LIST_WITHIN_S", "closest_first", "did_you_mean", "model_names", "unlisted"]

LIST_BYTES_MAX: Final = 4 << 20
"""Bytes of a `/models` answer read at most: a list of thousands of models is well below."""
LIST_WITHIN_S: Final = 2.0
"""How long the answer may take (at most `run.timeout`), before the clock: a server slower than
that to list its models is not asked again, and nothing is said."""
NAMES_MAX: Final = 10_000
"""Names kept of one answer."""
NAME_CHARS_MAX: Final = 256
SHOWN: Final = 5
"""Names a warning shows, closest first."""


def model_names(body: bytes | bytearray) -> tuple[str, ...] | None:
    """The ids a `/models` answer lists (`{"data": [{"id": ...}]}`, or a bare list), or None when
    it is not such an answer. Names that are not printable text of at most 256 characters are left
    out: nothing a server sends reaches a terminal unchecked."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    data: Any = doc.get("data") if isinstance(doc, dict) else doc
    if not isinstance(data, list):
        return None
    names = []
    for item in data[:NAMES_MAX]:
        name = item.get("id") if isinstance(item, dict) else None
        if isinstance(name, str) and 0 < len(name) <= NAME_CHARS_MAX and name.isprintable():
            names.append(name)
    return tuple(dict.fromkeys(names))


def _likeness(name: str, other: str) -> float:
    return difflib.SequenceMatcher(None, name.lower(), other.lower()).ratio()


def closest_first(name: str, names: Iterable[str]) -> list[str]:
    """`names` from the most like `name` (case aside) to the least; ties in their own order."""
    return sorted(names, key=lambda other: -_likeness(name, other))


def did_you_mean(name: str, names: Sequence[str]) -> str | None:
    """The listed name `name` most likely meant: the same but for case, else one close enough."""
    same = [n for n in names if n.lower() == name.lower()]
    if same:
        return same[0]
    best = closest_first(name, names)[:1]
    return best[0] if best and _likeness(name, best[0]) >= 0.6 else None


def unlisted(endpoint: str, url: str, models: Iterable[str], names: Sequence[str]) -> list[str]:
    """A warning for each of `models` that the endpoint's list (`names`, from `url`) lacks."""
    out = []
    for model in models:
        if model in names:
            continue
        shown = closest_first(model, names)
        listed = ", ".join(f'"{n}"' for n in shown[:SHOWN]) or "none"
        more = f" and {len(shown) - SHOWN} more" if len(shown) > SHOWN else ""
        out.append(
            f'endpoints.{endpoint}: model "{printable(model)}" is not among the models GET {url} lists '
            f"({listed}{more}; closest first): requests name it anyway, and the server may answer "
            "with another model or refuse it"
        )
    return out
