"""One writer per journal: a second run of the same journal, fresh or `--resume`, is refused with
exit 2 naming the journal and the pid that holds it, and moves nothing aside.

The first run is a child process (`oxconsole w.toml --headless`, slowed by `run.rate`) that is
still writing; the second runs in this process. A holder killed with SIGKILL leaves no lock.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from oxconsole.journal.lock import JournalBusy, JournalLock, lock_path
from tests.support import oxconsole_here, wait_records
from tests.support.workloads import write_workload


@contextmanager
def first_run(tmp_path: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`oxconsole w.toml --headless ARGS` as a child, once it has journaled a record; stopped
    (SIGTERM) at the end."""
    journal = tmp_path / "out" / "results.jsonl"
    before = journal.read_bytes().count(b"\n") if journal.exists() else 0
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "w.toml", "--headless", *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_records(journal, before + 1, p, 60)
        yield p
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def setup(tmp_path: Path) -> Path:
    """tmp_path/w.toml: a run that takes long (100,000 prompts at 40 a second), each answered
    within 1 ms; its journal out/results.jsonl (returned)."""
    sets = {
        "name": "locked",
        "run": {"concurrency": 2, "rate": 40},
        "output.results": "out/results.jsonl",
        "prompts.synthetic": {"count": 100000, "input_tokens": 8, "output_tokens": 4},
        "sim.models.m.ttft": "1ms",
    }
    write_workload("sim_exact", tmp_path, sets, file="w.toml")
    return tmp_path / "out" / "results.jsonl"


def test_a_second_fresh_run_is_refused_and_moves_nothing(tmp_path: Path, run_dirs: Path) -> None:
    journal = setup(tmp_path)
    with first_run(tmp_path) as p:
        r = oxconsole_here("w.toml", "--headless", cwd=tmp_path)
        inode = journal.stat().st_ino
        kept = sorted(x.name for x in journal.parent.iterdir())
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"another run is writing this journal (pid {p.pid}" in r.stderr, r.stderr
    assert "out/results.jsonl" in r.stderr, r.stderr
    assert "results.jsonl" in kept and "results.jsonl.lock" in kept, kept
    assert not [k for k in kept if k.startswith("results.2")], kept  # nothing kept aside
    assert journal.stat().st_ino == inode, "the first run's journal was replaced"


def test_two_resumes_at_once_are_refused(tmp_path: Path, run_dirs: Path) -> None:
    setup(tmp_path)
    with first_run(tmp_path):
        pass  # a journal to resume, its run stopped
    with first_run(tmp_path, "--resume") as p:
        r = oxconsole_here("w.toml", "--headless", "--resume", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert f"(pid {p.pid}" in r.stderr and "resuming" not in r.stderr, r.stderr


def test_a_killed_holder_leaves_no_lock(tmp_path: Path) -> None:
    journal = tmp_path / "results.jsonl"
    code = (
        "import sys, time; from pathlib import Path; from oxconsole.journal.lock import JournalLock; "
        f"JournalLock.acquire(Path({str(journal)!r})); print('held', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        try:
            JournalLock.acquire(journal)
        except JournalBusy as e:
            assert str(p.pid) in str(e), e
        else:
            raise AssertionError("the lock was taken while its holder lived")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    lock = JournalLock.acquire(journal)  # the kernel dropped the dead holder's lock
    assert lock_path(journal).read_text().strip() == str(os.getpid())
    lock.release()
    assert not lock_path(journal).exists(), "the lock file outlived its release"
