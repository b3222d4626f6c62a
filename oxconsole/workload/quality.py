"""The `[quality]` table (when an answer is good) and `[routing] cascade` (where a bad one goes next).

Why this module exists: the checks an answer must pass are read once, with the same error texts as
every other section, and everything a check needs is made ready here (the schema read within its
bounds and compiled, `workload/userschema.py`; the regexes compiled for RE2,
`workload/userregex.py`; `expected_path` read into its parts), so no request pays for parsing and
whatever could not run bounded on every answer is refused before the run, exit 2. The checks
themselves run in the engine (`engine/send/checks.py`); the simulator reads the same table to
answer right (`sim/quality.py`).

A cascade needs `[quality]` (without it no answer ever fails) and names each model once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson

from oxconsole.workload.problems import Problems, did_you_mean, fail, join_key, show
from oxconsole.workload.schema import JudgeConfig, QualityConfig
from oxconsole.workload.values import Table

__all__ = [
    "REASONS",
    "JudgeConfig",
    "QualityConfig",
    "check_cascade",
    "line_expected",
    "parse_quality",
    "quality_lines",
]

REASONS = ("json", "schema", "regex", "expected", "judge")
"""Why an answer was not valid (`invalid_reason`), in the order the checks run."""

_JUDGE = ("model", "prompt", "pass")
EXPECTED_MAX = 100_000
"""The longest `"expected"` a prompts line may carry (characters): an answer, not a document."""


_QUALITY = tuple(f.name for f in fields(QualityConfig) if f.name != "schema_source")
"""The keys of [quality]: its fields (schema_source says where json_schema came from)."""


def parse_quality(
    errs: Problems, data: Any, base: Path, models: Sequence[str] | None
) -> QualityConfig | None:
    """The `[quality]` table (None when absent), every error recorded in `errs`; files are read
    relative to the workload's folder (`base`)."""
    if data is None:
        return None
    t = Table(errs, data, "quality", _QUALITY, "[quality]")
    if t.broken:
        return None
    schema, source = _schema(t, base) if t.has("json_schema") else (None, "")
    regex = _regex(t, "regex") if t.has("regex") else None
    judge = _judge(errs, t.data["judge"], base, models) if t.has("judge") else None
    expected = t.bool_("expected", False)
    path = _path(t, expected) if t.has("expected_path") else None
    q = QualityConfig(
        json_schema=schema,
        schema_source=source,
        regex=regex,
        expected=expected,
        expected_path=path,
        judge=judge,
    )
    if not t.data:
        errs.add("quality", "at least one of json_schema, regex, expected, judge", "an empty [quality] table")
    return q


def _schema(t: Table, base: Path) -> tuple[dict[str, Any] | bool | None, str]:
    """The schema: a file (relative to the workload) holding one JSON object, or an inline table;
    read within its bounds (its size before a byte is read) and compiled, once a process, to prove
    it can run on every answer in bounded time and without the network."""
    # only workloads with a schema load the validator (fastjsonschema: 12 ms of import)
    from oxconsole.workload.userschema import SchemaError, compiled_schema, read_schema

    v = t.data["json_schema"]
    key = t.p("json_schema")
    if isinstance(v, dict):
        schema: Any = v
        source = "inline"
    elif isinstance(v, str) and v:
        path = base / v
        try:
            schema = read_schema(path)
        except OSError as e:
            t.errs.add(key, "a readable JSON Schema file", f"{show(v)} ({e.strerror}: {path})")
            return None, ""
        except orjson.JSONDecodeError as e:
            t.errs.add(key, "a file of JSON (a JSON Schema)", f"{show(v)} (invalid JSON: {e.msg})")
            return None, ""
        except SchemaError as e:
            t.errs.add(key, e.expected, f"{show(v)} ({e.detail()})")
            return None, ""
        source = v
    else:
        t.fail("json_schema", "a JSON Schema file (a path relative to the workload) or an inline table")
        return None, ""
    if not isinstance(schema, dict | bool):
        t.errs.add(key, "a JSON Schema (an object)", f"{show(source)} holds {show(schema)}")
        return None, ""
    try:
        compiled_schema(schema)
    except SchemaError as e:
        t.errs.add(key, e.expected, f"{show(source)} ({e.detail()})")
        return None, ""
    return schema, source


def _regex(t: Table, key: str) -> str | None:
    """A user's pattern, compiled for RE2 to prove it can run in linear time (refused, naming
    why, when it cannot: a lookaround, a backreference...)."""
    from oxconsole.workload.userregex import PatternError, compile_pattern  # [quality] only

    v = t.data[key]
    if not isinstance(v, str) or not v:
        t.fail(key, "a regular expression (a non-empty string)")
        return None
    try:
        compile_pattern(v)
    except PatternError as e:
        t.errs.add(t.p(key), e.expected, f"{show(v)} ({e.why})")
        return None
    return v


