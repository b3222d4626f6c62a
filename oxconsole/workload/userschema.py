"""A user's JSON Schema, made safe to compile once and to run on every answer.

Why this module exists: fastjsonschema compiles a schema to Python code that runs fast, but it
trusts the schema. A hostile one froze or killed `validate` and the engine: a 32 MB schema took
17 GB to compile; `{"$ref": "#"}` recursed on every answer; a remote `$ref` was fetched over the
network; a `pattern` ran Python's backtracking `re` on every answer. Here the schema is read with
bounds, checked, then compiled so that nothing of it runs unbounded:

- the file is at most `SCHEMA_BYTES_MAX` (checked before reading), nested at most
  `SCHEMA_DEPTH_MAX` deep, with at most `SCHEMA_VALUES_MAX` JSON values and `SCHEMA_NODES_MAX`
  subschemas: as much as providers' structured output accepts, and a bound on the code
  fastjsonschema writes and on its compile (`SCHEMA_NODES_MAX` says what it costs at worst);
- every `$ref` is local (`#...`), every `$id` below the root a plain name (`#name`), and the
  resolver is handed a refusing handler for every URL scheme besides: nothing is fetched;
- `$ref` cycles that never move into the answer (`{"$ref": "#"}`, `allOf` back to itself) are
  refused, and so is a schema whose subschemas apply to one value more than `SCHEMA_UNFOLD_MAX`
  times (refs that fan out: `a = anyOf[b, b]`, `b = anyOf[c, c]`, ...): both make every answer's
  check loop or explode. Recursion through properties and items is fine: it ends with the answer;
- every `pattern` and `patternProperties` key runs on RE2 (`workload/userregex.py`), with JSON Schema's `$`
  (the very end); each is handed to fastjsonschema as a placeholder, and the placeholders in the
  compiled code's `REGEX_PATTERNS` are replaced by the RE2 matchers (checked: fastjsonschema must
  have put exactly the placeholders there, or nothing is compiled);
- every `format` fastjsonschema knows is checked by a linear-time function given as a custom
  format (its own regexes have lookarounds and backtrack): `schemaformats.py`.

What stays superlinear is recursion whose branches multiply with the answer's depth (`oneOf` of
two branches that both recurse into `items`): the engine's check deadline bounds that.
"""

from __future__ import annotations

import copy
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import fastjsonschema
import orjson

from oxconsole.workload.schemaformats import format_checks
from oxconsole.workload.userregex import PatternError, SafeRegex, compile_pattern

__all__ = [
    "SCHEMA_BYTES_MAX",
    "SCHEMA_DEPTH_MAX",
    "SCHEMA_NODES_MAX",
    "SCHEMA_UNFOLD_MAX",
    "SCHEMA_VALUES_MAX",
    "SchemaError",
    "SchemaValidator",
    "check_schema",
    "compile_schema",
    "compiled_schema",
    "read_schema",
]

SCHEMA_BYTES_MAX: Final = 1 << 20
"""The largest schema file (1 MiB), checked before it is read: the 32 MB schema took 17 GB. What
is compiled is bounded by the counts below; bytes only bound the reading (long descriptions are
not compiled)."""

SCHEMA_DEPTH_MAX: Final = 64
"""JSON nesting of the schema document. fastjsonschema's compile recurses several Python frames a
level; 64 keeps it far from the recursion limit (providers accept 5 to 10 levels of objects)."""

SCHEMA_VALUES_MAX: Final = 30_000
"""JSON values (objects, arrays, strings, numbers...) in the schema document. fastjsonschema's code
and its compile grow with them: an `enum` costs about 45 us and 6 KB a value to compile."""

SCHEMA_NODES_MAX: Final = 5_000
"""Subschemas (every place compiled as a schema): as many properties as providers' structured
output takes. fastjsonschema writes 0.4 to 0.9 KB of Python a subschema, and Python's compile of
that code is most of the cost: at 5,000 the worst shapes take 2.3 to 6.6 s and 80 to 216 MB on a
loaded 2-core machine (`bench/bench_checks.py` F), once a process; 10,000 properties took 3.5 s
and 330 MB, 33,000 took 20 s and 1.1 GB."""

