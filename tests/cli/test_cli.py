"""The command line as a user runs it: real processes, the embedded simulator, exit codes and files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import oxconsole as oxc
from tests.support import oxconsole_here as here
from tests.support import read_jsonl, wait_until
from tests.support.workloads import write_workload


def write(tmp_path: Path, count: int = 20, ttft: str = "10ms") -> Path:
    """tests/workloads/sim_paced.toml as tmp_path/w.toml: `count` prompts, the first token `ttft`
    after admission, $0.50 a request, journaled in tmp_path/out/."""
    sets = {
        "name": "cli",
        "run.grace": "10s",
        "output.results": str(tmp_path / "out" / "results.jsonl"),
        "models.0.price_per_request": 0.5,
        "prompts.synthetic.count": count,
        "sim.models.m.ttft": ttft,
    }
    return write_workload("sim_paced", tmp_path, sets, file="w.toml")


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_jsonl(tmp_path / "out" / "results.jsonl")


@pytest.mark.slow
def test_headless_run_summary_json_and_report(tmp_path: Path) -> None:
    w = write(tmp_path)
    r = oxc(
        str(w),
        "--headless",
        "--summary-json",
        str(tmp_path / "s.json"),
        "--set",
        "run.concurrency=4",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "requests" in r.stdout and "latency" in r.stdout  # the summary table
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["name"] == "cli"
    assert s["requests"] == {
        "total": 20,
        "ok": 20,
        "error": 0,
        "cancelled": 0,
        "retried": 0,
        "fallbacks": 0,
        "sessions": 1,
        "not_sent": 0,
    }
    assert s["cost"]["total"] == pytest.approx(10.0)
    assert len(records(tmp_path)) == 20
    rep = here("report", str(tmp_path / "out" / "results.jsonl"), "--json", cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    # the journal's records, and what the run's end kept beside them (requests not sent)
    assert json.loads(rep.stdout)["requests"] == s["requests"]
    # a second run keeps the first journal aside instead of overwriting it
    r2 = here(str(w), "--headless", cwd=tmp_path)
    assert r2.returncode == 0
    kept = [p for p in (tmp_path / "out").glob("results.*.jsonl") if not p.name.endswith(".server.jsonl")]
    assert len(kept) == 1 and len(kept[0].read_text().splitlines()) == 20
    # the server series went with it (the simulator's /metrics, read beside the run)
    series = kept[0].with_name(kept[0].name.removesuffix(".jsonl") + ".server.jsonl")
    assert series.is_file() and (tmp_path / "out" / "results.server.jsonl").is_file(), kept


def test_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    w = write(tmp_path)
    for args in (
        [str(tmp_path / "missing.toml")],
        [str(w), "--set", "run.concurrency=fifty"],
        [str(w), "--set", "nonsense"],
        ["validate", str(w), "--set", "run.arrival=sideways"],
        ["report", str(tmp_path / "none.jsonl")],
        [str(w), "--resume"],  # no journal yet
        [str(w), "--bogus-flag"],
    ):
        r = here(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr
        assert r.stderr.strip(), args
    r = here(str(w), "--set", "run.concurrency=fifty", cwd=tmp_path)
    assert "run.concurrency" in r.stderr and "w.toml" in r.stderr


def test_missing_key_variable_is_bad_input(tmp_path: Path) -> None:
    w = write(tmp_path)
    w.write_text(
        w.read_text().replace('base_url = "sim"', 'base_url = "sim"\napi_key_env = "OXC_TEST_KEY_UNSET"')
    )
    r = here("validate", str(w), cwd=tmp_path)
    assert r.returncode == 2
    assert "OXC_TEST_KEY_UNSET" in r.stderr
    r = here("validate", str(w), cwd=tmp_path, env={"OXC_TEST_KEY_UNSET": "sk-secret-value-123"})
    assert r.returncode == 0, r.stderr
    assert "sk-secret" not in r.stdout + r.stderr
    # the request count it would send, on its own line (a bare "20" also matched the temp paths)
    assert re.search(r"^\s*requests: 20$", r.stdout, re.M), r.stdout


@pytest.mark.slow
def test_key_never_written(tmp_path: Path) -> None:
    w = write(tmp_path, count=5)
    w.write_text(w.read_text().replace('base_url = "sim"', 'base_url = "sim"\napi_key_env = "OXC_KEY"'))
    secret = "sk-test-DO-NOT-LEAK-4242"
    r = here(
        str(w),
        "--headless",
        "--summary-json",
        str(tmp_path / "s.json"),
        cwd=tmp_path,
        env={"OXC_KEY": secret},
    )
    assert r.returncode == 0, r.stderr
    for f in [*tmp_path.rglob("*.json*"), *tmp_path.rglob("*.log")]:
        assert secret not in f.read_text(), f
    assert secret not in r.stdout + r.stderr


@pytest.mark.slow
def test_kill_9_then_resume_sends_each_id_once(tmp_path: Path) -> None:
    w = write(tmp_path, count=300, ttft="30ms")
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(w), "--headless"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    j = tmp_path / "out" / "results.jsonl"
    wait_until(lambda: j.exists() and len(j.read_bytes().splitlines()) >= 60, timeout=60, what="60 records")
    p.kill()
    p.wait(10)
    # simulate a torn last line, as a crash mid-write could leave
    with open(j, "ab") as f:
        f.write(b'{"id": "syn-9999", "sta')
    before = records_lenient(j)
    r = here(str(w), "--headless", "--resume", "--set", 'sim.models.m.ttft="5ms"', cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "torn" in r.stderr or "unreadable" in r.stderr
    ok = [x["id"] for x in records_lenient(j) if x["status"] == "ok"]
    assert len(ok) == 300 and len(set(ok)) == 300
    assert len(before) >= 60


def records_lenient(j: Path) -> list[dict[str, Any]]:
    out = []
    for line in j.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def test_version_and_help(tmp_path: Path) -> None:
    r = here("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("oxconsole ")
    r = here("--help", cwd=tmp_path)
    assert r.returncode == 0 and "--headless" in r.stdout and "validate" in r.stdout


def test_sim_command_prints_url_first(tmp_path: Path) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "sim", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:") and line.endswith("/v1")
    finally:
        p.terminate()
        p.wait(10)
