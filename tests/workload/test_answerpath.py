"""workload/answerpath.py: the value at a dotted path, compared with the expected answer."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from oxconsole.workload.answerpath import PathError, equals_expected, parse_path, value_at, with_value_at


def test_paths() -> None:
    assert parse_path("label") == ("label",)
    assert parse_path("items.0.name") == ("items", "0", "name")
    for bad in ("", "a..b", ".a", "a.", "x" * 1001, ".".join("a" * 65)):
        with pytest.raises(PathError):
            parse_path(bad)


ANSWER = orjson.loads(
    b'{"label": " Spam ", "items": [{"name": "Ada"}, {"name": "Bob"}], "codes": {"404": "missing"},'
    b' "n": 3, "f": 0.1, "ok": true, "none": null, "list": [1, "a"], "zero": 0}'
)


@pytest.mark.parametrize(
    ("path", "found", "value"),
    [
        ("label", True, " Spam "),
        ("items.0.name", True, "Ada"),
        ("items.1.name", True, "Bob"),
        ("items.2.name", False, None),
        ("items.01.name", False, None),
        ("items.-1.name", False, None),
        ("items.name", False, None),
        ("codes.404", True, "missing"),
        ("label.x", False, None),
        ("missing", False, None),
        ("none", True, None),
    ],
)
def test_value_at(path: str, found: bool, value: Any) -> None:
    assert value_at(ANSWER, parse_path(path)) == (found, value)


@pytest.mark.parametrize(
    ("found", "expected", "equal"),
    [
        (" Spam ", "spam", True),
        ("SPAM", " spam\n", True),
        ("spam", "ham", False),
        ("Straße", "STRASSE", True),
        (3, "3", True),
        (3, "3.0", True),
        (3, " 3 ", True),
        (3, "1e0", False),
        (100, "1e2", True),
        (0.1, "0.10", True),
        (0.1, "0.1000000000000000055511151231257827", False),
        (3, "three", False),
        (3, "true", False),
        (0, "false", False),
        (True, "true", True),
        (True, "TRUE ", True),
        (False, "false", True),
        (True, "1", False),
        (None, "null", True),
        (None, "", False),
        ("3", "3", True),
        ([1, "a"], '[1, "a"]', True),
        ([1, "a"], '[1.0, "a"]', True),
        ([True], "[1]", False),
        ({"a": 1}, '{"a": 1}', True),
        ({"a": 1}, '{"a": 2}', False),
        ([1], "not json", False),
    ],
)
def test_equality_rules(found: Any, expected: str, equal: bool) -> None:
    assert equals_expected(found, expected) is equal


def test_nan_and_infinity_are_no_numbers() -> None:
    assert not equals_expected(1.0, "NaN") and not equals_expected(1.0, "Infinity")


def test_the_simulators_right_answer_holds_the_value_at_the_path() -> None:
    assert with_value_at(None, ("label",), "spam") == {"label": "spam"}
    built = with_value_at({"score": 1}, parse_path("items.1.name"), "Bob")
    assert built == {"score": 1, "items": [None, {"name": "Bob"}]}
    assert value_at(built, parse_path("items.1.name")) == (True, "Bob")
    base = {"items": [{"name": "x"}]}
    assert with_value_at(base, parse_path("items.0.name"), "Ada") == {"items": [{"name": "Ada"}]}
    assert base == {"items": [{"name": "x"}]}