SCHEMA_PATTERNS_MAX: Final = 256
"""Distinct `pattern`s and `patternProperties` keys (a schema for structured output has a few)."""

SCHEMA_PATTERN_MEM: Final = 1 << 20
"""RE2's memory for each schema pattern, its program and DFA cache (1 MiB: `\\w{40}` fits, a
program of about 55,000 instructions): with `SCHEMA_PATTERNS_MAX`, at most 256 MiB however the
answers probe them."""

SCHEMA_PROGRAM_MAX: Final = 500_000
"""RE2 instructions of all the schema's patterns together (`^\\w{40}$` is 52,000): compiling them
takes well under a second (about 1 us an instruction with the class tables, measured)."""

SCHEMA_UNFOLD_MAX: Final = 10_000
"""How many times the subschemas of one place may apply to one value (through allOf, anyOf,
oneOf, not, if/then/else, dependencies and $ref, unfolded): past it one answer's check is a
combinatorial explosion (`a = anyOf[b, b]`, `b = anyOf[c, c]`... doubles per level)."""

_SINGLE: Final = frozenset(
    {
        "additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then",
        "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items",
    }
)  # fmt: skip
"""Keywords whose value is one schema (`items` may also be a list)."""
_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
"""Keywords whose value is a list of schemas."""
_MAP: Final = frozenset(
    {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"}
)
"""Keywords whose value maps names to schemas (`dependencies` may map to a list of names)."""
_SAME_VALUE: Final = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"}
)
"""Keywords whose schemas apply to the same value as their parent (not to a part of it)."""

_PLACEHOLDER: Final = "|oxconsole-pattern-{}"
"""What fastjsonschema sees in place of a user's pattern: valid, matching anything at once (its
compile-time check of `required` against `patternProperties` runs `re.search` on it), unique."""


class SchemaError(ValueError):
    """A schema refused: `expected` and `got` complete `FILE: quality.json_schema: expected ...,
    got SOURCE (GOT)`; `where` is the JSON pointer of the offending place ("" for the document)."""

    def __init__(self, expected: str, got: str, where: str = "") -> None:
        super().__init__(f"expected {expected}, got {got}" + (f" at {where}" if where else ""))
        self.expected = expected
        self.got = got
        self.where = where

    def detail(self) -> str:
        """`got` with the place in the schema, for the parenthesis after the source."""
        return f"{self.got} at {self.where}" if self.where else self.got


def read_schema(path: Path) -> Any:
    """The schema file's JSON, read only when it is at most `SCHEMA_BYTES_MAX`: SchemaError when
    larger (found before reading it), OSError when unreadable, orjson.JSONDecodeError when not JSON."""
    with path.open("rb") as f:
        size = _size(f.fileno())
        if size is not None and size > SCHEMA_BYTES_MAX:
            raise SchemaError(f"a JSON Schema file of at most {SCHEMA_BYTES_MAX >> 20} MiB", f"{size} bytes")
        data = f.read(SCHEMA_BYTES_MAX + 1)  # a pipe or a file growing as it is read: still bounded
    if len(data) > SCHEMA_BYTES_MAX:
        raise SchemaError(f"a JSON Schema file of at most {SCHEMA_BYTES_MAX >> 20} MiB", "a larger file")
    return orjson.loads(data)


def _size(fd: int) -> int | None:
    st = os.fstat(fd)
    return st.st_size if stat.S_ISREG(st.st_mode) else None


# --- the checks ----------------------------------------------------------------------------------


@dataclass
class _Facts:
    """What the walk found: the schema nodes by pointer, their same-value edges, the patterns."""

    nodes: dict[int, str] = field(default_factory=dict)
    """id() of each schema node -> its JSON pointer."""
    objects: dict[int, Any] = field(default_factory=dict)
    """id() of each schema node -> the node (kept alive while ids are compared)."""
    same: dict[int, list[int]] = field(default_factory=dict)
    """Same-value edges: a node -> the nodes that apply to the same value."""
    patterns: dict[str, str] = field(default_factory=dict)
    """Each pattern -> the pointer where it was first seen."""
    compiled: dict[str, SafeRegex] = field(default_factory=dict)
    """Each pattern, compiled (JSON Schema's `$`: the very end)."""
    formats: set[str] = field(default_factory=set)
    """The `format` names the schema uses."""
    anchors: dict[str, Any] = field(default_factory=dict)
    """Plain-name ids (`#name`) -> their node."""


