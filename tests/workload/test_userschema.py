"""workload/userschema.py: bounded reading, local refs only, no endless recursion, linear patterns
and formats."""

from __future__ import annotations

import itertools
import re
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson
import pytest

from oxconsole.workload import schemaformats, userschema
from oxconsole.workload.userregex import SafeRegex
from oxconsole.workload.userschema import (
    SCHEMA_BYTES_MAX,
    SCHEMA_NODES_MAX,
    SchemaError,
    compile_schema,
    read_schema,
)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to reach the network is recorded and fails."""
    tried: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        tried.append(repr(args[:2]))
        raise AssertionError("network access")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    return tried


# --- recursion -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {
            "anyOf": [{"type": "string"}, {"$ref": "#/definitions/a"}],
            "definitions": {"a": {"not": {"$ref": "#"}}},
        },
        {
            "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},
            "$ref": "#/definitions/a",
        },
        {"if": {"$ref": "#"}, "then": {"type": "string"}},
        {"dependencies": {"x": {"$ref": "#"}}},
    ],
)
def test_a_cycle_on_the_same_value_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError) as e:
        compile_schema(schema)
    assert "cycle" in e.value.got
    assert e.value.expected == "no $ref cycle that applies to the same value again"


def test_recursion_into_the_answer_is_fine() -> None:
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name"],
    }
    v = compile_schema(tree)
    assert v.valid({"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]})
    assert not v.valid({"name": "a", "children": [{"children": []}]})


def test_an_answer_too_deep_for_the_validator_is_invalid_not_a_crash() -> None:
    v = compile_schema({"type": "array", "items": {"$ref": "#"}})
    deep = orjson.loads("[" * 1000 + "]" * 1000)
    assert v.valid(deep) is False


def test_refs_that_fan_out_are_refused() -> None:
    defs: dict[str, Any] = {
        f"d{i}": {"anyOf": [{"$ref": f"#/definitions/d{i + 1}"}, {"$ref": f"#/definitions/d{i + 1}"}]}
        for i in range(20)
    }
    defs["d20"] = {"type": "integer"}
    start = time.perf_counter()
    with pytest.raises(SchemaError) as e:
        compile_schema({"definitions": defs, "$ref": "#/definitions/d0"})
    assert time.perf_counter() - start < 5  # unfolded, the answer's check alone took 9 s
    assert "apply to one value" in e.value.expected


# --- references ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "http://127.0.0.1:9/schema.json"},
        {"properties": {"a": {"$ref": "other.json#/definitions/x"}}},
        {"items": [{"$ref": "https://example.invalid/s.json#/a"}]},
        {"definitions": {"x": {"$ref": "file:///etc/passwd"}}, "$ref": "#/definitions/x"},
        {
            "properties": {
                "a": {"$id": "http://127.0.0.1:9/x.json", "properties": {"b": {"$ref": "#/definitions/c"}}}
            }
        },
        {"$id": "http://127.0.0.1:9/s.json#frag", "definitions": {"a": {}}, "$ref": "#/definitions/a"},
    ],
)
def test_nothing_is_fetched(schema: dict[str, Any], no_network: list[str]) -> None:
    with pytest.raises(SchemaError):
        compile_schema(schema)
    assert no_network == []


def test_local_refs_under_a_root_id_compile_without_network(no_network: list[str]) -> None:
    schema = {
        "$id": "http://127.0.0.1:9/root.json",
        "definitions": {"a": {"type": "string"}, "b": {"$id": "#named", "type": "integer"}},
        "properties": {"x": {"$ref": "#/definitions/a"}, "y": {"$ref": "#named"}},
    }
    v = compile_schema(schema)
    assert v.valid({"x": "s", "y": 1}) and not v.valid({"x": 1}) and not v.valid({"y": "s"})
    assert no_network == []


def test_the_resolver_refuses_remote_documents_itself(no_network: list[str]) -> None:
    """The second lock: fastjsonschema handed the refusing handlers fetches nothing."""
    with pytest.raises(SchemaError):
        fastjsonschema.compile({"$ref": "http://127.0.0.1:9/s.json"}, handlers=userschema._NO_FETCH)
    assert no_network == []


def test_compiling_leaves_the_users_schema_as_it_was() -> None:
    schema = {
        "$id": "http://x/s.json",
        "properties": {"a": {"$ref": "#/definitions/a"}},
        "definitions": {"a": {"pattern": "^a"}},
    }
    before = orjson.dumps(schema)
    compile_schema(schema)
    assert orjson.dumps(schema) == before


# --- size ----------------------------------------------------------------------------------------


def test_a_32_mb_schema_is_refused_at_once_with_bounded_memory(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    body = (
        b'{"type": "object", "properties": {'
        + b",".join(b'"p%d": {"type": "string"}' % i for i in range(1_300_000))
        + b"}}"
    )
    big.write_bytes(body)
    assert big.stat().st_size > 32 << 20
    code = textwrap.dedent(
        f"""
        import resource, sys, time
        from pathlib import Path
        from oxconsole.workload.userschema import read_schema, SchemaError
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        try:
            read_schema(Path({str(big)!r}))
        except SchemaError as e:
            print("refused", e.got)
        print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0].startswith("refused") and "bytes" in out[0]
    seconds, grown_kib = out[1].split()
    assert float(seconds) < 2, seconds  # nothing read: reading and parsing 32 MB took 17 GB
    assert int(grown_kib) < 4 * 1024  # nothing of the file was read


