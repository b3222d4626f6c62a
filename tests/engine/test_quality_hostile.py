"""A hostile `[quality]` never loses records, never freezes the engine, is never fetched: real
processes and real HTTP against loopback servers of the test's own that play the models.

- A schema that recurses on the same value (`{"$ref": "#"}`) or divides by zero is refused at
  `validate` and at a run's start (exit 2, naming the file and the key), before anything is sent;
  an answer too deep for a recursive schema, and a check that raises, count as invalid answers,
  every record kept.
- Backtracking patterns (`^(a+)+$` on 35 characters: about an hour on Python's `re`) run on RE2;
  patterns RE2 cannot run are refused at `validate`; a check that runs away is stopped at its
  deadline, and SIGTERM is answered within the grace time while such checks run.
- A 32 MB schema is refused before it is read; a remote `$ref` is refused, never fetched.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.engine.runner import make_engine
from oxconsole.engine.send.cascade import CHECK_DEADLINE_S
from oxconsole.engine.send.checks import Checker
from oxconsole.workload import check_prompts
from oxconsole.workload.userschema import SCHEMA_NODES_MAX
from tests.support import read_jsonl
from tests.support.workloads import load_workload, write_workload

pytestmark = pytest.mark.asyncio

Answer = Callable[[str, str], str]
"""(model, prompt text) -> the answer's text."""


@asynccontextmanager
async def models(answer: Answer, seen: list[str], delay: float = 0.0) -> AsyncIterator[str]:
    """A chat server on loopback answering by `answer` (after `delay` seconds), and any other path
    (a schema a `$ref` names) served and noted in `seen`: yields the base URL without `/v1`."""

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append("chat")
        if delay:
            await asyncio.sleep(delay)
        text = answer(body["model"], body["messages"][-1]["content"])
        usage = {"prompt_tokens": 10, "completion_tokens": 4}
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": usage})

    async def other(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({"type": "string"})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_route("*", "/{tail:.*}", other)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def prompts(n: int) -> str:
    return "\n".join(orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?"}).decode() for i in range(n))


def write(folder: Path, base: str, quality: dict[str, Any], n: int = 8, **more: Any) -> Path:
    """folder/workload.toml: the cascade workload on the loopback server, `quality` as its
    [quality] (no cascade, the small model alone), n prompts; the journal folder/results.jsonl."""
    sets = {
        "endpoints.default.base_url": base + "/v1",
        "run.stream": False,
        "quality": quality,
        "routing.cascade": None,
        "models.1.weight": 0,
        **more,
    }
    return write_workload("cascade", folder, sets, prompts=prompts(n))


async def oxc(*args: str, cwd: Path, timeout: float = 60) -> tuple[int | None, str]:
    """`python -m oxconsole ARGS` while this loop serves the models: (exit code, stderr); None
    when it had not ended after `timeout` seconds (it is killed)."""
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oxconsole", *args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _, err = await asyncio.wait_for(p.communicate(), timeout)
    except TimeoutError:
        p.kill()
        _, err = await p.communicate()
        return None, err.decode()
    return p.returncode, err.decode()


def records(folder: Path) -> list[dict[str, Any]]:
    path = folder / "results.jsonl"
    return read_jsonl(path) if path.exists() else []


# --- 1. never lose records --------------------------------------------------------------------------


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ({"$ref": "#"}, "expected no $ref cycle that applies to the same value again"),
        ({"anyOf": [{"type": "string"}, {"allOf": [{"$ref": "#"}]}]}, "the cycle #"),
        ({"type": "number", "multipleOf": 0}, "expected a multipleOf greater than 0"),
    ],
    ids=["ref-root", "ref-through-allOf", "multipleOf-0"],
)
async def test_a_schema_that_would_fail_every_answer_is_refused_before_anything_is_sent(
    tmp_path: Path, schema: dict[str, Any], said: str
) -> None:
    (tmp_path / "loop.json").write_bytes(orjson.dumps(schema))
    seen: list[str] = []
    async with models(lambda m, t: "{}", seen) as base:
        path = write(tmp_path, base, {"json_schema": "loop.json"})
        checked, err_v = await oxc("validate", str(path), cwd=tmp_path)
        ran, err_r = await oxc(str(path), "--headless", cwd=tmp_path)
    for code, err in ((checked, err_v), (ran, err_r)):
        assert code == 2, (code, err)
        assert "Traceback" not in err, err
        assert "workload.toml: quality.json_schema: expected" in err and '"loop.json"' in err, err
        assert said in err, err
    assert seen == [], f"sent {len(seen)} requests for a run refused at its start"
    assert records(tmp_path) == []


