"""What `[quality]`'s hostile-input bounds cost and hold: RE2 against `re`, checks off the loop with a
deadline, schemas compiled at the bounds.

Why this file exists: the bounds' constants (`workload/userschema.py`, `workload/userregex.py`,
`engine/send/cascade.py` `CHECK_DEADLINE_S`) carry figures measured here, in one run each:

A. one check on RE2 (the project's `SafeRegex`) against Python's `re`, per pattern and text;
B. backtracking patterns: `re` on growing answers against RE2 on 100,000 characters;
C. one schema check: fastjsonschema alone against the compiled schema (RE2 patterns and formats);
D. where a check runs: inline on the loop against the check thread, one at a time and 5,000 at
   once;
E. a runaway check (a `oneOf` whose branches both recurse) stopped at `CHECK_DEADLINE_S`, and
   the loop's tick lag meanwhile;
F. compiling schemas at the bounds, each in a fresh process (seconds, peak memory growth), and
   what is refused at once;
G. the longest checks the deadline must let through: the largest schemas on large valid answers.

    python bench/bench_checks.py [--skip F]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import textwrap
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson

from oxconsole.engine.send.cascade import CHECK_DEADLINE_S
from oxconsole.engine.send.checkthread import CheckThread
from oxconsole.workload.userregex import compile_pattern
from oxconsole.workload.userschema import SCHEMA_NODES_MAX, compile_schema


def us(fn: Callable[[], object], n: int) -> float:
    """Microseconds a call, best of 5 rounds of n calls."""
    return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6


def search_us(rx: Any, text: str, n: int) -> float:
    """Microseconds a `search(text)` of a compiled pattern (Python's or ours)."""
    return us(lambda: rx.search(text), n)


def section(title: str) -> None:
    print(f"\n## {title}\n")


def per_check() -> None:
    section("A. One check, Python's re against RE2 (us, best of 5)")
    answer = orjson.dumps({"label": "positive", "reason": "the review praises the food " * 40}).decode()
    cases = [
        (r"^(yes|no)\b", "yes, because " + "the answer is right " * 10),
        (r"(?i)\bpositive\b", "lorem ipsum dolor sit amet " * 75 + " Positive."),
        (r"(?s)^\s*\{.*\}\s*$", answer),
        (r"\d{3}-\d{4}", "call me maybe " * 140 + "555-1234"),
        (r"^[A-Z][a-z]+$", "Paris"),
    ]
    print("| pattern | text chars | re | RE2 |")
    print("|---|---|---|---|")
    for pattern, text in cases:
        py, ours = re.compile(pattern), compile_pattern(pattern)
        print(
            f"| `{pattern}` | {len(text)} | {search_us(py, text, 20000):.2f} | "
            f"{search_us(ours, text, 20000):.2f} |"
        )
    t = time.perf_counter()
    compile_pattern(r"^(yes|no)$")
    print(f"\ncompile `^(yes|no)$`: {(time.perf_counter() - t) * 1e3:.2f} ms")
    t = time.perf_counter()
    compile_pattern(r"^\w+$")
    took = (time.perf_counter() - t) * 1e3
    print(f"compile `^\\w+$` (Python's Unicode classes already read): {took:.0f} ms")


def hostile() -> None:
    section("B. Backtracking patterns")
    print("| pattern | text | re | RE2 |")
    print("|---|---|---|---|")
    sentence = "The quick brown fox jumps over the lazy dog"
    for pattern, texts, big in (
        (r"^(a+)+$", ["a" * n + "!" for n in (18, 20, 22, 24)], "a" * 100_000 + "!"),
        (r"^([A-Za-z]+\s?)+\.$", [sentence[:n] for n in (26, 30, 33)], (sentence + " ") * 2326),
    ):
        py, ours = re.compile(pattern), compile_pattern(pattern)
        for text in texts:
            t = time.perf_counter()
            py.search(text)
            took = time.perf_counter() - t
            ours_us = search_us(ours, text, 1000)
            print(f"| `{pattern}` | {len(text)} chars | {took * 1e3:.1f} ms | {ours_us:.2f} us |")
        print(f"| `{pattern}` | {len(big):,} chars | - | {search_us(ours, big, 10) / 1000:.2f} ms |")


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"enum": ["positive", "negative", "neutral"]},
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "maxLength": 2000},
        "ticket": {"type": "string", "pattern": "^[A-Z]{2,4}-[0-9]+$"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z-]+$"}, "maxItems": 10},
    },
    "required": ["label", "score", "reason"],
    "additionalProperties": False,
}
ANSWER = orjson.dumps(
    {
        "label": "positive",
        "score": 4,
        "reason": "The food was great and the staff friendly. " * 5,
        "ticket": "ABC-1234",
        "email": "someone@example.com",
        "tags": ["food", "staff", "value-for-money"],
    }
).decode()