def check_schema(schema: Any) -> _Facts:
    """Every check but compiling: bounds, local references, cycles, unfolding, patterns. SchemaError
    names the first problem."""
    _bounds(schema)
    if isinstance(schema, bool):
        return _Facts()
    if not isinstance(schema, dict):
        raise SchemaError("a JSON Schema (an object or a boolean)", _kind(schema))
    facts = _Facts()
    _walk_schemas(schema, facts)
    _no_same_value_cycle(facts)
    _unfold_bounded(facts)
    if len(facts.patterns) > SCHEMA_PATTERNS_MAX:
        raise SchemaError(f"at most {SCHEMA_PATTERNS_MAX} distinct patterns", f"{len(facts.patterns)}")
    program = 0
    for pattern, where in facts.patterns.items():
        try:
            rx = compile_pattern(pattern, dollar="end", max_mem=SCHEMA_PATTERN_MEM)
        except PatternError as e:
            raise SchemaError(e.expected, f"{_json(pattern)}: {e.why}", where) from None
        program += rx.program_size
        if program > SCHEMA_PROGRAM_MAX:
            raise SchemaError(
                f"patterns that compile to at most {SCHEMA_PROGRAM_MAX} RE2 instructions together",
                "more (counted up to this pattern)",
                where,
            )
        facts.compiled[pattern] = rx
    return facts


def _bounds(doc: Any) -> None:
    """Depth and size of the document, without recursion (a 1 MiB document may nest 500k deep)."""
    count = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > SCHEMA_VALUES_MAX:
            raise SchemaError(f"a JSON Schema of at most {SCHEMA_VALUES_MAX} JSON values", "more")
        if depth > SCHEMA_DEPTH_MAX:
            raise SchemaError(f"a JSON Schema nested at most {SCHEMA_DEPTH_MAX} deep", "deeper nesting")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _walk_schemas(root: dict[str, Any], facts: _Facts) -> None:
    """Every place fastjsonschema compiles as a schema: reached from the root through keywords, or
    named by a `$ref` (found as the walk goes)."""
    root_id = root.get("$id", root.get("id"))
    if isinstance(root_id, str) and "#" in root_id.rstrip("#") and not root_id.startswith("#"):
        raise SchemaError("a root $id without a fragment", _json(root_id), "#")
    todo: list[tuple[Any, str]] = [(root, "#")]
    refs: list[tuple[int, str, str]] = []
    while todo or refs:
        if not todo:  # every place reached by keywords is known: add what the refs name
            for source, ref, at in refs:
                target = _resolve(root, ref, facts, at)
                facts.same[source].append(id(target))
                todo.append((target, ref))
            refs.clear()
            continue
        node, where = todo.pop()
        if id(node) in facts.nodes:
            continue
        facts.nodes[id(node)] = where
        facts.objects[id(node)] = node
        if len(facts.nodes) > SCHEMA_NODES_MAX:
            raise SchemaError(f"a JSON Schema of at most {SCHEMA_NODES_MAX} subschemas", "more", where)
        facts.same[id(node)] = []
        if not isinstance(node, dict):
            if not isinstance(node, bool):
                raise SchemaError("a schema (an object or a boolean)", _kind(node), where)
            continue
        for key, value in _schema_children(node, where, facts):
            todo.append((value, key))
        named = node.get("$ref")
        if named is not None:
            if not isinstance(named, str):
                raise SchemaError("a $ref that is a string", _kind(named), where)
            if not named.startswith("#"):
                raise SchemaError(
                    "a local $ref (one starting with #: nothing is fetched)", _json(named), where
                )
            refs.append((id(node), named, where))


