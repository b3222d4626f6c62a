"""The simulator's right and wrong answers: `[sim.models.X] quality = 0.8` is right 80% of the time.

Why this module exists: a cascade is measured by how often each model is right, so the simulator
must be right a known share of the time, the same way every run: whether an answer is right is a
hash of the run's seed, the model and the prompt's id, drawn against the model's `quality`. Right
is the prompt's `"expected"` answer, else (with `[quality] json_schema`) a minimal instance of the
schema; wrong is another answer, or text that is not JSON. With `expected_path`, right is JSON
holding the expected answer at that path (inside the schema's minimal instance when there is a
schema, as its type there says: a number, a boolean or a string) and wrong the same JSON holding
another value (another of the schema's `enum` there when it has one, so the answer still fits the
schema and only the value is wrong). What the simulator knows of the prompts (`Truth`: each
prompt's text -> its id and expected answer, the instance, the path) is built by the engine from
the workload and handed to the simulator's process in a file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from oxconsole.workload import Prompt, Workload
from oxconsole.workload.answerpath import with_value_at

__all__ = ["Truth", "minimal_instance", "schema_at", "truth_for"]

TRUTH_PROMPTS_MAX = 200_000
"""Prompts whose ids and expected answers the simulator is told at most (a test double's table;
prompts past it are drawn by their text, and answered as if they had no expected answer)."""

NOT_JSON = "I cannot answer that in JSON."
"""A wrong answer where the schema wants JSON."""


class Truth:
    """What the simulator knows to answer right: each prompt's (id, expected) by its text, a JSON
    instance of the workload's schema, and `expected_path` with what the schema says there."""

    def __init__(
        self,
        prompts: Mapping[str, tuple[str, str | None]],
        instance: str | None,
        path: tuple[str, ...] | None = None,
        at_path: Mapping[str, Any] | None = None,
    ) -> None:
        self.prompts = dict(prompts)
        self.instance = instance
        self.path = path
        """`[quality] expected_path`'s parts: a right answer is JSON with the expected value there."""
        self.at_path = dict(at_path or {})
        """The schema's subschema at the path (its `type` and `enum` say how to write a value)."""
        self._base: Any = None if instance is None else orjson.loads(instance)

    def answer(self, text: str, model: str, quality: float, seed: int) -> str | None:
        """The answer to a prompt's text from `model`, right with probability `quality`; None when
        there is nothing to be right about (no expected answer, no schema)."""
        pid, expected = self.prompts.get(text, (text, None))
        if expected is None and self.instance is None:
            return None
        right = draw(seed, model, pid) < quality
        if expected is not None and self.path is not None:
            value = typed(expected, self.at_path) if right else wrong_value(expected, self.at_path)
            return orjson.dumps(with_value_at(self._base, self.path, value)).decode()
        if expected is not None:
            return expected if right else f"not {expected}"
        return self.instance if right else NOT_JSON

    def to_json(self) -> bytes:
        return orjson.dumps(
            {"prompts": self.prompts, "instance": self.instance, "path": self.path, "at_path": self.at_path}
        )

    @classmethod
    def from_json(cls, data: bytes) -> Truth:
        """Read `to_json`'s bytes; ValueError when they are not such a file."""
        try:
            d = orjson.loads(data)
            prompts = {
                str(k): (str(v[0]), None if v[1] is None else str(v[1])) for k, v in d["prompts"].items()
            }
            instance = d["instance"]
            path = d.get("path")
            at_path = d.get("at_path")
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise ValueError(f"not a simulator truth file ({type(e).__name__})") from None
        return cls(
            prompts,
            instance if isinstance(instance, str) else None,
            tuple(str(p) for p in path) if isinstance(path, list) and path else None,
            at_path if isinstance(at_path, dict) else None,
        )


