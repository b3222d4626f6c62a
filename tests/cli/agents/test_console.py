"""An agent's change in a person's console: a run's console open in tmux at 80x24 (as over SSH), an
agent turning the concurrency through `oxconsole mcp`'s `set`, and the console saying who did it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from oxconsole.control import list_runs
from tests.support import wait_until
from tests.support.agents import connected, data, stopping_runs
from tests.support.workloads import write_workload

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (.ci/run installs it)")


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, check=True).stdout


async def test_a_console_in_tmux_shows_an_agents_change(run_dirs: Path, tmp_path: Path) -> None:
    w = write_workload("agent", tmp_path)
    sock = f"oxc-agent-{os.getpid()}"
    env = [f"-e{k}={os.environ[k]}" for k in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME") if k in os.environ]
    command = f"cd {shlex.quote(str(tmp_path))} && exec {shlex.quote(sys.executable)} -m oxconsole {w.name}"
    with stopping_runs():
        _tmux(sock, "new-session", "-d", "-s", "run", "-x", "80", "-y", "24", *env, command)
        try:
            wait_until(lambda: any(e.state == "running" for e in list_runs()), 60, "the console's run")
            wait_until(lambda: "ok " in _tmux(sock, "capture-pane", "-p", "-t", "run"), 30, "the console")
            async with connected() as client:
                out = data(await client.call_tool("set", {"name": "agent", "concurrency": 9}))
            assert [(c["what"], c["from"], c["to"], c["by"]) for c in out["changes"]] == [
                ("concurrency", 4, 9, "agent")
            ], out

            def pane() -> str:
                return _tmux(sock, "capture-pane", "-p", "-t", "run")

            wait_until(lambda: "phase 1" in pane(), 20, "the new phase in the header")
            for _ in range(3):  # models -> latency -> errors -> phase
                _tmux(sock, "send-keys", "-t", "run", "t")
            wait_until(lambda: "concurrency 4→9 (agent)" in pane(), 20, "the agent's change in the phase tab")
            assert all(len(line) <= 80 for line in pane().splitlines()), pane()
        finally:
            subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