def _schema_children(node: dict[str, Any], where: str, facts: _Facts) -> Iterator[tuple[str, Any]]:
    """The subschemas of one schema (with their pointers), noting ids, patterns and same-value
    edges as they are met. fastjsonschema reads only `$ref` where there is one."""
    ident = node.get("$id", node.get("id"))
    if isinstance(ident, str) and where != "#":
        if not ident.startswith("#"):
            raise SchemaError(
                "a $id below the root that is a plain name (#name): one file, one base", _json(ident), where
            )
        facts.anchors[ident[1:]] = node
    if "$ref" in node:
        return
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        facts.patterns.setdefault(pattern, f"{where}/pattern")
    form = node.get("format")
    if isinstance(form, str):
        facts.formats.add(form)
    step = node.get("multipleOf")
    if isinstance(step, int | float) and not isinstance(step, bool) and not step > 0:
        # JSON Schema asks for more than 0; the validator would divide every answer by it
        # (a 1e-400 in a file reads as 0.0)
        raise SchemaError("a multipleOf greater than 0", _json(step), f"{where}/multipleOf")
    same = facts.same[id(node)]
    for key, value in node.items():
        at = f"{where}/{_escape(key)}"
        if key in _MAP and isinstance(value, dict):
            if key == "patternProperties":
                for p in value:
                    facts.patterns.setdefault(p, at)
            for name, sub in value.items():
                if key == "dependencies" and isinstance(sub, list):
                    continue
                if key in _SAME_VALUE:
                    same.append(id(sub))
                yield f"{at}/{_escape(name)}", sub
        elif key in _LIST and isinstance(value, list):
            for i, sub in enumerate(value):
                if key in _SAME_VALUE:
                    same.append(id(sub))
                yield f"{at}/{i}", sub
        elif key in _SINGLE and isinstance(value, dict | bool):
            if key in _SAME_VALUE:
                same.append(id(value))
            yield at, value


def _resolve(root: dict[str, Any], ref: str, facts: _Facts, where: str) -> Any:
    """The node a local `$ref` names (a JSON pointer or a plain name); SchemaError when none."""
    fragment = ref[1:]
    if fragment and not fragment.startswith("/"):
        if fragment in facts.anchors:
            return facts.anchors[fragment]
        raise SchemaError("a $ref to a place in the schema", _json(ref), where)
    node: Any = root
    previous = ""
    for raw in unquote(fragment).split("/")[1:] if fragment else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if previous == "patternProperties" and isinstance(node, dict):
            raise SchemaError("a $ref that does not go through patternProperties", _json(ref), where)
        previous = part
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaError("a $ref to a place in the schema", _json(ref), where)
    return node