def draw(seed: int, model: str, pid: str) -> float:
    """A uniform number in [0, 1) fixed by the seed, the model and the prompt's id."""
    h = hashlib.blake2b(f"{seed}\x00{model}\x00{pid}".encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(h.digest(), "big") / 2**64


def answer_pieces(text: str) -> tuple[str, ...]:
    """An answer as streamed tokens (four characters a token, about as tokenizers cut)."""
    return tuple(text[i : i + 4] for i in range(0, len(text), 4)) or ("",)


def truth_for(w: Workload, prompts: Iterable[Prompt]) -> Truth | None:
    """What the simulator must know for this workload: None when no simulated model has a
    `quality` or the workload has no `[quality]`."""
    q = w.quality
    if q is None or not any(p.quality is not None for p in w.sim.values()):
        return None
    table: dict[str, tuple[str, str | None]] = {}
    for p in prompts:
        if len(table) >= TRUTH_PROMPTS_MAX:
            break
        text = last_user_text(p.messages)
        if text is not None:
            table.setdefault(text, (p.id, p.expected if q.expected else None))
    instance = None
    if q.json_schema is not None:
        instance = orjson.dumps(minimal_instance(q.json_schema)).decode()
    path = q.expected_path if q.expected else None
    at_path = schema_at(q.json_schema, path) if path is not None else None
    return Truth(table, instance, path, at_path)


def schema_at(schema: Any, path: tuple[str, ...]) -> dict[str, Any]:
    """The subschema that applies at a dotted path of the answer ({} when the schema does not say:
    through `properties` and `items`, a `$ref` or a combinator not followed)."""
    node = schema
    for part in path:
        if not isinstance(node, dict):
            return {}
        props = node.get("properties")
        items = node.get("items")
        prefix = node.get("prefixItems")
        if isinstance(props, dict) and part in props:
            node = props[part]
        elif part.isdigit() and isinstance(prefix, list) and int(part) < len(prefix):
            node = prefix[int(part)]
        elif part.isdigit() and isinstance(items, list) and int(part) < len(items):
            node = items[int(part)]
        elif part.isdigit() and isinstance(items, dict):
            node = items
        else:
            return {}
    return node if isinstance(node, dict) else {}


def typed(expected: str, at: Mapping[str, Any]) -> Any:
    """The expected answer written as the schema's type at the path says (a number, a boolean,
    null), else as the text it is."""
    kinds = at.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    enum = at.get("enum")
    if isinstance(enum, list):  # the enum's own value when one equals it (as the checks compare)
        for v in enum:
            if isinstance(v, str) and v.strip().casefold() == expected.strip().casefold():
                return v
            if not isinstance(v, str) and orjson.dumps(v).decode() == expected.strip().casefold():
                return v
    text = expected.strip().casefold()
    if "boolean" in kinds and text in ("true", "false"):
        return text == "true"
    if "null" in kinds and text == "null":
        return None
    if "integer" in kinds or "number" in kinds:
        try:
            v = orjson.loads(text)
        except orjson.JSONDecodeError:
            return expected
        if isinstance(v, int | float) and not isinstance(v, bool):
            return v
    return expected


def wrong_value(expected: str, at: Mapping[str, Any]) -> Any:
    """A value that does not equal the expected answer: another of the schema's `enum` there when
    it has one (the answer still fits the schema), else "not EXPECTED"."""
    right = typed(expected, at)
    enum = at.get("enum")
    if isinstance(enum, list):
        for v in enum:
            if v != right or type(v) is not type(right):
                return v
    if isinstance(right, bool):
        return not right
    if isinstance(right, int | float):
        return right + 1
    return f"not {expected}"


def last_user_text(messages: Any) -> str | None:
    """The text of a request's last message when it is a user's string (what identifies a prompt)."""
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return None
    c = last.get("content")
    return c if isinstance(c, str) else None


def minimal_instance(schema: Any, depth: int = 0) -> Any:
    """A small JSON value the schema accepts, for the usual schemas of structured output: objects
    with their required properties, arrays at their minimum length, enums and consts, strings and
    numbers at their bounds."""
    if not isinstance(schema, dict) or depth > 32:
        return {}
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return minimal_instance(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        return {k: minimal_instance(props.get(k, {}), depth + 1) for k in required if isinstance(k, str)}
    if kind == "array":
        return [
            minimal_instance(schema.get("items", {}), depth + 1) for _ in range(_count(schema, "minItems"))
        ]
    if kind == "string":
        return "x" * _count(schema, "minLength")
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return {}


def _count(schema: dict[str, Any], key: str) -> int:
    """A schema's count (`minItems`, `minLength`): an integer from 0 to 1000, else 0."""
    v = schema.get(key)
    return min(v, 1000) if type(v) is int and v > 0 else 0


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    lo = schema.get("minimum")
    xlo = schema.get("exclusiveMinimum")
    if isinstance(xlo, int | float) and not isinstance(xlo, bool):
        v: int | float = int(xlo) + 1 if integer else xlo + 1
    elif isinstance(lo, int | float) and not isinstance(lo, bool):
        v = lo
    else:
        v = 0
    return int(v) if integer else v