def _path(t: Table, expected: bool) -> tuple[str, ...] | None:
    """`expected_path`: a dotted path, beside `expected = true` (the value it names is compared
    with the prompts line's "expected")."""
    from oxconsole.workload.answerpath import PathError, parse_path  # [quality] only

    v = t.data["expected_path"]
    if not isinstance(v, str):
        t.fail("expected_path", PathError.expected)
        return None
    try:
        parts = parse_path(v)
    except PathError as e:
        t.errs.add(t.p("expected_path"), e.expected, f"{show(v)} ({e.got})")
        return None
    if not expected:
        t.errs.add(
            t.p("expected_path"),
            'expected = true beside it (the path names the value compared with each prompt\'s "expected")',
            f"{show(v)} without it",
        )
        return None
    return parts


def _judge(errs: Problems, data: Any, base: Path, models: Sequence[str] | None) -> JudgeConfig | None:
    j = Table(errs, data, "quality.judge", _JUDGE, "quality.judge")
    if j.broken:
        return None
    model = j.str_("model", "", "the name of a model in [[models]]")
    if model and models is not None and model not in models:
        hint = did_you_mean(model, models)
        j.fail("model", "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else ""))
    for key in ("model", "prompt", "pass"):
        if not j.has(key):
            j.required(key, "a non-empty string")
    prompt_file = ""
    if j.has("prompt"):
        prompt_file = j.str_("prompt", "", "a prompt file (a path relative to the workload)")
    prompt = ""
    if prompt_file:
        path = base / prompt_file
        try:
            prompt = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
            got = f"{show(prompt_file)} ({why}: {path})"
            errs.add(join_key("quality.judge", "prompt"), "a readable prompt file", got)
        else:
            if "{answer}" not in prompt:
                errs.add(
                    join_key("quality.judge", "prompt"),
                    "a prompt file holding {answer} (where the answer to judge goes)",
                    f"{show(prompt_file)} without it",
                )
    pass_ = _regex(j, "pass") if j.has("pass") else None
    return JudgeConfig(model=model, prompt=prompt, pass_=pass_ or "", prompt_file=prompt_file)


def check_cascade(
    errs: Problems, cascade: Sequence[str], quality: QualityConfig | None, has_quality: bool
) -> None:
    """A cascade names each model once, and needs `[quality]` to judge its answers."""
    if not cascade:
        return
    seen: set[str] = set()
    for i, name in enumerate(cascade):
        if name in seen:
            errs.add(join_key("routing.cascade", i), "a model not already in the cascade", show(name))
        seen.add(name)
    if quality is None and not has_quality:
        expected = "a [quality] table beside it (what makes an answer fail)"
        errs.add("routing.cascade", expected, "no [quality] table")


def line_expected(obj: Mapping[str, Any], label: str, where: str) -> str | None:
    """A prompts line's `"expected"` answer: a string (a number or boolean is read as its text)."""
    if "expected" not in obj:
        return None
    v = obj["expected"]
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if not isinstance(v, str) or len(v) > EXPECTED_MAX:
        what = f"a string of at most {EXPECTED_MAX} characters (the right answer)"
        fail(label, f"{where}: expected", what, v)
    return v


def as_written(pattern: str) -> str:
    r"""A regex as the workload file can write it, a TOML literal string: `'^(yes|no)\b'`, not
    Python's repr with each backslash doubled (`'^(yes|no)\\b'`, which reads as another regex).
    One that holds a quote or a character a terminal would obey: a basic string, those escaped."""
    if "'" not in pattern and pattern.isprintable():
        return f"'{pattern}'"
    return json.dumps(pattern, ensure_ascii=False)


def quality_lines(q: QualityConfig | None, cascade: Sequence[str]) -> list[str]:
    """`validate`'s section on `[quality]` and the cascade (none without `[quality]`)."""
    if q is None:
        return []
    checks = []
    if q.json_schema is not None:
        where = "the inline schema" if q.schema_source == "inline" else q.schema_source
        checks.append(f"is JSON valid against {where}")
    if q.regex is not None:
        checks.append(f"matches {as_written(q.regex)}")
    if q.expected and q.expected_path is not None:
        checks.append(f'is JSON whose value at {".".join(q.expected_path)} equals the prompt\'s "expected"')
    elif q.expected:
        checks.append('equals the prompt\'s "expected"')
    if q.judge is not None:
        judge = q.judge
        checks.append(f"is judged by {judge.model} ({judge.prompt_file}) to match {as_written(judge.pass_)}")
    out = ["", "quality", "  an answer is valid when it " + "; ".join(checks)]
    if cascade:
        out.append("  cascade: " + " -> ".join(cascade) + " (an invalid answer goes on to the next)")
    return out
