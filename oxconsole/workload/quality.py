"""The `[quality]` table (when an answer is good) and `[routing] cascade` (where a bad one goes next).

Why this module exists: the checks an answer must pass are read once, with the same error texts as
every other section, and everything a check needs is made ready here (the schema read from its
file and found to be a schema, the regexes compiled once), so no request pays for parsing. The
checks themselves run in the engine (`engine/send/checks.py`); the simulator reads the same table to
answer right (`sim/quality.py`).

A cascade needs `[quality]` (without it no answer ever fails) and names each model once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson

from oxconsole.workload.errors import Problems, did_you_mean, fail, join_key, show
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
    q = QualityConfig(
        json_schema=schema,
        schema_source=source,
        regex=regex,
        expected=t.bool_("expected", False),
        judge=judge,
    )
    if not t.data:
        errs.add("quality", "at least one of json_schema, regex, expected, judge", "an empty [quality] table")
    return q


def _schema(t: Table, base: Path) -> tuple[dict[str, Any] | bool | None, str]:
    """The schema: a file (relative to the workload) holding one JSON object, or an inline table;
    compiled once to prove it is a schema."""
    v = t.data["json_schema"]
    if isinstance(v, dict):
        schema: Any = v
        source = "inline"
    elif isinstance(v, str) and v:
        path = base / v
        try:
            schema = orjson.loads(path.read_bytes())
        except OSError as e:
            t.errs.add(t.p("json_schema"), "a readable JSON Schema file", f"{show(v)} ({e.strerror}: {path})")
            return None, ""
        except orjson.JSONDecodeError as e:
            got = f"{show(v)} (invalid JSON: {e.msg})"
            t.errs.add(t.p("json_schema"), "a file of JSON (a JSON Schema)", got)
            return None, ""
        source = v
    else:
        t.fail("json_schema", "a JSON Schema file (a path relative to the workload) or an inline table")
        return None, ""
    if not isinstance(schema, dict | bool):
        t.errs.add(t.p("json_schema"), "a JSON Schema (an object)", f"{show(source)} holds {show(schema)}")
        return None, ""
    problem = schema_problem(schema)
    if problem is not None:
        t.errs.add(t.p("json_schema"), "a valid JSON Schema", f"{show(source)} ({problem})")
        return None, ""
    return schema, source


def schema_problem(schema: dict[str, Any] | bool) -> str | None:
    """Why a schema is not one a validator can compile (None when it is)."""
    import fastjsonschema  # only workloads with a schema load the validator

    try:
        fastjsonschema.compile(schema)
    except fastjsonschema.JsonSchemaDefinitionException as e:
        return str(e)[:200]
    except (ValueError, TypeError, KeyError, re.error) as e:
        return f"{type(e).__name__}: {str(e)[:200]}"
    return None


def _regex(t: Table, key: str) -> str | None:
    v = t.data[key]
    if not isinstance(v, str) or not v:
        t.fail(key, "a regular expression (a non-empty string)")
        return None
    try:
        re.compile(v)
    except re.error as e:
        t.errs.add(t.p(key), "a valid Python regular expression", f"{show(v)} ({e})")
        return None
    return v


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
    if q.expected:
        checks.append('equals the prompt\'s "expected"')
    if q.judge is not None:
        judge = q.judge
        checks.append(f"is judged by {judge.model} ({judge.prompt_file}) to match {as_written(judge.pass_)}")
    out = ["", "quality", "  an answer is valid when it " + "; ".join(checks)]
    if cascade:
        out.append("  cascade: " + " -> ".join(cascade) + " (an invalid answer goes on to the next)")
    return out