def _no_same_value_cycle(facts: _Facts) -> None:
    """A cycle of same-value edges recurses on every answer without ever moving into it."""
    state: dict[int, int] = {}  # 1 = on the path, 2 = done
    for start in facts.same:
        if start in state:
            continue
        path = [start]
        its = [iter(facts.same[start])]
        state[start] = 1
        while its:
            nxt = next(its[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                its.pop()
                continue
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                shown = " -> ".join(facts.nodes[n] for n in cycle)
                raise SchemaError("no $ref cycle that applies to the same value again", f"the cycle {shown}")
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                its.append(iter(facts.same.get(nxt, ())))


def _unfold_bounded(facts: _Facts) -> None:
    """How many times the subschemas under each node apply to one value; refused past the bound."""
    memo: dict[int, int] = {}
    for start in facts.same:
        stack = [start]
        while stack:
            n = stack[-1]
            if n in memo:
                stack.pop()
                continue
            pending = [c for c in facts.same.get(n, ()) if c not in memo]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            total = 1 + sum(memo[c] for c in facts.same.get(n, ()))
            if total > SCHEMA_UNFOLD_MAX:
                raise SchemaError(
                    f"subschemas that apply to one value at most {SCHEMA_UNFOLD_MAX} times",
                    f"more than {SCHEMA_UNFOLD_MAX} through its $refs",
                    facts.nodes[n],
                )
            memo[n] = total


def _json(value: Any) -> str:
    """A value of the schema as its file writes it (a pattern's backslashes doubled, as there)."""
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        text = repr(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _escape(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


# --- compiling -----------------------------------------------------------------------------------


def _refuse_fetch(uri: str) -> Any:
    raise SchemaError("a local $ref", _json(uri))


_NO_FETCH: Final[Mapping[str, Callable[[str], Any]]] = {
    scheme: _refuse_fetch for scheme in ("", "http", "https", "ftp", "file", "data", "urn", "jar")
}
"""Handlers for fastjsonschema's resolver: a remote document is refused whatever asks for it (the
checks above already leave no $ref that could name one; this is the second lock)."""


class SchemaValidator:
    """A schema compiled once: `valid(value)` runs fastjsonschema's code, whose patterns and formats
    run in linear time."""

    def __init__(self, schema: Any) -> None:
        facts = check_schema(schema)
        prepared, placeholders = _with_placeholders(schema, facts)
        formats = format_checks(schema, facts.formats)
        try:
            fn = fastjsonschema.compile(prepared, handlers=_NO_FETCH, formats=formats, use_default=False)
        except SchemaError:
            raise
        except fastjsonschema.JsonSchemaDefinitionException as e:
            raise SchemaError("a valid JSON Schema", str(e)[:200]) from None
        except SyntaxError as e:  # Python's limit of 20 nested blocks: items in items in items...
            got = f"Python cannot compile its code ({e.msg})"
            raise SchemaError("a JSON Schema nested less deeply", got) from None
        except (ValueError, TypeError, KeyError, IndexError, re.error, RecursionError, OSError) as e:
            raise SchemaError("a valid JSON Schema", f"{type(e).__name__}: {str(e)[:200]}") from None
        inner = getattr(fn, "func", fn)
        table = inner.__globals__.get("REGEX_PATTERNS", {})
        if not isinstance(table, dict) or set(table) != set(placeholders):
            # fastjsonschema keeps its regexes elsewhere now, or compiled one the walk missed:
            # fail closed rather than run a backtracking regex on answers
            raise RuntimeError(
                "fastjsonschema's REGEX_PATTERNS is not as expected; refusing to run its regexes"
            )
        for key, pattern in placeholders.items():
            table[key] = facts.compiled[pattern]
        self._fn: Callable[[Any], Any] = fn

    def valid(self, value: Any) -> bool:
        """Whether the value validates. An answer nested too deep for the validator's recursion is
        not valid (its depth, not the schema, is the trouble)."""
        try:
            self._fn(value)
        except fastjsonschema.JsonSchemaValueException:
            return False
        except RecursionError:
            return False
        return True


def compile_schema(schema: Any) -> SchemaValidator:
    """The schema checked and compiled (SchemaError when refused)."""
    return SchemaValidator(schema)


def compiled_schema(schema: Any) -> SchemaValidator:
    """`compile_schema`, once a process for one schema: the workload's load (`validate`, a run's
    start) and the engine's checker in the same process share the compile, which takes seconds
    for a schema near the bounds. The workload keeps the schema as JSON (what goes to worker
    processes and Ray actors); each process compiles it once."""
    try:
        key = orjson.dumps(schema)
    except orjson.JSONEncodeError:  # a value JSON cannot hold (a TOML date): compiled as it is
        return compile_schema(schema)
    return _compiled(key)


@lru_cache(maxsize=2)
def _compiled(doc: bytes) -> SchemaValidator:
    return compile_schema(orjson.loads(doc))


def _with_placeholders(schema: Any, facts: _Facts) -> tuple[Any, dict[str, str]]:
    """A copy of the schema with each pattern of a schema node (its `pattern`, its
    `patternProperties` keys) replaced by a placeholder; the placeholders -> the patterns."""
    memo: dict[int, Any] = {}
    out = copy.deepcopy(schema, memo)  # memo: id(original) -> its copy
    if not facts.patterns:
        return out, {}
    keys = {p: _PLACEHOLDER.format(i) for i, p in enumerate(facts.patterns)}
    for ident in facts.objects:
        node = memo.get(ident)
        if not isinstance(node, dict) or "$ref" in node:
            continue
        p = node.get("pattern")
        if isinstance(p, str):
            node["pattern"] = keys[p]
        pp = node.get("patternProperties")
        if isinstance(pp, dict):
            node["patternProperties"] = {keys[k]: v for k, v in pp.items()}
    return out, {v: k for k, v in keys.items()}