async def run(path: Path) -> Any:
    from oxconsole.workload import load_workload as load

    w = load(path)
    return await make_engine(
        w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests
    ).run()


async def test_an_answer_too_deep_for_a_recursive_schema_is_invalid_and_recorded(tmp_path: Path) -> None:
    """A tree schema (recursion through `items` is fine) and answers nested 1,000 deep: past
    Python's recursion limit in the validator, which must cost the answer its validity, not the
    run its records."""
    deep = "[" * 1000 + "]" * 1000
    seen: list[str] = []
    async with models(lambda m, t: deep if int(t.split()[1][:-1]) % 2 else "[[], [[]]]", seen) as base:
        path = write(tmp_path, base, {"json_schema": {"type": "array", "items": {"$ref": "#"}}}, n=12)
        out = await run(path)
    recs = {r["id"]: r for r in records(tmp_path)}
    assert len(recs) == 12, f"{len(recs)} records of 12"
    for i in range(12):
        r = recs[f"q{i}"]
        assert r["status"] == "ok", r
        if i % 2:
            assert r["valid"] is False and r["invalid_reason"] == "schema", r
        else:
            assert r["valid"] is True, r
    assert out.summary["quality"]["valid"] == 6 and out.summary["quality"]["judged"] == 12, out.summary


async def test_a_check_that_raises_is_an_invalid_answer_counted_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a check meets (here every check raises, as the reported recursive `$ref` did on
    every answer), each request keeps its record: invalid for the check it was in, `check_error`
    on it, counted in the summary, one warning; the run did not lose everything."""

    def raising(self: Checker, *args: Any, **kw: Any) -> str | None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Checker, "check", raising)
    seen: list[str] = []
    async with models(lambda m, t: '{"a": 1}', seen) as base:
        path = write(tmp_path, base, {"json_schema": {"type": "object"}}, n=10)
        out = await run(path)
    recs = records(tmp_path)
    assert len(recs) == 10, f"{len(recs)} records of 10 requests answered"
    for r in recs:
        assert r["status"] == "ok" and r["valid"] is False, r
        assert r["invalid_reason"] == "json" and r["check_error"] == "RecursionError", r
    q = out.summary["quality"]
    assert q["check_errors"] == 10 and q["judged"] == 10 and q["valid"] == 0, q
    assert out.summary["requests"]["ok"] == 10, out.summary["requests"]
    warned = [x for x in out.warnings if "check raised RecursionError" in x]
    assert len(warned) == 1, out.warnings


# --- 2. never freeze ---------------------------------------------------------------------------------


@pytest.mark.subprocess
async def test_patterns_without_a_linear_time_form_are_refused_at_validate(tmp_path: Path) -> None:
    (tmp_path / "judge.txt").write_text("{prompt}\n{answer}\nReply PASS or FAIL.")
    (tmp_path / "s.json").write_bytes(
        orjson.dumps({"type": "object", "properties": {"a": {"type": "string", "pattern": "(a)\\1"}}})
    )
    quality = {
        "regex": "(?<=a)b",
        "json_schema": "s.json",
        "judge": {"model": "big", "prompt": "judge.txt", "pass": "(?=PASS)"},
    }
    seen: list[str] = []
    async with models(lambda m, t: "x", seen) as base:
        path = write(tmp_path, base, quality)
        code, err = await oxc("validate", str(path), cwd=tmp_path)
    assert code == 2 and "Traceback" not in err, (code, err)
    for line in (
        "workload.toml: quality.regex: expected a regular expression without lookarounds, backreferences, "
        'atomic groups or possessive repeats, got "(?<=a)b" (a lookbehind (?<=...) or (?<!...))',
        "workload.toml: quality.judge.pass: expected a regular expression without lookarounds",
        "(a lookahead (?=...) or (?!...))",
        "workload.toml: quality.json_schema: expected a regular expression without lookarounds",
        '"(a)\\\\1": a backreference (\\1 or (?P=name)) at #/properties/a/pattern',
    ):
        assert line in err, (line, err)


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("quality", "answer"),
    [
        ({"regex": "^(a+)+$"}, "a" * 35 + "!"),
        ({"regex": "^([A-Za-z]+\\s?)+\\.$"}, "The quick brown fox jumps over the lazy dog"),
        (
            {
                "json_schema": {
                    "type": "object",
                    "properties": {"s": {"type": "string", "pattern": "^([A-Za-z]+\\s?)+\\.$"}},
                }
            },
            '{"s": "The quick brown fox jumps over the lazy dog"}',
        ),
    ],
    ids=["nested-plus", "words-then-dot", "schema-pattern"],
)
async def test_backtracking_patterns_check_every_answer_at_once(
    tmp_path: Path, quality: dict[str, Any], answer: str
) -> None:
    """Each of these took Python's `re` from 16 s to about an hour on one answer."""
    seen: list[str] = []
    async with models(lambda m, t: answer, seen) as base:
        path = write(tmp_path, base, quality, n=16)
        t = time.monotonic()
        code, err = await oxc(str(path), "--headless", cwd=tmp_path, timeout=90)
        took = time.monotonic() - t
    assert code is not None, f"the run had not ended after {took:.0f} s: {err[-2000:]}"
    recs = records(tmp_path)
    assert len(recs) == 16, (len(recs), err[-2000:])
    reason = "schema" if "json_schema" in quality else "regex"
    assert all(r["valid"] is False and r["invalid_reason"] == reason for r in recs), recs[:2]
    assert all("check_timeout" not in r for r in recs), "RE2 took longer than the check deadline"


