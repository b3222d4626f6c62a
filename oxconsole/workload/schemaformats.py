"""The `format`s of a user's JSON Schema, checked in linear time.

Why this module exists: fastjsonschema checks a `format` with its own regexes, and several of
them have lookarounds and backtrack, so a long answer could hold a check for seconds. Each format
a schema uses is handed to fastjsonschema as a custom format instead: its regex run on RE2
(`userregex.py`), or, where the regex has lookarounds, a function written without them. The rest
of making a schema safe (bounds, refs, patterns) is `userschema.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any, Final

import fastjsonschema
import fastjsonschema.draft04
import fastjsonschema.draft06
import fastjsonschema.draft07
import fastjsonschema.draft2019

from oxconsole.workload.userregex import compile_pattern

__all__ = ["REGEX_FORMAT_MAX", "format_checks"]


def _draft(schema: Any) -> type[Any]:
    """fastjsonschema's generator for this schema's `$schema` (its own rule)."""
    version = schema.get("$schema", "") if isinstance(schema, dict) else ""
    version = version if isinstance(version, str) else ""
    if "draft-04" in version:
        return fastjsonschema.draft04.CodeGeneratorDraft04
    if "draft-06" in version:
        return fastjsonschema.draft06.CodeGeneratorDraft06
    if "draft-07" in version:
        return fastjsonschema.draft07.CodeGeneratorDraft07
    return fastjsonschema.draft2019.CodeGeneratorDraft2019


def format_checks(schema: Any, used: set[str]) -> dict[str, Callable[[str], bool]]:
    """A linear-time check for each format the schema uses that fastjsonschema's generator for it
    knows (one it does not know is not checked, as before). Never empty: an empty `formats` would
    leave fastjsonschema's own regexes in force."""
    regexes: dict[str, str] = dict(_draft(schema).FORMAT_REGEXS)
    out: dict[str, Callable[[str], bool]] = {"regex": _is_regex}
    for name, regex in regexes.items():
        if name not in used:
            continue
        if name in _HAND_WRITTEN:
            out[name] = _HAND_WRITTEN[name]
        else:
            out[name] = _format_regex(regex)
    return out


@cache
def _format_regex(regex: str) -> Callable[[str], bool]:
    return compile_pattern(regex).match


REGEX_FORMAT_MAX: Final = 10_000
"""A `format: regex` value longer than this is not taken for a regex (compiling it is the check)."""


def _is_regex(value: str) -> bool:
    if len(value) > REGEX_FORMAT_MAX:
        return False
    try:
        re.compile(value)
    except Exception:
        return False
    return True


# email: ^(?!.*\.\..*@)[^@.][^@]*(?<!\.)@[^@]+\.[^@]+\Z
def _email(value: str) -> bool:
    local, at, domain = value.partition("@")
    if not at or not local or "@" in domain or local[0] == "." or local[-1] == ".":
        return False
    if "." not in domain[1:-1]:
        return False
    line = value.split("\n", 1)[0]  # the lookahead's `.` stops at a newline
    dots = line.find("..")
    return dots < 0 or line.find("@", dots + 2) < 0


# idn-hostname: ^(?!-)(xn--)?[a-zA-Z0-9][a-zA-Z0-9-_]{0,61}[a-zA-Z0-9]{0,1}\.(?!-)(xn--)?(X|Y)$
# The first lookahead never decides (what follows it starts with x or an alphanumeric); the second
# is "the label after the dot starts with xn-- or not with a dash".
_IDN_HOSTNAME = compile_pattern(
    r"^(xn--)?[a-zA-Z0-9][a-zA-Z0-9-_]{0,61}[a-zA-Z0-9]{0,1}\."
    r"(?:xn--(?:[a-zA-Z0-9\-]{1,50}|[a-zA-Z0-9-]{1,30}\.[a-zA-Z]{2,})"
    r"|[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,49}|[a-zA-Z0-9-]{0,29}\.[a-zA-Z]{2,}))$"
)

# duration: ^P(?!$)(?:[0-9]+W|(?:[0-9]+Y)?(?:[0-9]+M)?(?:[0-9]+D)?
#                    (?:T(?=[0-9])(?:[0-9]+H)?(?:[0-9]+M)?(?:[0-9]+S)?)?)\Z
# `(?!$)`: something follows the P; `T(?=[0-9])`: at least one of H, M, S follows the T.
_DURATION = compile_pattern(
    r"^P(?:[0-9]+W|(?:[0-9]+Y)?(?:[0-9]+M)?(?:[0-9]+D)?"
    r"(?:T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?)\Z"
)


def _duration(value: str) -> bool:
    return value != "P" and _DURATION.match(value)


_HAND_WRITTEN: Final[dict[str, Callable[[str], bool]]] = {
    "email": _email,
    "idn-hostname": _IDN_HOSTNAME.match,
    "duration": _duration,
}
"""Formats whose fastjsonschema regex has lookarounds, written without them (tests compare them
with the regex on every short string of a small alphabet)."""
