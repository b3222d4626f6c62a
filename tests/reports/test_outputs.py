"""A run's outputs: paths that cannot be written refused before anything is sent (exit 2, the path
named, no traceback), the summary on stdout for `-`, and every run ending by saying where its
journal, summary and engine log are. Real processes against the embedded simulator."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oxconsole.cli import main as cli
from oxconsole.control import RunSource
from oxconsole.engine.commands import Stop
from oxconsole.reports.outputs import earlier_journals, journal_lines, keep_aside
from tests.support import oxconsole_here
from tests.support.workloads import write_workload


def oxc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`): these tests read what it prints and
    writes, nothing that needs a process of its own."""
    return oxconsole_here(*args, cwd=cwd, env=env)


def oxc_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line as a child process: for output to /dev/stdout and /dev/stderr."""
    return subprocess.run(
        [sys.executable, "-m", "oxconsole", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def workload(tmp_path: Path, results: Path, count: int = 20) -> Path:
    """tests/workloads/sim_paced.toml as tmp_path/w.toml: `count` prompts answered whole 10 ms after
    admission, journaled at `results`."""
    sets = {
        "name": "outs",
        "output.results": str(results),
        "prompts.synthetic.count": count,
        "sim.models.m": {"ttft": "10ms", "tokens_per_s": 0, "output_tokens": 4, "jitter": 0},
    }
    return write_workload("sim_paced", tmp_path, sets, file="w.toml")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody may write in: chmod 0555, or for root (whom modes do not stop) a read-only
    tmpfs mounted there."""
    d = tmp_path / "ro"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        yield d
        d.chmod(0o755)
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"root, but a read-only tmpfs cannot be mounted here: {r.stderr.decode().strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


def assert_refused(r: subprocess.CompletedProcess[str], named: str, expected: str) -> None:
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert named in r.stderr and expected in r.stderr, r.stderr
    assert "nothing was sent" in r.stderr


# --- refused up front ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("output-is-a-folder", "found a folder"),
        ("summary-is-a-folder", "found a folder"),
        ("output-dev-full", "found a character device"),
        ("output-dev-null", "found a character device"),
        ("output-fifo", "found a FIFO"),
        ("summary-dev-null", "found a character device"),
        ("summary-dev-full", "found a character device"),
        ("summary-fifo", "found a FIFO"),
        ("folder-is-a-file", "is a regular file"),
        ("meta-is-a-folder", "found a folder"),
        ("summary-is-the-journal", "other than the results journal"),
    ],
)
def test_unusable_output_paths_are_bad_input_before_anything_is_sent(
    tmp_path: Path, case: str, expected: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    journal = out / "results.jsonl"
    old = b'{"id": "old", "status": "ok"}\n'
    journal.write_bytes(old)  # an earlier run's journal: must not be moved aside
    w = workload(tmp_path, journal)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "afile").write_text("x")
    args, named = {
        "output-is-a-folder": (["--output", str(tmp_path)], str(tmp_path)),
        "summary-is-a-folder": (["--summary-json", str(out)], str(out)),
        "output-dev-full": (["--output", "/dev/full"], "/dev/full"),
        "output-dev-null": (["--output", "/dev/null"], "/dev/null"),
        "output-fifo": (["--output", str(fifo)], str(fifo)),
        "summary-dev-null": (["--summary-json", "/dev/null"], "/dev/null"),
        "summary-dev-full": (["--summary-json", "/dev/full"], "/dev/full"),
        "summary-fifo": (["--summary-json", str(fifo)], str(fifo)),
        "folder-is-a-file": (["--output", str(tmp_path / "afile" / "r.jsonl")], str(tmp_path / "afile")),
        "meta-is-a-folder": ([], str(out / "results.jsonl.meta.json")),
        "summary-is-the-journal": (["--summary-json", str(journal)], str(journal)),
    }[case]
    if case == "meta-is-a-folder":
        (out / "results.jsonl.meta.json").mkdir()
    beside_devices = [Path(f"/dev/{d}.meta.json") for d in ("full", "null")]
    before = [p.exists() for p in beside_devices]
    r = oxc(str(w), "--headless", *args, cwd=tmp_path)
    assert_refused(r, named, expected)
    assert journal.read_bytes() == old and earlier_journals(journal) == []
    assert not (tmp_path / "afile").is_dir()
    assert [p.exists() for p in beside_devices] == before  # nothing written into /dev