RUNAWAY = {"oneOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "array", "items": {"$ref": "#"}}]}
"""Both branches recurse into `items`: 2^depth steps on an answer `depth` deep (accepted: the
recursion moves into the answer; only the deadline bounds it)."""


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize(
    ("quality", "answer", "reason"),
    [
        ({"regex": "^(a+)+$"}, "a" * 35 + "!", "regex"),
        ({"json_schema": RUNAWAY}, "[" * 40 + '"x"' + "]" * 40, "schema"),
    ],
    ids=["catastrophic-regex", "runaway-schema"],
)
async def test_sigterm_is_answered_within_the_grace_time_while_hostile_checks_run(
    tmp_path: Path, quality: dict[str, Any], answer: str, reason: str
) -> None:
    seen: list[str] = []
    grace = 2.0
    async with models(lambda m, t: answer, seen, delay=0.2) as base:
        path = write(tmp_path, base, quality, n=400, **{"run.grace": f"{grace}s", "run.concurrency": 4})
        p = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "oxconsole",
            str(path),
            "--headless",
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            journal = tmp_path / "results.jsonl"
            deadline = time.monotonic() + 60
            while not (journal.exists() and journal.read_bytes().count(b"\n") >= 4):
                assert p.returncode is None, "the run ended before the test stopped it"
                assert time.monotonic() < deadline, "no 4 records in 60 s: the checks hold the engine"
                await asyncio.sleep(0.05)
            t = time.monotonic()
            os.kill(p.pid, signal.SIGTERM)
            try:
                _, err = await asyncio.wait_for(p.communicate(), grace + 20)
            except TimeoutError:
                raise AssertionError(f"SIGTERM unanswered after {time.monotonic() - t:.1f} s") from None
            took = time.monotonic() - t
        finally:
            if p.returncode is None:
                p.kill()
                await p.communicate()
    assert p.returncode == 130, (p.returncode, err.decode()[-2000:])
    # the engine's own exit (summary, journal closed) within the grace; the rest is margin for a
    # loaded machine
    assert took < grace + 10, f"exit {took:.1f} s after SIGTERM (grace {grace} s)"
    recs = records(tmp_path)
    answered = [r for r in recs if r["status"] == "ok"]
    assert answered and all(r["valid"] is False and r["invalid_reason"] == reason for r in answered)
    if reason == "schema":
        assert all(r.get("check_timeout") is True for r in answered), answered[:2]
        assert f"ran past {CHECK_DEADLINE_S * 1000:.0f} ms" in err.decode(), err.decode()[-2000:]


# --- 3. schemas bounded and local -------------------------------------------------------------------


@pytest.mark.subprocess
async def test_a_32_mb_schema_is_refused_before_it_is_read(tmp_path: Path) -> None:
    body = (
        b'{"type": "object", "properties": {'
        + b",".join(b'"p%d": {"type": "string"}' % i for i in range(1_300_000))
        + b"}}"
    )
    (tmp_path / "big.json").write_bytes(body)
    size = len(body)
    assert size > 32 << 20
    path = write_workload(
        "cascade",
        tmp_path,
        {"quality": {"json_schema": "big.json"}, "routing.cascade": None},
        prompts=prompts(2),
    )
    # The command runs under a small Python of its own that reports its peak memory: a child of
    # this test process would count this process's pages, shared at the fork, as its own.
    p = subprocess.run(
        [sys.executable, "-c", PEAK, "validate", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    code, took, peak_kb = p.stdout.split()
    err = p.stderr
    assert int(code) == 2, (code, err)
    assert (
        f'workload.toml: quality.json_schema: expected a JSON Schema file of at most 1 MiB, got "big.json" '
        f"({size} bytes)" in err
    ), err
    peak_mb = int(peak_kb) / 1024
    # the whole command's peak (Python and oxconsole's imports: about 25 MB); reading the file whole
    # took 17 GB
    assert peak_mb < 150, f"validate peaked at {peak_mb:.0f} MB"
    assert float(took) < 30, f"validate took {took} s"


PEAK = """
import os, signal, subprocess, sys, time
t = time.monotonic()
p = subprocess.Popen([sys.executable, "-m", "oxconsole", *sys.argv[1:]])
signal.signal(signal.SIGALRM, lambda *a: p.kill())
signal.alarm(60)  # reading it whole took 17 GB: never let it get there
_, status, usage = os.wait4(p.pid, 0)
print(os.waitstatus_to_exitcode(status), round(time.monotonic() - t, 2), usage.ru_maxrss)
"""
"""`python -c PEAK ARGS`: `oxconsole ARGS` as its child, and on stdout its exit code, seconds and
peak resident memory (KiB), as the kernel counts them for that child alone."""


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "where",
    ["root", "property", "definition"],
)
async def test_a_remote_ref_is_refused_and_never_fetched(tmp_path: Path, where: str) -> None:
    seen: list[str] = []
    async with models(lambda m, t: '"x"', seen) as base:
        url = f"{base}/schemas/s.json"
        schemas: dict[str, dict[str, Any]] = {
            "root": {"$ref": url},
            "property": {"type": "object", "properties": {"a": {"$ref": url + "#/definitions/x"}}},
            "definition": {"definitions": {"d": {"$ref": url}}, "items": {"$ref": "#/definitions/d"}},
        }
        (tmp_path / "s.json").write_bytes(orjson.dumps(schemas[where]))
        path = write(tmp_path, base, {"json_schema": "s.json"})
        checked, err_v = await oxc("validate", str(path), cwd=tmp_path)
        ran, err_r = await oxc(str(path), "--headless", cwd=tmp_path)
    for code, err in ((checked, err_v), (ran, err_r)):
        assert code == 2 and "Traceback" not in err, (code, err)
        assert (
            "quality.json_schema: expected a local $ref (one starting with #: nothing is fetched)" in err
        ), err
        assert f'"{url}' in err, err
    assert seen == [], f"fetched or sent: {seen}"


@pytest.mark.slow
async def test_a_schema_as_large_as_providers_take_is_accepted_one_larger_refused(tmp_path: Path) -> None:
    """Structured output accepts up to 5,000 properties, 10 levels deep: such a schema compiles
    (`bench/bench_checks.py` measures how long); one more subschema is refused."""
    level: dict[str, Any] = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string"} for i in range(490)},
    }
    for depth in range(9):
        level = {
            "type": "object",
            "properties": {"child": level, **{f"g{depth}_{i}": {"type": "integer"} for i in range(499)}},
            "required": ["child"],
        }
    nodes = 1 + 490 + 9 * 500
    assert nodes == SCHEMA_NODES_MAX - 9, nodes
    (tmp_path / "big.json").write_bytes(orjson.dumps(level))
    sets = {"quality": {"json_schema": "big.json"}, "routing.cascade": None}
    w = load_workload("cascade", tmp_path, sets, prompts=prompts(2))
    assert w.quality is not None and w.quality.json_schema == level
    level["properties"].update({f"x{i}": {} for i in range(10)})
    (tmp_path / "big.json").write_bytes(orjson.dumps(level))
    from oxconsole.workload import WorkloadError

    with pytest.raises(
        WorkloadError, match=f"expected a JSON Schema of at most {SCHEMA_NODES_MAX} subschemas"
    ):
        load_workload("cascade", tmp_path, sets, prompts=prompts(2))
