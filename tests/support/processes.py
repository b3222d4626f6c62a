"""Which tests start a process, as runs see them: the `subprocess` marker applied from a record.

Why this module exists: a hand-applied marker drifts (a test that moves to the command line in
its own process keeps a mark it no longer earns, a new one that starts the simulator lacks it),
and `pytest -m "not subprocess"` is only as quick as the marks are true. So the marker is not
written on tests: a run watches each test's setup and call through an audit hook
(`sys.addaudithook`: `subprocess.Popen`, `os.fork`, `os.forkpty`, `os.posix_spawn`, `os.exec`,
`os.spawn`, `os.system`), keeps the node ids of the tests that started a process in
`tests/processes.txt` (committed, sorted), and marks those tests `subprocess` at collection.

- What the interpreter probes once by starting a process (`platform.processor()` runs
  `uname -p`) is probed before the first test (PROBES), not counted for whichever test asks first.
- multiprocessing starts its `spawn` and `forkserver` processes with `_posixsubprocess.fork_exec`,
  which raises no audit event: the hook wraps that one function to raise one.
- A process started while a fixture wider than a function is set up (a simulator for the
  module, the session's Ray) counts for every test that uses that fixture, not only for the
  test whose setup happened to start it.
- Under pytest-xdist each worker watches its own tests and says so in the test's report
  (`user_properties`, `("starts_process", True)`); only the controller (or a run without
  workers) writes the record.
- The record changes when a run sees a test start a process that is not in it (added), a test
  in it pass without starting one (removed), or, in a run that collected whole files with no
  selection (`-k`, `-m`, `--deselect`, `--lf`, `--sw`), a test of such a file that is gone. The
  run says what changed once, at its end; a test added is marked from the next run on.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

RECORD = Path(__file__).resolve().parents[1] / "processes.txt"
"""tests/processes.txt: one node id a line, sorted, after a comment saying what it is."""

HEADER = (
    "# Tests that start a process (a child Python, a fork, the simulator, Ray), as runs saw them.\n"
    "# tests/support/processes.py marks these `subprocess` at collection and keeps this file.\n"
)

FORK_EXEC = "_posixsubprocess.fork_exec"
"""The audit event the wrapped `_posixsubprocess.fork_exec` raises (CPython raises none)."""

STARTS = frozenset(
    {
        "subprocess.Popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.spawn",
        "os.system",
        "os.startfile",
        FORK_EXEC,
    }
)
"""The audit events that start a process."""

PROBES = "platform.processor()"
"""What a process asks once and keeps, by starting a process (`uname -p`), and is asked before
any test runs: the OpenAI SDK reads it for its request headers, so the first test of a worker to
build an SDK client was seen starting a process, and which test that was depended on the order."""

PROPERTY = ("starts_process", True)
"""What a test's report carries (`user_properties`) when the test started a process."""


class Watch:
    """Process starts counted while a test's setup or call runs (audit hooks cannot be removed:
    the one hook counts only while `active`)."""

    def __init__(self) -> None:
        self.active = False
        self.seen = 0
        self.fixtures: set[tuple[str, str]] = set()
        """(name, baseid) of the fixtures wider than a function whose setup started a process."""


WATCH = Watch()


def _audit(event: str, _args: tuple[Any, ...]) -> None:
    if WATCH.active and event in STARTS:
        WATCH.seen += 1


def _watch_fork_exec() -> None:
    """Make multiprocessing's process starts visible to the audit hook (see the module's doc)."""
    try:
        import _posixsubprocess
    except ImportError:  # not POSIX: multiprocessing spawns through subprocess-free paths there
        return
    real: Callable[..., int] = _posixsubprocess.fork_exec

    def fork_exec(*args: Any) -> int:
        sys.audit(FORK_EXEC)
        return real(*args)

    _posixsubprocess.fork_exec = fork_exec


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def read_record(path: Path = RECORD) -> set[str]:
    """The node ids in the record (none when there is no record yet)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return set()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


def write_record(ids: Iterable[str], path: Path = RECORD) -> None:
    """The record, sorted, written whole (a reader never sees half of it)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(HEADER + "".join(f"{i}\n" for i in sorted(ids)))
    tmp.replace(path)


