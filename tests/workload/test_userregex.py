"""workload/userregex.py: Python's answers in linear time, and clear refusals."""

from __future__ import annotations

import re
import time

import pytest
import re2

from oxconsole.workload.userregex import PATTERN_MAX, PatternError, compile_pattern

HOSTILE = [
    (r"^(a+)+$", "a" * 35 + "!"),
    (r"^([A-Za-z]+\s?)+\.$", "The quick brown fox jumps over the lazy dog"),
    (r"^(a|aa)+$", "a" * 60 + "b"),
    (r"(.*a){25}", "a" * 24 + "b" * 100),
    (r"^(\w+\s?)*$", "word " * 20 + "!"),
    (r"(x+x+)+y", "x" * 5000),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"),
]


@pytest.mark.parametrize(("pattern", "text"), HOSTILE, ids=[p for p, _ in HOSTILE])
def test_hostile_patterns_finish_fast(pattern: str, text: str) -> None:
    rx = compile_pattern(pattern)
    for t in (text, (text * 3000)[:100_000]):  # and on a long answer (100 KB)
        start = time.perf_counter()
        found = rx.search(t)
        elapsed = time.perf_counter() - start
        # Python's re: hours on the short text; RE2: microseconds. A bound for a hang, not a timing
        assert elapsed < 2, (pattern, len(t), elapsed)
        assert isinstance(found, bool)


def test_hostile_answers_are_right() -> None:
    assert compile_pattern(r"^(a+)+$").search("a" * 35 + "!") is False
    assert compile_pattern(r"^(a+)+$").search("a" * 35) is True
    assert compile_pattern(r"^([A-Za-z]+\s?)+\.$").search("The quick brown fox.") is True
    assert compile_pattern(r"^([A-Za-z]+\s?)+\.$").search("The quick brown fox") is False


CORPUS_PATTERNS = [
    r"^(yes|no)\b", r"^(yes|no)$", r"(?i)^YES$", r"yes$", r"^$", r"", r"a|b", r"^\s*\d+\s*$",
    r"(?m)^no$", r"(?m)^x", r"(?s)a.b", r"a.b", r"\Ayes\Z", r"\d{3}-\d{4}", r"[^\W\d]+",
    r"(?a)\w+", r"(?a)\s", r"\s", r"[\s\S]", r"[^\s]", r"\W", r"(?i)[a-z]+", r"(?ai)k",
    r"(?i)k", r"[à-ÿ]", r"(?i)é", r"é", r"a{2,3}?c", r"(ab)*c", r"(?:a|b)+?c", r"x?$",
    r"colou?r", r"\bcat\b", r"\Bat", r"(?x) a b  # spaced", r"[.]", r"\.", r"[$]", r"\$",
    r"[\]\\-]", r"[-a]", r"\x00", r"\n$", r"^\n", r"(?i)[^a]", r"[^a]", r"\u00e9|\U0001F600",
    r"^.{3}$", r"(?s)^.{3}$", r"(a)|b", r"(?P<x>y)z", r"(?i:A)b", r"(?-i:a)", r"(?i)(?-i:a)B",
    r"[\d\s]+", r"[^\d\s]", r"\d", r"\D", r"[0-9]", r"\S+@\S+",
]  # fmt: skip
CORPUS_TEXTS = [
    "yes", "no", "YES", "yes\n", "yes\n\n", "\nyes", "no, because", "yes!", "yesterday", "", "\n",
    "a", "b", "ab", "a\nb", "axb", "123-4567", "٣٤٥-٦٧٨٩", "  42  ", "42\n", "Éé", "é", "ÉCOLE",
    "K", "k", "\u212a", "aac", "ababc", "color", "colour", "the cat sat", "concatenate", "bat",
    "$", ".", "\\", "]", "-", "\x00", "x\n", "\u00e9", "\U0001F600", "abc", "a\nc", "y", "yz",
    "Ab", "aB", "AB", "1 2", "\u3000", "\x0b", "\x1c", "\u2028", "mail@example.com", "x_y",
    "ünïcödé wörds", "١٢٣", "\u00a0", "İ",
]  # fmt: skip


@pytest.mark.parametrize("pattern", CORPUS_PATTERNS)
def test_same_answers_as_python(pattern: str) -> None:
    rx = compile_pattern(pattern)
    py = re.compile(pattern)
    for text in CORPUS_TEXTS:
        if ("\\b" in pattern or "\\B" in pattern) and not text.isascii():
            continue  # RE2's word boundaries are ASCII: the documented difference
        assert rx.search(text) == (py.search(text) is not None), (pattern, text, rx.re2_pattern)
        assert rx.match(text) == (py.match(text) is not None), (pattern, text, rx.re2_pattern)


