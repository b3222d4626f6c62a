"""User regular expressions run in linear time: Python's syntax and `re.search` answer, RE2's engine.

Why this module exists: `[quality] regex`, `judge.pass` and a schema's `pattern` are written by the
user and run on every answer, and Python's backtracking `re` takes exponential time on patterns as
plain as `^(a+)+$` (about an hour on a 35-character answer, doubling with each character). RE2
(google-re2) matches in time linear in the text, whatever the pattern, and never backtracks: 0.7 us
on that answer, 0.15 ms on 100,000 characters (`bench/bench_checks.py`).

The pattern is parsed by Python's own parser (so what Python calls invalid is invalid here, with
Python's message, and flags, escapes and classes mean what they mean in Python), then written out
in RE2's syntax node by node:

- character classes are written as explicit code point ranges, so `\\d`, `\\w` and `\\s` are
  Python's sets, not RE2's (RE2's are ASCII and its Unicode tables are of another version);
- `$` (without MULTILINE) is Python's "at the end, or before a newline at the end"; it has no
  zero-width form in RE2, so it is allowed only where nothing of the pattern follows it;
- `\\b` and `\\B` are RE2's, whose word characters are ASCII: the one difference from Python that
  is kept (Python also counts non-ASCII letters and digits as word characters);
- case-insensitive matching is RE2's simple case folding, made Python's where they differ (the
  dotted and dotless i);
- what has no linear-time equivalent is refused, naming the construct: lookahead and lookbehind,
  backreferences, conditional groups, atomic groups and possessive repeats, repeats above 1000;
- a lone surrogate in the text is read as U+FFFD (RE2 reads UTF-8).

Only whether the pattern matches is answered (`search`, `match`): no groups, no spans, so RE2 runs
its DFA with no capture bookkeeping.
"""

from __future__ import annotations

import importlib
import re
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import re2

__all__ = [
    "PATTERN_MAX",
    "PatternError",
    "SafeRegex",
    "compile_pattern",
    "expected_text",
]

_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

PATTERN_MAX: Final = 4096
"""The longest pattern accepted (characters). A pattern is a line of intent, not a grammar; RE2's
own bound (`RE2_MAX_MEM`) would refuse a far longer one only after compiling it."""

REPEAT_MAX: Final = 1000
"""RE2's largest repeat count (`{n,m}`), nested repeats included (their product)."""

RE2_MAX_MEM: Final = 8 << 20
"""Memory RE2 may use for one compiled pattern and its DFA cache (RE2's default): a pattern whose
program needs more is refused as too large; a search whose DFA outgrows it goes on, slower, on
RE2's NFA, still linear."""

NESTING_MAX: Final = 100
"""Groups nested at most this deep (Python's parser would recurse past its limit long before a
pattern needs more)."""

Dollar = Literal["python", "end"]
"""What `$` (without MULTILINE) means: `"python"`, at the end or before a final newline (Python
`re`); `"end"`, at the very end only (ECMA-262, as JSON Schema's `pattern` reads it)."""

_FLAG_I: Final[int] = _c.SRE_FLAG_IGNORECASE
_FLAG_M: Final[int] = _c.SRE_FLAG_MULTILINE
_FLAG_S: Final[int] = _c.SRE_FLAG_DOTALL
_FLAG_A: Final[int] = _c.SRE_FLAG_ASCII
_TYPE_FLAGS: Final[int] = _c.SRE_FLAG_ASCII | _c.SRE_FLAG_LOCALE | _c.SRE_FLAG_UNICODE
_MAXREPEAT: Final[int] = int(_c.MAXREPEAT)
_DOTTED_I: Final = ((0x49, 0x49), (0x69, 0x69), (0x130, 0x131))
"""I, i, İ, ı: one class to Python's case-insensitive matching (its extra cases), two to RE2's
simple case folding; the only literals on which the two disagree (tests compare every cased code
point)."""
_SURROGATES: Final = (0xD800, 0xDFFF)
_UNICODE_MAX: Final = 0x10FFFF
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_UNSUPPORTED_OPS: Final[dict[str, str]] = {
    "GROUPREF": "a backreference (\\1 or (?P=name))",
    "GROUPREF_EXISTS": "a conditional group (?(1)...|...)",
    "ATOMIC_GROUP": "an atomic group (?>...)",
    "POSSESSIVE_REPEAT": "a possessive repeat (*+, ++, ?+ or {m,n}+)",
}