# -- the plugins -------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """A process that runs tests watches them (an xdist controller runs none: its watcher stays
    idle); the one that reports (the controller, or a run without workers) keeps the record."""
    record = read_record()
    if not _is_worker(config):
        config.pluginmanager.register(Recorder(config, record), "process-record")
    platform.processor()  # see PROBES
    if hasattr(sys, "addaudithook"):
        sys.addaudithook(_audit)
        _watch_fork_exec()
    config.pluginmanager.register(Watcher(record), "process-watch")


class Watcher:
    """Marks the recorded tests; watches each test's setup and call for a process start."""

    def __init__(self, record: set[str]) -> None:
        self.record = record

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Mark the recorded tests before `-m` selects (tryfirst)."""
        for item in items:
            if item.nodeid in self.record:
                item.add_marker(pytest.mark.subprocess)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from _watching(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from _watching(item))

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[Any]) -> Generator[None, object, object]:
        before = WATCH.seen
        try:
            return (yield)
        finally:
            if WATCH.active and WATCH.seen > before and fixturedef.scope != "function":
                WATCH.fixtures.add((fixturedef.argname, fixturedef.baseid))


def _watching(item: pytest.Item) -> Generator[None, object, object]:
    WATCH.active, WATCH.seen = True, 0
    try:
        return (yield)
    finally:
        WATCH.active = False
        names = getattr(item, "fixturenames", ())
        by_fixture = any(n in names and item.nodeid.startswith(base) for n, base in WATCH.fixtures)
        if (WATCH.seen or by_fixture) and PROPERTY not in item.user_properties:
            item.user_properties.append(PROPERTY)


class Recorder:
    """Collects what the tests' reports say and writes the record's changes at the run's end."""

    def __init__(self, config: pytest.Config, record: set[str]) -> None:
        self.config = config
        self.before = record
        self.started: set[str] = set()
        self.passed_without: set[str] = set()
        self.collected: set[str] = set()
        self.collection_failed = False
        self.added: list[str] = []
        self.removed: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = plain_nodeid(report.nodeid)
        if PROPERTY in report.user_properties:
            self.started.add(nodeid)
        elif report.when == "call" and report.passed:
            self.passed_without.add(nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_failed = True

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected.update(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.collected.update(plain_nodeid(i) for i in ids)

    def pytest_sessionfinish(self) -> None:
        root = self.config.rootpath
        gone = {i for i in self.before if not (root / i.split("::")[0]).exists()}
        if not self.collection_failed and self.collected:
            whole = _whole_files(self.config)
            gone |= {i for i in self.before if whole(i) and i not in self.collected}
        removed = (self.passed_without - self.started) | gone
        self.added = sorted(self.started - self.before)
        self.removed = sorted(removed & self.before)
        if self.added or self.removed:
            now = read_record()  # another run may have written it meanwhile: apply this run's changes
            write_record((now | set(self.added)) - set(self.removed))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.added or self.removed):
            return
        tr = terminalreporter
        where = os.path.relpath(RECORD, self.config.invocation_params.dir)
        tr.section("tests that start processes", sep="-")
        if self.added:
            tr.write_line(f"{where}: {len(self.added)} added (marked `subprocess` from the next run):")
            for nodeid in self.added:
                tr.write_line(f"  + {nodeid}")
        if self.removed:
            tr.write_line(f"{where}: {len(self.removed)} removed (started no process, or gone):")
            for nodeid in self.removed:
                tr.write_line(f"  - {nodeid}")


def plain_nodeid(nodeid: str) -> str:
    """`nodeid` without the `@group` that pytest-xdist's `--dist loadgroup` appends to the ids of
    `xdist_group` tests (after the test's name and parameters, where no id has an @)."""
    head, sep, last = nodeid.rpartition("::")
    end = last.rfind("]") + 1  # past the parameters, if any
    if "@" not in last[end:]:
        return nodeid
    return head + sep + last[:end] + last[end:].partition("@")[0]


def _whole_files(config: pytest.Config) -> Callable[[str], bool]:
    """Whether this run collected the whole of a node id's file: no selection options, and an
    argument (or testpaths) that is the file or a folder above it."""
    o = config.option
    selected = (
        getattr(o, "keyword", "")
        or getattr(o, "markexpr", "")
        or getattr(o, "deselect", None)
        or getattr(o, "lf", False)
        or getattr(o, "stepwise", False)
    )
    if selected:
        return lambda nodeid: False
    here = config.invocation_params.dir
    roots = [(here / a).resolve() for a in config.args if "::" not in a]

    def whole(nodeid: str) -> bool:
        f = (config.rootpath / nodeid.split("::")[0]).resolve()
        return any(f == r or r in f.parents for r in roots)

    return whole