@pytest.mark.parametrize("where", ["results", "results-subfolder", "summary"])
def test_read_only_folders_are_bad_input_before_anything_is_sent(
    tmp_path: Path, read_only_dir: Path, where: str
) -> None:
    journal = tmp_path / "out" / "results.jsonl"
    if where == "results":
        journal = read_only_dir / "results.jsonl"
    elif where == "results-subfolder":
        journal = read_only_dir / "sub" / "results.jsonl"
    w = workload(tmp_path, journal)
    args = ["--summary-json", str(read_only_dir / "s.json")] if where == "summary" else []
    r = oxc(str(w), "--headless", *args, cwd=tmp_path)
    assert_refused(r, str(read_only_dir), "read-only")
    assert not journal.exists()  # nothing was sent: no journal was even created


def test_several_unusable_outputs_are_all_named(tmp_path: Path) -> None:
    w = workload(tmp_path, tmp_path / "out" / "results.jsonl")
    r = oxc(str(w), "--headless", "--output", "/dev/null", "--summary-json", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "/dev/null" in r.stderr and f"{tmp_path}: expected a regular file for the summary" in r.stderr


def test_summary_json_folder_must_exist(tmp_path: Path) -> None:
    journal = tmp_path / "out" / "results.jsonl"
    w = workload(tmp_path, journal)
    r = oxc(str(w), "--headless", "--summary-json", "nosuch/dir/s.json", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "nosuch/dir/s.json: --summary-json: expected a file in a folder that exists" in r.stderr, r.stderr
    assert not (tmp_path / "nosuch").exists() and not journal.exists(), "folders made or requests sent"


def test_resume_checks_the_journal_too(tmp_path: Path) -> None:
    w = workload(tmp_path, tmp_path / "out" / "results.jsonl")
    r = oxc(str(w), "--headless", "--resume", "--output", "/dev/null", cwd=tmp_path)
    assert_refused(r, "/dev/null", "found a character device")


# --- the summary on a stream ----------------------------------------------------------------------
@pytest.mark.parametrize("target", ["-", pytest.param("/dev/stdout", marks=pytest.mark.slow)])
def test_summary_json_on_stdout_leaves_stdout_parseable(tmp_path: Path, target: str) -> None:
    w = workload(tmp_path, tmp_path / "out" / "results.jsonl")
    run = oxc if target == "-" else oxc_process
    r = run(str(w), "--headless", "--summary-json", target, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requests"]["ok"] == 20  # the JSON alone
    assert "latency" in r.stderr  # the table went to stderr
    assert f"summary: {tmp_path / 'out' / 'summary.json'}, stdout" in r.stderr  # and beside the journal
    assert not (tmp_path / "-").exists()


@pytest.mark.slow
def test_summary_json_on_stderr(tmp_path: Path) -> None:
    w = workload(tmp_path, tmp_path / "out" / "results.jsonl")
    r = oxc_process(str(w), "--headless", "--summary-json", "/dev/stderr", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "latency" in r.stdout and '"requests"' in r.stderr and "summary.json, stderr" in r.stderr


# --- where are my results -----------------------------------------------------------------------
@pytest.mark.slow
def test_headless_run_ends_saying_where_its_files_are_and_counts_kept_journals(tmp_path: Path) -> None:
    journal = tmp_path / "out" / "results.jsonl"
    w = workload(tmp_path, journal)
    r = oxc(str(w), "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    last = r.stderr.strip().splitlines()
    beside = journal.with_name("summary.json")
    assert last[-1] == f"oxconsole: results: {journal} (20 records); summary: {beside}, s.json"
    assert "earlier journals" not in r.stderr and "kept as" not in r.stderr

    r = oxc(str(w), "--headless", cwd=tmp_path)
    [kept] = earlier_journals(journal)
    assert r.stderr.strip().splitlines()[-2:] == [
        f"oxconsole: results: {journal} (20 records); summary: {beside}",
        f"oxconsole: the previous journal was kept as {kept}",
    ]
    # one more kept aside by hand, as a run keeps it (a distinct time stamp each), then a third run
    os.utime(journal, (0, 2_000_000))
    shutil.copy(journal, tmp_path / "copy.jsonl")
    keep_aside(journal)
    shutil.copy(tmp_path / "copy.jsonl", journal)
    os.utime(journal, (0, 3_000_000))
    r = oxc(str(w), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(earlier_journals(journal)) == 3
    assert r.stderr.strip().splitlines()[-1] == (
        f"oxconsole: 3 earlier journals beside it ({tmp_path / 'out' / 'results.[0-9]*.jsonl'}); "
        "remove them when no longer needed"
    )


def test_earlier_journals_are_only_those_kept_aside(tmp_path: Path) -> None:
    journal = tmp_path / "results.jsonl"
    for name in ("results.jsonl.meta.json", "results.tuned.jsonl", "other.20260101-000000.jsonl", "x"):
        (tmp_path / name).write_text("")
    journal.write_text("{}\n{}\n")
    first = keep_aside(journal)
    journal.write_text("{}\n")
    os.utime(journal, (0, first.stat().st_mtime))  # the same second: a -1 suffix, never over it
    second = keep_aside(journal)
    assert second.name == first.name.replace(".jsonl", "-1.jsonl")
    assert earlier_journals(journal) == [first, second]
    assert journal_lines(first) == 2 and journal_lines(journal) is None


# --- the console's end, and the engine log ------------------------------------------------------
def quitting_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for `oxconsole.ui.app.run_console`: wait for a snapshot, then press `q`."""
    import asyncio
    import time

    def run_console(
        source: RunSource, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
    ) -> str:
        async def go() -> None:
            await source.start()
            deadline = time.monotonic() + 10
            while source.latest() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            source.send(Stop())
            await source.close()

        asyncio.run(go())
        return "quit"

    mod = types.ModuleType("oxconsole.ui.app")
    mod.run_console = run_console  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "oxconsole.ui.app", mod)


@pytest.mark.slow
def test_console_run_ends_saying_where_its_files_are(
    run_dirs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    journal = out / "results.jsonl"
    w = workload(tmp_path, journal, count=40)
    out.mkdir()
    journal.write_text('{"id": "old", "status": "ok"}\n')
    log = out / "engine.log"
    log.write_text("an older run\n")
    log.chmod(0o644)  # left readable by an older version
    quitting_console(monkeypatch)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.chdir(tmp_path)
    rc = cli.main([str(w), "--summary-json", "s.json"])
    assert rc in (0, 130)
    err = capsys.readouterr().err.strip().splitlines()
    [kept] = earlier_journals(journal)
    n = journal_lines(journal)
    if rc == 130:  # q came before all 40 were sent (a slow machine): the resume line ends it
        resume = err.pop()
        assert resume.startswith(f"oxconsole: {40 - (n or 0)} requests not sent; continue with: ")
        assert resume.endswith(" --resume"), resume
    assert err[-2:] == [
        f"oxconsole: results: {journal} ({n} records); summary: {out / 'summary.json'}, s.json; "
        f"engine log: {log}",
        f"oxconsole: the previous journal was kept as {kept}",
    ]
    assert json.loads((tmp_path / "s.json").read_text())["requests"]["total"] == n
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert f"oxconsole: results: {journal.resolve()} ({n} records)" in text


@pytest.mark.slow
def test_console_run_with_summary_on_stdout(
    run_dirs: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    w = workload(tmp_path, tmp_path / "out" / "results.jsonl", count=40)
    quitting_console(monkeypatch)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main([str(w), "--summary-json", "-"]) in (0, 130)
    cap = capsys.readouterr()
    assert json.loads(cap.out)["name"] == "outs"  # written by the console, not into the engine log
    assert "latency" in cap.err and "summary: " in cap.err and ", stdout; engine log" in cap.err
    assert '"requests"' not in (tmp_path / "out" / "engine.log").read_text()


@pytest.mark.slow
def test_host_process_log_is_owner_only(tmp_path: Path, run_dirs: Path) -> None:
    journal = tmp_path / "hosted" / "results.jsonl"
    w = workload(tmp_path, journal)
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole.cli.detached", "--workload", str(w)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    log = journal.parent / "engine.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert f"results: {journal} (20 records); summary: {journal.parent / 'summary.json'}" in log.read_text()


def test_journals_sharing_a_folder_keep_their_own_summary_and_log(tmp_path: Path, run_dirs: Path) -> None:
    """`--output runs/a.jsonl` then `--output runs/b.jsonl`: `runs/a.summary.json` and
    `runs/a.engine.log` for the first, `b.`'s for the second; neither overwrites the other."""
    w = workload(tmp_path, tmp_path / "unused" / "results.jsonl", count=5)
    for name, count in (("a", 5), ("b", 3)):
        args = ["--workload", str(w), "--output", f"runs/{name}.jsonl", "--set", f"run.requests={count}"]
        r = subprocess.run(
            [sys.executable, "-m", "oxconsole.cli.detached", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
    runs = tmp_path / "runs"
    assert sorted(p.name for p in runs.iterdir() if not p.name.endswith(".meta.json")) == [
        "a.engine.log",
        "a.jsonl",
        "a.server.jsonl",  # the simulator's /metrics read beside each run, each journal its own
        "a.summary.json",
        "b.engine.log",
        "b.jsonl",
        "b.server.jsonl",
        "b.summary.json",
    ]
    for name, count in (("a", 5), ("b", 3)):
        total = json.loads((runs / f"{name}.summary.json").read_text())["requests"]["total"]
        assert total == count, (name, total)
        log = (runs / f"{name}.engine.log").read_text()
        assert f"summary: {(runs / f'{name}.summary.json').resolve()}" in log, log


# --- oxconsole sim's port ----------------------------------------------------------------------------
@pytest.mark.xdist_group("sim-default-port")  # never beside the other test that takes the port
def test_sim_has_a_fixed_default_port(tmp_path: Path) -> None:
    import socket

    from oxconsole.sim.cli import DEFAULT_PORT

    assert DEFAULT_PORT not in (8000, 8080, 30000, 11434)
    helped = oxc("sim", "--help", cwd=tmp_path)
    assert f"default {DEFAULT_PORT}" in helped.stdout and "0 = any free port" in helped.stdout
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the simulator binds: TIME_WAIT is free
    try:
        probe.bind(("127.0.0.1", DEFAULT_PORT))
    except OSError:  # taken by another tool: a free port instead (test_sim_port checks the message)
        _serve_and_check(
            tmp_path, lambda url: url.startswith("http://127.0.0.1:") and f":{DEFAULT_PORT}/" not in url
        )
        return
    finally:
        probe.close()
    _serve_and_check(tmp_path, lambda url: url == f"http://127.0.0.1:{DEFAULT_PORT}/v1")


def _serve_and_check(cwd: Path, check: Callable[[str], bool]) -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "sim"], cwd=cwd, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        url = p.stdout.readline().strip()
        assert check(url), url
    finally:
        p.terminate()
        p.wait(10)


def test_unwritable_results_folder_names_the_workload_file_and_key(
    tmp_path: Path, read_only_dir: Path
) -> None:
    w = workload(tmp_path, read_only_dir / "sub" / "results.jsonl")
    r = oxc(str(w), "--headless", cwd=tmp_path)
    assert_refused(r, f"{w}: output.results: {read_only_dir / 'sub'}: expected a folder", "read-only")
    r = oxc(str(w), "--headless", "--output", str(read_only_dir / "r.jsonl"), cwd=tmp_path)
    assert_refused(r, f"--output: {read_only_dir}: expected a folder you can write to", "read-only")