class PatternError(ValueError):
    """A pattern refused, in the words of `FILE: KEY: expected EXPECTED, got PATTERN (WHY)`.

    `kind` is `"invalid"` (Python's parser refused it), `"unsupported"` (valid Python, but it has no
    linear-time equivalent) or `"too large"`.
    """

    def __init__(self, pattern: str, kind: str, why: str) -> None:
        super().__init__(f"{kind} pattern {pattern!r}: {why}")
        self.pattern = pattern
        self.kind = kind
        self.why = why

    @property
    def expected(self) -> str:
        """What the user should have written, for `expected ...`."""
        return expected_text(self.kind)


def expected_text(kind: str) -> str:
    """The `expected ...` part of a refused pattern's error."""
    if kind == "invalid":
        return "a valid regular expression (Python syntax)"
    if kind == "too large":
        return (
            f"a smaller regular expression (at most {PATTERN_MAX} characters, repeat counts up to "
            f"{REPEAT_MAX}, within RE2's memory bound)"
        )
    return "a regular expression without lookarounds, backreferences, atomic groups or possessive repeats"


@dataclass(frozen=True, slots=True)
class SafeRegex:
    """A compiled pattern: `search(text)` and `match(text)` answer as Python's `re` would, in time
    linear in the text."""

    pattern: str
    """The pattern as the user wrote it."""
    re2_pattern: str
    """What RE2 runs."""
    _regexp: Any
    _search: Callable[[Any, bytes, int, int], Sequence[tuple[int, int]]]

    @property
    def program_size(self) -> int:
        """RE2 instructions of the forward program (what compiling cost, and what it keeps)."""
        return int(self._regexp.programsize)

    def search(self, text: str) -> bool:
        """Whether the pattern matches anywhere in `text` (Python's `re.search(...) is not None`)."""
        data = _utf8(text)
        return self._search(_UNANCHORED, data, 0, len(data))[0][0] >= 0

    def match(self, text: str) -> bool:
        """Whether the pattern matches at the start of `text` (Python's `re.match(...) is not None`)."""
        data = _utf8(text)
        return self._search(_ANCHOR_START, data, 0, len(data))[0][0] >= 0


_ANCHOR: Final[Any] = getattr(re2, "_Anchor")  # noqa: B009 - RE2's anchors, not in its stubs
_UNANCHORED: Final[Any] = _ANCHOR.UNANCHORED
_ANCHOR_START: Final[Any] = _ANCHOR.ANCHOR_START


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")


def _options(max_mem: int) -> Any:
    o = re2.Options()
    o.max_mem = max_mem
    o.log_errors = False  # RE2 would print every refused pattern on stderr (the console's screen)
    o.never_capture = True
    return o


def compile_pattern(pattern: str, dollar: Dollar = "python", max_mem: int = RE2_MAX_MEM) -> SafeRegex:
    """The pattern, ready to match in linear time; PatternError when it is not a valid Python
    pattern, has no RE2 equivalent, or is too large (its RE2 program and DFA cache must fit in
    `max_mem` bytes)."""
    if len(pattern) > PATTERN_MAX:
        raise PatternError(pattern, "too large", f"{len(pattern)} characters")
    try:
        parsed = _parser.parse(pattern, 0)
    except re.error as e:
        raise PatternError(pattern, "invalid", str(e)) from None
    except (RecursionError, OverflowError) as e:
        raise PatternError(pattern, "too large", f"groups nested too deeply ({type(e).__name__})") from None
    flags = int(parsed.state.flags)
    emitter = _Emitter(pattern, dollar)
    try:
        translated = emitter.seq(list(parsed), flags, tail=True, depth=0)
    except RecursionError:
        raise PatternError(pattern, "too large", "groups nested too deeply") from None
    try:
        rx = re2.compile(translated, _options(max_mem))
    except re2.error as e:
        why = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        kind = "too large" if "too large" in why or "repetition size" in why else "unsupported"
        raise PatternError(pattern, kind, f"RE2: {why}") from None
    # the C++ object: Match() answers spans without building a match object (5 us less a search)
    inner: Any = getattr(rx, "_regexp")  # noqa: B009
    return SafeRegex(pattern, translated, rx, inner.Match)


# --- translation ---------------------------------------------------------------------------------


def _op(node_op: Any) -> str:
    return str(node_op)


