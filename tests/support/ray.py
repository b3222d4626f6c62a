"""What the Ray test files share: their workload, the one Ray a process has, and the loopback check
of what Ray listens on."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_until
from tests.support.workloads import Sets


def on_ray(count: int, ttft: str) -> Sets:
    """tests/workloads/sim_workers.toml on Ray (`run.cluster = "ray"`): two actors at 8 in flight,
    one model, "a", `count` prompts each answered `ttft` after admission."""
    return {
        "run.cluster": "ray",
        "models": [{"name": "a"}],
        "prompts.synthetic.count": count,
        "sim.models.a.ttft": ttft,
        "sim.models.b": None,
    }


def local_ray() -> Iterator[Any]:
    """The `ray_local` fixture (tests/conftest.py, session-scoped): one local Ray instance for
    every test of the session that asks for it (2 CPUs, no dashboard, 127.0.0.1 only), started once
    and shut down at the end. Ray started again in one process after a shutdown can end that
    process (SystemExit 15), so it is started once, not per module; the cluster tests, which need
    a Ray of their own, run after every test using this one (`conftest.py` orders them last) and
    stop it first (`stop_ray`). Never `ray stop` (that would stop every Ray process here)."""
    # Read as Ray is imported: with _node_ip_address, it keeps every port on loopback.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray = pytest.importorskip("ray")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield ray
    finally:
        stop_ray(ray)


def stop_ray(ray: Any) -> None:
    """This process's Ray shut down, if it has one (the session's local one, before a cluster)."""
    if ray.is_initialized():
        ray.shutdown()


def descendants(pid: int) -> set[int]:
    """This process's children, theirs, and so on (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def listening(pids: set[int]) -> list[tuple[str, str]]:
    """(local address, process) of every TCP socket listening in `pids`, as `ss -ltnp` shows them
    (read from /proc where `ss` is not installed)."""
    if shutil.which("ss") is None:
        return _listening_from_proc(pids)
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            found.append((line.split()[3], line.split()[-1]))
    return found


def _listening_from_proc(pids: set[int]) -> list[tuple[str, str]]:
    """`listening` from /proc/net/tcp{,6} (state 0A: LISTEN) and each process's socket inodes."""
    owner: dict[str, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        owner[link[8:-1]] = pid
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[3] != "0A" or cols[9] not in owner:
                    continue
                hexip, hexport = cols[1].split(":")
                if len(hexip) == 8:
                    ip = ".".join(str(b) for b in reversed(bytes.fromhex(hexip)))
                else:
                    ip = "[::1]" if hexip == "0" * 24 + "01000000" else f"[{hexip}]"
                found.append((f"{ip}:{int(hexport, 16)}", f"pid={owner[cols[9]]}"))
    return found


def assert_loopback(pids: set[int]) -> None:
    """Every port the processes `pids` listen on is on 127.0.0.1 (and there are Ray's and the
    simulators' at least)."""
    ports = listening(pids)
    assert len(ports) >= 3, ports  # Ray's own (GCS, raylet, object manager...) and the simulators
    wide = [p for p in ports if not p[0].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:"))]
    assert not wide, f"listening beyond loopback: {wide}"


def stopped_once(
    args: list[str], cwd: Path, ready: Callable[[subprocess.Popen[str]], object]
) -> tuple[int, str, float]:
    """`python -m oxconsole ARGS`, sent SIGTERM once `ready(proc)`: (exit code, stderr, seconds
    from the signal to the end)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    try:
        wait_until(lambda: ready(proc), timeout=90, what="the moment to stop the run")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        proc.kill()
