"""Shared fixtures: private folders for run sockets and registry entries, the session's local Ray, a
simulator process for a module. And which tests pytest-xdist keeps together, the order of the Ray
tests, and which tests start processes (marked `subprocess` from tests/processes.txt, which runs
keep: tests/support/processes.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.ray import local_ray

pytest_plugins = ("tests.support.processes",)


@pytest.fixture
def run_dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Private runtime and state folders (short paths: a socket path has ~100 bytes)."""
    base = Path(tempfile.mkdtemp(prefix="oxc", dir="/tmp"))
    rt = base / "rt"
    rt.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """The simulator in its own process (`oxconsole sim`), one for the module; its base URL
    *with* /v1."""
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "sim", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    url = p.stdout.readline().strip()
    yield url
    p.terminate()
    p.wait(10)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Any]:
    """One local Ray instance for the session (`ray_support.local_ray`); skipped without Ray."""
    yield from local_ray()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): two workers per core. Most tests wait (on simulated
    TTFTs, on child processes starting), so one worker per core left the cores idle a third of
    the time: on 2 cores, 2 workers took 198 s and 4 took 126 s. PYTEST_XDIST_AUTO_NUM_WORKERS,
    when set, decides instead (pytest-xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2 * (os.cpu_count() or 1)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the package's bytecode once, before any test starts a process.

    The suite starts hundreds of Python processes (the command line, the engine host, workers,
    the simulator). Where `PYTHONDONTWRITEBYTECODE` is set (as on this project's machines) none
    of them writes its bytecode, so each compiled all of oxconsole again: about 0.25 s of CPU per
    process. Bytecode already on disk is read whatever that variable says. Under pytest-xdist
    this runs in the controller and in each worker; compiling what is current is a no-op."""
    import compileall

    import oxconsole

    compileall.compile_dir(Path(oxconsole.__file__).parent, quiet=1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`--dist loadgroup`, pyproject's addopts) tests of one `xdist_group` run on
    one worker, one after another. The `timing` tests form one: each reads the clock, so at most
    one of them runs at a time (beside whatever the other workers run; their tolerances hold on a
    loaded 2-core machine). Without xdist the mark does nothing.

    A process has one Ray at a time: the tests on the session's local Ray (`ray_local`) run
    before those on a Ray cluster of their own (`two_nodes`, test_ray_cluster.py), which stops the
    local one first; the sort is stable, so the rest keep their order."""
    for item in items:
        if item.get_closest_marker("timing") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group("timing"))
    items.sort(key=lambda item: "two_nodes" in getattr(item, "fixturenames", ()))