def test_the_bound_is_exact(tmp_path: Path) -> None:
    pad = b'{"description": "' + b"x" * (SCHEMA_BYTES_MAX - 19) + b'"}'
    at = tmp_path / "at.json"
    at.write_bytes(pad[: SCHEMA_BYTES_MAX - 2] + b'"}')
    assert at.stat().st_size == SCHEMA_BYTES_MAX
    assert isinstance(read_schema(at), dict)
    over = tmp_path / "over.json"
    over.write_bytes(b" " + at.read_bytes())
    with pytest.raises(SchemaError):
        read_schema(over)


def test_deep_and_wide_documents_are_refused() -> None:
    deep: Any = {"type": "string"}
    for _ in range(70):
        deep = {"items": deep}
    with pytest.raises(SchemaError, match="nested at most"):
        compile_schema(deep)
    with pytest.raises(SchemaError, match="JSON values"):
        compile_schema({"enum": list(range(200_000))})
    with pytest.raises(SchemaError, match="subschemas"):
        compile_schema({"properties": {f"p{i}": {} for i in range(SCHEMA_NODES_MAX)}})
    nested: Any = {"type": "string"}
    for _ in range(25):
        nested = {"type": "array", "items": nested}
    with pytest.raises(SchemaError, match="nested less deeply"):
        compile_schema(nested)


# --- patterns ------------------------------------------------------------------------------------


def test_hostile_patterns_run_in_linear_time() -> None:
    v = compile_schema(
        {
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}},
            "patternProperties": {"^([a-z]+-?)*-[0-9]$": {"type": "integer"}},
            "propertyNames": {"pattern": "^(x|x)+y?$|^name$|^([a-z]+-?)*-[0-9]$"},
        }
    )
    start = time.perf_counter()
    assert not v.valid({"name": "a" * 50_000 + "!"})
    assert not v.valid({"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-!": 1})
    assert v.valid({"name": "aaaa", "abc-def-1": 2})
    assert not v.valid({"abc-def-1": "not an integer"})
    assert time.perf_counter() - start < 2  # a bound for a hang (re: hours), not a timing


def test_the_compiled_code_holds_only_re2_matchers() -> None:
    v = compile_schema(
        {"properties": {"a": {"pattern": "b"}}, "patternProperties": {"c": {}}, "items": {"format": "email"}}
    )
    table = v._fn.func.__globals__["REGEX_PATTERNS"]  # type: ignore[attr-defined]
    assert table and all(isinstance(rx, SafeRegex) for rx in table.values())