def schema_check() -> None:
    section("C. One schema check (orjson.loads and validate)")
    plain = fastjsonschema.compile(SCHEMA)
    ours = compile_schema(SCHEMA)
    value = orjson.loads(ANSWER)
    print(f"answer: {len(ANSWER)} chars")
    print(f"- orjson.loads: {us(lambda: orjson.loads(ANSWER), 20000):.2f} us")
    print(f"- fastjsonschema alone (Python re): {us(lambda: plain(value), 20000):.2f} us")
    print(f"- compiled here (RE2 patterns and formats): {us(lambda: ours.valid(value), 20000):.2f} us")


def where() -> None:
    section("D. Where a check runs: per check, awaited from the loop (us)")
    ours = compile_schema(SCHEMA)

    def check(text: str) -> bool:
        return ours.valid(orjson.loads(text))

    async def main() -> None:
        n = 5000
        t = time.perf_counter()
        for _ in range(n):
            check(ANSWER)
        inline = (time.perf_counter() - t) / n * 1e6
        ct = CheckThread(CHECK_DEADLINE_S)
        await ct.run(check, ANSWER)
        t = time.perf_counter()
        for _ in range(n):
            await ct.run(check, ANSWER)
        one = (time.perf_counter() - t) / n * 1e6
        t = time.perf_counter()
        await asyncio.gather(*(ct.run(check, ANSWER) for _ in range(n)))
        many = (time.perf_counter() - t) / n * 1e6
        ct.close()
        print("| where | one at a time | 5,000 at once |")
        print("|---|---|---|")
        print(f"| inline on the loop | {inline:.1f} | - |")
        print(f"| the check thread (deadline {CHECK_DEADLINE_S * 1000:.0f} ms) | {one:.1f} | {many:.1f} |")

    asyncio.run(main())


