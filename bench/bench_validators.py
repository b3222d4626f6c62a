"""Which JSON Schema validator `[quality] json_schema` uses: jsonschema against fastjsonschema.

Why this file exists: every answer of a run with `json_schema` is validated on the client, so the
validator's cost per answer is the feature's cost. This measures both libraries on a small and a
medium schema, on valid and invalid answers, in one run, and prints the ratio.

    python bench/bench_validators.py [--n 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import fastjsonschema
import jsonschema

SMALL: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"enum": ["yes", "no"]}, "score": {"type": "number"}},
    "required": ["label"],
}
MEDIUM: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "items", "address"],
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "name": {"type": "string", "minLength": 1, "maxLength": 80},
        "email": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        "address": {
            "type": "object",
            "required": ["city", "country"],
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2},
            },
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer", "minimum": 1},
                    "price": {"type": "number", "minimum": 0},
                },
            },
        },
    },
}
SMALL_OK = {"label": "yes", "score": 0.9}
SMALL_BAD = {"label": "maybe"}
MEDIUM_OK = {
    "id": 7,
    "name": "Ada",
    "email": "ada@example.org",
    "tags": ["a", "b", "c"],
    "address": {"street": "1 Way", "city": "Paris", "country": "FR"},
    "items": [{"sku": f"s{i}", "qty": i + 1, "price": 2.5} for i in range(5)],
}
MEDIUM_BAD = {**MEDIUM_OK, "items": [{"sku": "s1", "qty": 0}]}


def per_call_us(check: Callable[[Any], bool], doc: Any, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        check(doc)
    return (time.perf_counter() - t0) / n * 1e6


def with_jsonschema(schema: dict[str, Any]) -> Callable[[Any], bool]:
    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema)
    return lambda doc: bool(v.is_valid(doc))


def with_fast(schema: dict[str, Any]) -> Callable[[Any], bool]:
    f = fastjsonschema.compile(schema)

    def check(doc: Any) -> bool:
        try:
            f(doc)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return check


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    n = ap.parse_args().n
    print(f"{'case':<14} {'jsonschema us':>14} {'fastjsonschema us':>18} {'ratio':>7}")
    for name, schema, docs in (
        ("small", SMALL, (("valid", SMALL_OK), ("invalid", SMALL_BAD))),
        ("medium", MEDIUM, (("valid", MEDIUM_OK), ("invalid", MEDIUM_BAD))),
    ):
        a, b = with_jsonschema(schema), with_fast(schema)
        for kind, doc in docs:
            assert a(doc) == b(doc) == (kind == "valid")
            ta, tb = per_call_us(a, doc, n), per_call_us(b, doc, n)
            print(f"{name + ' ' + kind:<14} {ta:>14.2f} {tb:>18.2f} {ta / tb:>6.1f}x")


if __name__ == "__main__":
    main()