def test_a_dollar_in_a_schema_pattern_is_the_very_end() -> None:
    v = compile_schema({"type": "string", "pattern": "^[$a]+$"})  # fastjsonschema alone refuses [$a]
    assert v.valid("a$a") and not v.valid("a\n") and not v.valid("b")


def test_an_unsupported_pattern_is_refused_with_its_place() -> None:
    with pytest.raises(SchemaError) as e:
        compile_schema(
            {"definitions": {"d": {"pattern": "(?=x)y"}}, "properties": {"a": {"$ref": "#/definitions/d"}}}
        )
    assert e.value.where == "#/definitions/d/pattern"
    assert "lookahead" in e.value.got


def test_patterns_are_bounded_in_number_and_size() -> None:
    with pytest.raises(SchemaError, match="distinct patterns"):
        compile_schema({"anyOf": [{"pattern": f"^a{i}$"} for i in range(300)]})
    with pytest.raises(SchemaError, match="RE2 instructions"):
        compile_schema({"anyOf": [{"pattern": rf"^\w{{40}}{i}$"} for i in range(20)]})


def test_required_names_against_pattern_properties_do_not_run_backtracking_re() -> None:
    start = time.perf_counter()
    compile_schema(
        {
            "patternProperties": {"^(a+)+$": {}},
            "additionalProperties": False,
            "required": ["a" * 40 + "!"],
        }
    )
    assert time.perf_counter() - start < 5  # a bound for a hang (re: hours), not a timing


# --- formats -------------------------------------------------------------------------------------


def _strings(alphabet: str, longest: int) -> list[str]:
    return ["".join(p) for n in range(longest + 1) for p in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize(
    ("name", "alphabet", "longest"),
    [
        ("email", "a.@\n", 7),
        ("idn-hostname", "ax-.n\n", 7),
        ("duration", "P1TWHMS\n", 6),
    ],
)
def test_hand_written_formats_equal_fastjsonschemas_regex(name: str, alphabet: str, longest: int) -> None:
    regex = re.compile(fastjsonschema.draft2019.CodeGeneratorDraft2019.FORMAT_REGEXS[name])
    ours = schemaformats._HAND_WRITTEN[name]
    for s in _strings(alphabet, longest):
        assert ours(s) == (regex.match(s) is not None), (name, s)


SAMPLES = [
    "2024-02-29T12:30:00Z", "2023-02-29T12:30:00Z", "٢٠٢٤-٠١-٠١T00:00:00Z", "2024-01-01t00:00:00+01:00",
    "2024-01-01", "12:30", "12:30:61", "1.2.3.4", "256.1.1.1", "::1", "2001:db8::8a2e:370:7334",
    "example.com", "-bad.com", "a" * 64 + ".com", "http://x", "x:y", "no scheme", "a@b.c",
    "123e4567-e89b-12d3-a456-426614174000", "/a/b~0", "0#", "1/x", "{x}", "{+x,y*}", "%zz",
    "xn--bcher-kva.example", "ab\n",
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(fastjsonschema.draft2019.CodeGeneratorDraft2019.FORMAT_REGEXS))
def test_formats_answer_as_fastjsonschema(name: str) -> None:
    regex = re.compile(fastjsonschema.draft2019.CodeGeneratorDraft2019.FORMAT_REGEXS[name])
    check = schemaformats.format_checks({}, {name})[name]
    for s in SAMPLES:
        assert check(s) == (regex.match(s) is not None), (name, s)


def test_a_long_value_in_a_format_is_fast() -> None:
    v = compile_schema({"type": "array", "items": {"type": "string", "format": "email"}})
    start = time.perf_counter()
    assert not v.valid(["a@" + ".a" * 50_000 + "@"])
    assert not v.valid([".." * 20_000 + "@" * 2])
    assert time.perf_counter() - start < 2  # a bound for a hang (re: hours), not a timing
