"""What the tests of `oxconsole mcp` share: the server over this user's real runs, the SDK's own
in-memory client connected to it, and the runs a test started stopped at its end.

A context manager rather than a fixture connects the client: the client holds a task group, which
must be left in the task that entered it (pytest-asyncio tears async fixtures down in another).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from oxconsole.cli.agents.runs import Runs
from oxconsole.cli.agents.tools import build_server
from oxconsole.control import RunEntry, list_runs
from tests.support import wait_until
from tests.support.workloads import write_workload

TICK_S = 0.05
"""The resources' update interval in tests (the server's is 1 s): an update arrives in a tick."""


@asynccontextmanager
async def connected(mode: str = "auto", interval: float = TICK_S, **kw: Any) -> AsyncIterator[Client]:
    """The server over this user's runs (`Runs`), and the SDK's client connected to it in process
    ("auto": the 2026-07-28 protocol; "legacy": the 2025-11-25 handshake, as today's hosts speak)."""
    runs = Runs()
    mcp, _ = build_server(runs, interval=interval)
    try:
        async with Client(mcp, mode=mode, raise_exceptions=True, **kw) as c:
            yield c
    finally:
        await runs.close()


def data(result: Any) -> Any:
    """A successful tool result's structured content (the test fails with the refusal otherwise)."""
    assert not result.is_error, result.content[0].text if result.content else result
    return result.structured_content


def refusal(result: Any) -> str:
    """A refused tool call's message, alone."""
    assert result.is_error, result.structured_content
    return str(result.content[0].text)


@contextlib.contextmanager
def stopping_runs() -> Iterator[None]:
    """Runs started inside are ended when the block is left (SIGTERM, as `kill` would), whatever
    the test did: a detached engine process outlives the test otherwise."""
    before = {e.pid for e in list_runs()}
    try:
        yield
    finally:
        for e in list_runs():
            if e.pid not in before:
                with contextlib.suppress(OSError):
                    os.kill(e.pid, signal.SIGTERM)


@contextlib.contextmanager
def headless_run(folder: Path) -> Iterator[RunEntry]:
    """tests/workloads/agent.toml run headless in a process of its own (as a person starts it in a
    terminal), until the block is left; its registry entry once its clock has started."""
    w = write_workload("agent", folder)
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(w), "--headless"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: any(e.pid == p.pid and e.state == "running" for e in list_runs()), 60, "the run's clock"
        )
        yield next(e for e in list_runs() if e.pid == p.pid)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(30)
