"""A journal that cannot be written stops the run at once, says which file and why, and exits 4.

End to end: `oxconsole w.toml --headless` runs in a child process whose files may not grow past a
limit (RLIMIT_FSIZE with SIGXFSZ ignored, so a write past it fails with EFBIG: a real regular file,
no mount needed) and, where the test may mount one (root), with its journal on a small tmpfs that
fills up (ENOSPC). The simulator runs as a process of its own (`oxconsole sim`), out of the limit's
reach, so its `/sim/stats` counts the requests the run really sent. Before the fix, a full disk
printed "Exception in callback" for every flush, went on to the end and said "400 total 400 ok".
"""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.workloads import write_workload

TOTAL = 5000
LIMIT = 64 * 1024
"""Bytes the journal may reach: some 170 records of this workload, then the write fails."""

SIM_PROFILE = """
[sim.models.m]
ttft = "5ms"
tokens_per_s = 0
output_tokens = 16
capacity = 1000
jitter = 0
"""


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulator of its own (`oxconsole sim`): the run's file limit does not reach it. One for
    the module: each test counts what its run sent as the difference of `received`."""
    cfg = tmp_path_factory.mktemp("sim") / "sim.toml"
    cfg.write_text(SIM_PROFILE)
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "sim", "--port", "0", "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stdout is not None
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        p.terminate()
        p.wait(10)


def received(url: str) -> int:
    """Requests the simulator received."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/sim/stats", timeout=10) as r:
        stats = json.loads(r.read())
    return sum(int(m["received"]) for m in stats["models"].values())


def limit_file_size(limit: int | None) -> Any:
    def pre() -> None:
        if limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def run_until_full(
    tmp_path: Path, url: str, results: Path, *, workers: int, limit: int | None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    sets = {
        "name": "full",
        "run": {"concurrency": 20, "workers": workers},
        "output.results": str(results),
        "endpoints.default.base_url": url,
        "prompts": {"synthetic": {"count": TOTAL, "input_tokens": 10, "output_tokens": 16}},
        "retry": None,
    }
    wl = write_workload("server", tmp_path, sets, file="w.toml")
    summary = tmp_path / "summary.json"  # beside the workload: on a disk with room, and small
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--summary-json", str(summary)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_file_size(limit),
    )
    return r, json.loads(summary.read_text())


def whole_lines(results: Path) -> int:
    """Records in the journal: whole lines (a last one cut by the failed write does not count)."""
    data = results.read_bytes()
    lines = data.split(b"\n")[:-1]
    for line in lines:
        json.loads(line)
    return len(lines)


def assert_stopped_and_honest(
    r: subprocess.CompletedProcess[str], summary: dict[str, Any], results: Path, reason: str, sent: int
) -> None:
    assert r.returncode == 4, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert "Exception in callback" not in r.stderr + r.stdout
    assert f"results could not be saved: {results}: {reason}" in r.stderr  # which file, and why
    assert "NOT SAVED" in r.stdout  # the table says it too
    lines = whole_lines(results)
    req = summary["requests"]
    assert summary["saved"] is False and summary["save_error"] == f"{results}: {reason}"
    assert req["ok"] + req["error"] == req["total"] == lines  # only what was written counts
    assert req["not_sent"] == TOTAL - lines
    assert f"{TOTAL - lines:,} requests not sent; continue with: oxconsole w.toml --resume" in r.stderr
    assert 0 < lines < sent < TOTAL // 4, (lines, sent)  # dispatch stopped at once


# Each cause runs once, each with one of the two ways records reach the journal (the engine's own
# loop; worker processes sending them to the parent): the journal's failure handling is one code
# path whatever the errno, so the four combinations would test it twice over.
@pytest.mark.slow
def test_a_file_that_may_not_grow_stops_the_run_with_exit_4(tmp_path: Path, sim_url: str) -> None:
    results = tmp_path / "out" / "results.jsonl"
    before = received(sim_url)
    r, summary = run_until_full(tmp_path, sim_url, results, workers=1, limit=LIMIT)
    assert results.stat().st_size == LIMIT
    assert_stopped_and_honest(r, summary, results, "File too large", received(sim_url) - before)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, mounted for the test (root only: skipped where mount is refused)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    m = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
def test_a_full_file_system_stops_the_run_with_exit_4(tmp_path: Path, sim_url: str, small_disk: Path) -> None:
    results = small_disk / "results.jsonl"
    before = received(sim_url)
    r, summary = run_until_full(tmp_path, sim_url, results, workers=2, limit=None)
    assert_stopped_and_honest(r, summary, results, "No space left on device", received(sim_url) - before)