class _Emitter:
    """Writes Python's parse tree out in RE2's syntax."""

    def __init__(self, pattern: str, dollar: Dollar) -> None:
        self.pattern = pattern
        self.dollar = dollar

    def refuse(self, why: str) -> PatternError:
        return PatternError(self.pattern, "unsupported", why)

    def seq(self, items: Sequence[Any], flags: int, tail: bool, depth: int) -> str:
        if depth > NESTING_MAX:
            raise PatternError(self.pattern, "too large", f"groups nested deeper than {NESTING_MAX}")
        last = len(items) - 1
        return "".join(
            self.node(op, av, flags, tail and i == last, depth) for i, (op, av) in enumerate(items)
        )

    def node(self, op: Any, av: Any, flags: int, tail: bool, depth: int) -> str:
        name = _op(op)
        if name == "LITERAL":
            return _literal(int(av), flags, self)
        if name == "NOT_LITERAL":
            return self.klass([self.user_range(int(av), int(av))], negate=True, flags=flags)
        if name == "ANY":
            return "(?s:.)" if flags & _FLAG_S else "[^\\n]"
        if name == "IN":
            return self.in_(av, flags)
        if name == "BRANCH":
            alts = av[1]
            return "(?:" + "|".join(self.seq(list(a), flags, tail, depth + 1) for a in alts) + ")"
        if name == "SUBPATTERN":
            _group, add, remove, sub = av
            if int(add) & _TYPE_FLAGS:  # (?a:...) / (?u:...) replace the other (Python's rule)
                flags &= ~_TYPE_FLAGS
            inner_flags = (flags | int(add)) & ~int(remove)
            return "(?:" + self.seq(list(sub), inner_flags, tail, depth + 1) + ")"
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, sub = int(av[0]), int(av[1]), av[2]
            body = self.seq(list(sub), flags, tail and hi <= 1, depth + 1)
            return "(?:" + body + ")" + self.quantifier(lo, hi)
        if name == "AT":
            return self.at(_op(av), flags, tail)
        if name in ("ASSERT", "ASSERT_NOT"):
            direction = int(av[0])
            if direction > 0:
                raise self.refuse("a lookahead (?=...) or (?!...)")
            raise self.refuse("a lookbehind (?<=...) or (?<!...)")
        if name in _UNSUPPORTED_OPS:
            raise self.refuse(_UNSUPPORTED_OPS[name])
        raise self.refuse(f"the construct {name}")

    def quantifier(self, lo: int, hi: int) -> str:
        # Lazy and greedy repeats find a match at the same places: only the span differs.
        if lo > REPEAT_MAX or (hi != _MAXREPEAT and hi > REPEAT_MAX):
            raise PatternError(self.pattern, "too large", f"a repeat count above {REPEAT_MAX}")
        if hi == _MAXREPEAT:
            return {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
        if lo == 0 and hi == 1:
            return "?"
        return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"

    def at(self, where: str, flags: int, tail: bool) -> str:
        if where == "AT_BEGINNING":
            return "(?m:^)" if flags & _FLAG_M else "\\A"
        if where == "AT_BEGINNING_STRING":
            return "\\A"
        if where == "AT_END_STRING":
            return "\\z"
        if where == "AT_END":
            if flags & _FLAG_M:
                return "(?m:$)"
            if self.dollar == "end":
                return "\\z"
            if tail:  # nothing follows: consuming the final newline answers as the zero-width `$`
                return "(?:\\n?\\z)"
            raise self.refuse("`$` with more of the pattern after it (write \\Z for the very end)")
        if where == "AT_BOUNDARY":
            return "\\b"
        if where == "AT_NON_BOUNDARY":
            return "\\B"
        raise self.refuse(f"the anchor {where}")

    def in_(self, items: Sequence[Any], flags: int) -> str:
        negate = False
        ranges: list[tuple[int, int]] = []
        for op, av in items:
            name = _op(op)
            if name == "NEGATE":
                negate = True
            elif name == "LITERAL":
                ranges.append(self.user_range(int(av), int(av)))
            elif name == "RANGE":
                ranges.append(self.user_range(int(av[0]), int(av[1])))
            elif name == "CATEGORY":
                ranges.extend(category_ranges(_op(av), bool(flags & _FLAG_A)))
            else:
                raise self.refuse(f"the class item {name}")
        return self.klass(ranges, negate, flags)

    def user_range(self, lo: int, hi: int) -> tuple[int, int]:
        """A range the user wrote: its ends may not be surrogates (a range across them is fine)."""
        s0, s1 = _SURROGATES
        if s0 <= lo <= s1 or s0 <= hi <= s1:
            raise self.refuse("a surrogate code point (RE2 reads UTF-8)")
        return lo, hi

    def klass(self, ranges: Iterable[tuple[int, int]], negate: bool, flags: int) -> str:
        """A class from its code point ranges (Python's sets, folded as Python folds)."""
        spans = _union(ranges)
        if flags & _FLAG_I and flags & _FLAG_A:
            spans = _union([*spans, *_ascii_case_swapped(spans)])
            return _class_text(spans, negate)
        if flags & _FLAG_I and any(lo <= b and a <= hi for lo, hi in spans for a, b in _DOTTED_I):
            spans = _union([*spans, *_DOTTED_I])
        text = _class_text(spans, negate)
        return f"(?i:{text})" if flags & _FLAG_I else text


def _literal(code: int, flags: int, emitter: _Emitter) -> str:
    if _SURROGATES[0] <= code <= _SURROGATES[1]:
        raise emitter.refuse("a surrogate code point (RE2 reads UTF-8)")
    ch = chr(code)
    if flags & _FLAG_I:
        if flags & _FLAG_A:  # ASCII folding only: RE2's (?i) would also fold K to the Kelvin sign
            if ch.isascii() and ch.isalpha():
                return f"[{ch.lower()}{ch.upper()}]"
            return _escape(code)
        if any(a <= code <= b for a, b in _DOTTED_I):
            return _class_text(_DOTTED_I, negate=False)
        return f"(?i:{_escape(code)})"
    return _escape(code)


def _escape(code: int) -> str:
    ch = chr(code)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    return f"\\x{{{code:X}}}"


def _class_text(spans: Sequence[tuple[int, int]], negate: bool) -> str:
    spans = _without_surrogates(spans)
    if not spans:
        return "(?s:.)" if negate else "[^\\x{0}-\\x{10FFFF}]"
    body = "".join(_escape(lo) if lo == hi else f"{_escape(lo)}-{_escape(hi)}" for lo, hi in spans)
    return f"[{'^' if negate else ''}{body}]"


def _union(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _complement(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in spans:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _UNICODE_MAX:
        out.append((nxt, _UNICODE_MAX))
    return out


def _without_surrogates(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    s0, s1 = _SURROGATES
    out: list[tuple[int, int]] = []
    for lo, hi in spans:
        if hi < s0 or lo > s1:
            out.append((lo, hi))
            continue
        if lo < s0:
            out.append((lo, s0 - 1))
        if hi > s1:
            out.append((s1 + 1, hi))
    return out


def _ascii_case_swapped(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in spans:
        for code in range(max(lo, 0x41), min(hi, 0x7A) + 1):
            ch = chr(code)
            if ch.isalpha():
                other = ord(ch.swapcase())
                out.append((other, other))
    return out


_ASCII_SETS: Final[dict[str, list[tuple[int, int]]]] = {
    "DIGIT": [(0x30, 0x39)],
    "WORD": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "SPACE": [(0x09, 0x0D), (0x20, 0x20)],
}


def category_ranges(category: str, ascii_only: bool) -> list[tuple[int, int]]:
    """Python's set for `\\d`, `\\w`, `\\s` and their negations, as code point ranges."""
    negated = category.startswith("CATEGORY_NOT_")
    base = category.removeprefix("CATEGORY_NOT_").removeprefix("CATEGORY_")
    if base not in _ASCII_SETS:
        raise PatternError(category, "unsupported", f"the category {category}")
    spans = _ASCII_SETS[base] if ascii_only else _unicode_set(base)
    return _complement(spans) if negated else list(spans)


def _unicode_set(base: str) -> list[tuple[int, int]]:
    return _unicode_sets()[base]


@lru_cache(maxsize=1)
def _unicode_sets() -> dict[str, list[tuple[int, int]]]:
    """Python's own Unicode `\\d`, `\\w` and `\\s`, read off Python's `re` over every code point,
    once per process, a plane at a time (0.1 to 0.2 s and 2 MB, the first time a pattern needs one)."""
    found: dict[str, list[tuple[int, int]]] = {"DIGIT": [], "WORD": [], "SPACE": []}
    rxs = {"DIGIT": re.compile(r"\d+"), "WORD": re.compile(r"\w+"), "SPACE": re.compile(r"\s+")}
    plane = 0x10000
    for start in range(0, _UNICODE_MAX + 1, plane):
        codes = array("I", range(start, start + plane))
        if start == 0:  # surrogates stand in place as U+FFFD (in none of the sets): offsets stay code points
            codes[_SURROGATES[0] : _SURROGATES[1] + 1] = array("I", [0xFFFD]) * (
                _SURROGATES[1] - _SURROGATES[0] + 1
            )
        text = codes.tobytes().decode("utf-32-le" if sys.byteorder == "little" else "utf-32-be")
        for base, rx in rxs.items():
            spans = found[base]
            for m in rx.finditer(text):
                lo, hi = start + m.start(), start + m.end() - 1
                if spans and spans[-1][1] + 1 == lo:  # a run across planes
                    spans[-1] = (spans[-1][0], hi)
                else:
                    spans.append((lo, hi))
    return found
