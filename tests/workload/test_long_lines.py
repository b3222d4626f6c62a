"""Every line of a prompts file or a trace is read within a bound: a longer one is bad input (exit 2,
naming the file, the line and the bound) at `validate` and before a run sends anything, never a
traceback; it is never held whole; a 250,000-token prompt still goes through.

The bounds are `workload.prompts.boundedlines`: 16 MiB a line of a prompts file (and an entry of a ShareGPT
array), 1 MiB a line of a trace, and the csv module's 128 KiB a field of a CSV trace.
"""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import orjson
import pytest

from oxconsole.workload import WorkloadError, check_prompts, load_workload
from oxconsole.workload.prompts.boundedlines import LINE_MAX, TRACE_LINE_MAX
from tests.support import oxconsole_here
from tests.support.workloads import write_workload

MIB = 1 << 20


def write(tmp_path: Path, file: str, data: bytes, fmt: str = "") -> Path:
    """`data` as tmp_path/FILE, the prompts (in format `fmt`, when given) of
    tests/workloads/minimal.toml as tmp_path/workload.toml."""
    (tmp_path / file).write_bytes(data)
    prompts = {"file": file, **({"format": fmt} if fmt else {})}
    sets = {"name": "long", "run.concurrency": 2, "prompts": prompts, "output.results": "results.jsonl"}
    return write_workload("minimal", tmp_path, sets)


def line(prompt: str, **kw: object) -> bytes:
    return orjson.dumps({"prompt": prompt, **kw}) + b"\n"


def over(n: int) -> bytes:
    """A JSON line whose prompt makes it `n` bytes longer than LINE_MAX."""
    return line("x" * (LINE_MAX + n))


CASES = {
    "jsonl": ("prompts.jsonl", "", line("first") + over(1) + line("third"), 2, "16 MiB"),
    "batch": (
        "batch.jsonl",
        "openai-batch",
        orjson.dumps(
            {
                "custom_id": "a",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": "x" * (LINE_MAX + 9)}]},
            }
        )
        + b"\n",
        1,
        "16 MiB",
    ),
    "sharegpt-lines": (
        "share.jsonl",
        "sharegpt",
        orjson.dumps({"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]})
        + b"\n"
        + b'{"conversations": "'
        + b"y" * LINE_MAX
        + b'"}\n',
        2,
        "16 MiB",
    ),
    "mooncake": (
        "trace.jsonl",
        "mooncake",
        b'{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
        + b'{"timestamp": 1, "input_length": 5, "output_length": 2, "hash_ids": ['
        + b"1, " * (TRACE_LINE_MAX // 3)
        + b"1]}\n",
        2,
        "1 MiB",
    ),
    "azure-trace": (
        "azure.csv",
        "azure-trace",
        b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + b"1," * (TRACE_LINE_MAX // 2 + 1) + b"1\n",
        2,
        "1 MiB",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_line_over_its_bound_is_bad_input_naming_file_line_and_bound(tmp_path: Path, case: str) -> None:
    file, fmt, data, lineno, bound = CASES[case]
    wl = write(tmp_path, file, data, fmt)
    for args in (["validate", str(wl)], [str(wl), "--headless"]):
        p = oxconsole_here(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.returncode, p.stderr[-2000:])
        assert "Traceback" not in p.stderr, p.stderr[-2000:]
        want = f"{file}: line {lineno}: expected a line of at most {bound}, got a longer one"
        assert want in p.stderr, (args, p.stderr[-2000:])
    assert not (tmp_path / "results.jsonl").exists() or not (tmp_path / "results.jsonl").read_bytes().strip()


def test_a_csv_field_over_the_csv_bound_is_bad_input_not_a_traceback(tmp_path: Path) -> None:
    big = b"y" * (200 * 1024)
    data = (
        b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        + b"5,ChatGPT,10,2,12,Conversation log\n"
        + b'6,"'
        + big
        + b'",10,2,12,Conversation log\n'
    )
    wl = write(tmp_path, "b.csv", data, "burstgpt")
    p = oxconsole_here("validate", str(wl), cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr[-2000:])
    assert "b.csv: line 3: expected a field of at most 128 KiB, got a longer one" in p.stderr, p.stderr


def test_every_bad_line_of_a_batch_file_is_told_the_long_one_among_them(tmp_path: Path) -> None:
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    data = (
        orjson.dumps({**good, "body": {**body, "model": "nope"}})
        + b"\n"
        + orjson.dumps({**good, "custom_id": "b", "body": {**body, "x": "z" * (LINE_MAX + 1)}})
        + b"\n"
        + orjson.dumps({**good, "custom_id": "c", "method": "DELETE", "body": body})
        + b"\n"
    )
    wl = write(tmp_path, "batch.jsonl", data, "openai-batch")
    p = oxconsole_here("validate", str(wl), cwd=tmp_path)
    assert p.returncode == 2, p.stderr[-2000:]
    told = [ln for ln in p.stderr.splitlines() if "batch.jsonl: line" in ln]
    assert [re.search(r"line \d+", t).group() for t in told] == ["line 1", "line 2", "line 3"], told  # type: ignore[union-attr]
    assert "line 2: expected a line of at most 16 MiB" in told[1], told


def test_a_sharegpt_array_entry_over_the_bound_is_bad_input(tmp_path: Path) -> None:
    conv = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    long_conv = {"conversations": [{"from": "human", "value": "z" * (LINE_MAX + 1)}]}
    data = b"[" + orjson.dumps(conv) + b",\n" + orjson.dumps(long_conv) + b"]"
    w = load_workload(write(tmp_path, "share.json", data, "sharegpt"))
    with pytest.raises(WorkloadError, match=r"share\.json: entry 2: expected an entry of at most 16 MiB"):
        check_prompts(w)


def test_an_endless_line_is_never_held_whole(tmp_path: Path) -> None:
    """A 64 MiB line (4 times the bound) is refused holding the bound, not the line: 16 MiB read,
    beside the file's 4 MiB read buffer, a 1 MiB piece and the buffer's room to grow."""
    wl = write(tmp_path, "prompts.jsonl", line("first") + b'{"prompt": "' + b"x" * (64 * MIB) + b'"}\n')
    w = load_workload(wl)
    tracemalloc.start()
    try:
        with pytest.raises(WorkloadError, match="line 2: expected a line of at most 16 MiB"):
            check_prompts(w)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * LINE_MAX + 4 * MIB, f"a 64 MiB line peaked at {peak / MIB:.1f} MiB to refuse"


def test_a_long_context_prompt_still_goes_through(tmp_path: Path) -> None:
    """A 250,000-token prompt (1 MB), and one of non-ASCII text written as JSON escapes (6 MB)."""
    ascii_prompt = "word " * 200_000
    escaped = orjson.dumps({"prompt": "\u4e2d" * 250_000}).replace("\u4e2d".encode(), b"\\u4e2d") + b"\n"
    assert len(escaped) > 1_400_000
    wl = write(tmp_path, "prompts.jsonl", line(ascii_prompt) + escaped)
    check = check_prompts(load_workload(wl))
    assert check.count == 2, check