@pytest.mark.parametrize(
    "pattern",
    [r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", r"[^\W\d]", r"(?a)\w", r"(?a)\s", r"(?a)\S", r"[^\S\n]"],
)
def test_classes_are_pythons_sets_over_every_code_point(pattern: str) -> None:
    """Runs of the class over every code point (a run starts and ends where the sets agree only
    if they are the same set; runs, not single matches, keep it to a second)."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    ours = re2.compile(f"(?:{compile_pattern(pattern).re2_pattern})+")
    theirs = re.compile(pattern + "+")  # each pattern is one class (and its flags)
    got = [m.span() for m in ours.finditer(every)]
    want = [m.span() for m in theirs.finditer(every)]
    assert got == want, next((g, w) for g, w in zip(got, want, strict=False) if g != w)


def test_word_boundary_is_ascii() -> None:
    """The one kept difference: RE2 counts only ASCII letters, digits and _ as word characters."""
    rx = compile_pattern(r"^(yes|no)\b")
    assert rx.search("yes, sure") and rx.search("no") and not rx.search("yesterday")
    assert rx.search("yesé") is True
    assert re.search(r"^(yes|no)\b", "yesé") is None


@pytest.mark.parametrize(
    ("pattern", "kind", "what"),
    [
        (r"(?=a)b", "unsupported", "lookahead"),
        (r"a(?!b)", "unsupported", "lookahead"),
        (r"(?<=a)b", "unsupported", "lookbehind"),
        (r"(?<!a)b", "unsupported", "lookbehind"),
        (r"(a)\1", "unsupported", "backreference"),
        (r"(?P<q>a)(?P=q)", "unsupported", "backreference"),
        (r"(a)?(?(1)b|c)", "unsupported", "conditional"),
        (r"(?>a+)b", "unsupported", "atomic"),
        (r"a++b", "unsupported", "possessive"),
        (r"a$b", "unsupported", "`$`"),
        (r"(a$)+", "unsupported", "`$`"),
        ("\ud800", "unsupported", "surrogate"),
        (r"a{1001}", "too large", "repeat"),
        (r"(?:a{100}){100}", "too large", "RE2"),
        (r"\w{500}", "too large", "RE2"),
        (r"(", "invalid", "missing )"),
        (r"a**", "invalid", "multiple repeat"),
        ("a" * (PATTERN_MAX + 1), "too large", "characters"),
        ("(" * 5000 + ")" * 5000, "too large", ""),
    ],
)
def test_refused_with_a_reason(pattern: str, kind: str, what: str) -> None:
    with pytest.raises(PatternError) as e:
        compile_pattern(pattern)
    assert e.value.kind == kind
    assert what in e.value.why
    assert e.value.expected.startswith("a ")


def test_dollar_at_the_very_end_for_schemas() -> None:
    python = compile_pattern("^a$")
    ecma = compile_pattern("^a$", dollar="end")
    assert python.search("a\n") and not ecma.search("a\n")
    assert ecma.search("a") and compile_pattern("a$b$", dollar="end").search("x") is False


def test_lone_surrogate_in_the_text() -> None:
    rx = compile_pattern(r"^x.y$")
    assert rx.search("x\ud800y") is True
    assert compile_pattern(r"\d").search("\udc00") is False


def test_refusing_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PatternError):
        compile_pattern(r"\w{500}")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_case_insensitive_literals_match_pythons_over_every_cased_code_point() -> None:
    import _sre  # type: ignore[import-not-found]

    cased = [c for c in range(0x20000) if not 0xD800 <= c <= 0xDFFF and _sre.unicode_iscased(c)]
    lower = {c: _sre.unicode_tolower(c) for c in cased}
    by_lower: dict[int, list[int]] = {}
    for c in cased:
        by_lower.setdefault(lower[c], []).append(c)
    extra = [0x130, 0x131, 0x17F, 0x212A, 0x212B, 0x3C2, 0x3D0, 0x3D1, 0x3D5, 0x3D6, 0x3F0, 0x3F1, 0x3F5]
    extra += [0x1E9B, 0x1FBE, 0x345, 0xB5, 0x1E9E, 0xDF]
    for c in cased:
        ours = compile_pattern("(?i)" + re.escape(chr(c)))
        py = re.compile("(?i)" + re.escape(chr(c)))
        for d in {
            c,
            lower[c],
            *by_lower[lower[c]],
            *extra,
            *(ord(x) for x in chr(c).upper() if len(chr(c).upper()) == 1),
        }:
            assert ours.search(chr(d)) == (py.search(chr(d)) is not None), (hex(c), hex(d))