def _runaway(depth: int) -> bool:
    v = compile_schema(
        {"oneOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
    )
    return v.valid(orjson.loads("[" * depth + '"x"' + "]" * depth))


async def _lag(work: Callable[[], Awaitable[object]]) -> tuple[float, float, float]:
    """(the work's seconds, the loop's 1 ms tick lag p50 and max in ms) while it runs."""
    lags: list[float] = []

    async def tick() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    lags.clear()
    t = time.perf_counter()
    await work()
    took = time.perf_counter() - t
    ticker.cancel()
    lags.sort()
    return took, lags[len(lags) // 2] * 1e3, lags[-1] * 1e3


def runaway() -> None:
    section(
        f"E. A runaway check (oneOf recursing twice, 40 deep) stopped at {CHECK_DEADLINE_S * 1000:.0f} ms"
    )

    async def main() -> None:
        ct = CheckThread(CHECK_DEADLINE_S)
        took, p50, worst = await _lag(lambda: ct.run(_runaway, 40))
        print(
            f"- stopped after {took * 1000:.0f} ms; loop tick lag meanwhile p50 {p50:.2f}, max {worst:.2f} ms"
        )
        took, p50, worst = await _lag(lambda: asyncio.sleep(CHECK_DEADLINE_S))
        print(f"- nothing running, as long: tick lag p50 {p50:.2f} ms, max {worst:.2f} ms")
        ct.close()
        t = time.perf_counter()
        _runaway(18)
        took = time.perf_counter() - t
        days = 2**22 * took / 86400
        print(f"- unstopped, 18 deep: {took:.2f} s (x2 a level: 40 deep is about {days:.0f} days)")

    asyncio.run(main())


def _props(n: int, kind: str = "string") -> str:
    return (
        '{"type":"object","properties":{' + ",".join(f'"p{i}":{{"type":"{kind}"}}' for i in range(n)) + "}}"
    )


def _nested_items(levels: int, wide: int) -> str:
    inner = '{"type":"string"}'
    for _ in range(levels):
        inner = '{"type":"array","items":' + inner + "}"
    return '{"type":"object","properties":{' + ",".join(f'"p{i}":{inner}' for i in range(wide)) + "}}"


BOUNDS = {
    f"{SCHEMA_NODES_MAX - 1:,} properties": _props(SCHEMA_NODES_MAX - 1),
    f"anyOf of {SCHEMA_NODES_MAX // 3 - 1:,} objects of one property ({SCHEMA_NODES_MAX - 3:,} subschemas)": (
        '{"anyOf":['
        + ",".join(
            '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}'
            for _ in range(SCHEMA_NODES_MAX // 3 - 1)
        )
        + "]}"
    ),
    "enum of 29,000 strings": '{"enum":[' + ",".join(f'"v{i:05d}"' for i in range(29_000)) + "]}",
    "8 levels of nested items x 550 wide": _nested_items(8, 550),
    "patterns up to the RE2 budget": '{"anyOf":['
    + ",".join(f'{{"pattern":"^\\\\w{{{30 + i % 8}}}{i}$"}}' for i in range(9))
    + "]}",
    "33,000 properties (0.9 MiB)": _props(33_000),
    "a 32 MB file": "x" * (32 << 20),
}


def compile_at_bounds(folder: Path) -> None:
    section("F. Compiling schemas at the bounds (a fresh process each; peak memory growth)")
    print("| shape | bytes | outcome | seconds | peak memory growth |")
    print("|---|---|---|---|---|")
    for name, doc in BOUNDS.items():
        path = folder / "schema.json"
        path.write_text(doc)
        code = textwrap.dedent(
            f"""
            import resource, time
            from pathlib import Path
            from oxconsole.workload.userregex import compile_pattern
            from oxconsole.workload.userschema import SchemaError, compile_schema, read_schema
            compile_pattern(r"\\w")  # Python's classes, read once a process, not the schema's cost
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            t = time.perf_counter()
            try:
                compile_schema(read_schema(Path({str(path)!r})))
                out = "compiled"
            except SchemaError as e:
                out = "refused: " + e.expected
            grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
            print(f"{{out}}|{{time.perf_counter() - t:.2f}}|{{grown:.0f}} MB")
            """
        )
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        line = res.stdout.strip() or res.stderr.strip().splitlines()[-1]
        outcome, secs, mem = [*line.split("|"), "", ""][:3]
        print(f"| {name} | {len(doc):,} | {outcome} | {secs} | {mem} |")
        path.unlink()


def longest_checks() -> None:
    section("G. The longest checks the deadline must let through (valid answers)")
    wide = compile_schema(orjson.loads(_props(SCHEMA_NODES_MAX - 1)))
    wide_answer = orjson.dumps({f"p{i}": f"value number {i}" for i in range(SCHEMA_NODES_MAX - 1)}).decode()
    rows = compile_schema({"type": "array", "items": SCHEMA})
    row = orjson.loads(ANSWER)
    longest = orjson.dumps([row] * 1_500).decode()  # 128k tokens of output, about 512 KB
    for name, v, text in (
        (
            f"{SCHEMA_NODES_MAX - 1:,} properties, every one given ({len(wide_answer):,} chars)",
            wide,
            wide_answer,
        ),
        (f"1,500 items of the schema of C ({len(longest):,} chars: 128k tokens)", rows, longest),
        ("10,000 items of the schema of C", rows, orjson.dumps([row] * 10_000).decode()),
    ):
        t = time.perf_counter()
        ok = v.valid(orjson.loads(text))
        print(f"- {name}: {'valid' if ok else 'INVALID'} in {(time.perf_counter() - t) * 1e3:.1f} ms")
    print(f"(the deadline: {CHECK_DEADLINE_S * 1000:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--skip", default="", help="sections to skip, e.g. F or EF")
    args = ap.parse_args()
    print(f"Python {sys.version.split()[0]}, fastjsonschema {fastjsonschema.VERSION}")
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        for key, fn in (
            ("A", per_check),
            ("B", hostile),
            ("C", schema_check),
            ("D", where),
            ("E", runaway),
            ("F", lambda: compile_at_bounds(Path(td))),
            ("G", longest_checks),
        ):
            if key not in args.skip:
                fn()


if __name__ == "__main__":
    main()
