"""Ray's token authentication: a local run leaves no `~/.ray/auth_token` behind (which would turn
token authentication on for every later `ray start --head` here), and a run joins a cluster that
wants a token without RAY_AUTH_MODE=token set by the user, when a token is at hand.

Each test runs Ray in processes of its own with HOME in a temporary folder, so the user's own
`~/.ray` is never read or written; the cluster a test starts is shut down by the process that
started it (never `ray stop`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ray import on_ray
from tests.support.workloads import write_workload

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

HEAD = """
import os, sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False})
print(cluster.address, flush=True)
sys.stdin.read()  # until the test closes it
cluster.shutdown()
"""


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    return {**env, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **extra}


def _oxconsole(
    *args: str, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """The command line in a process whose environment is exactly `env` (none of this process's
    RAY_AUTH_*, which a Ray session in it may have set)."""
    cmd = [sys.executable, "-m", "oxconsole", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _workload(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_workload(
        "sim_workers", folder, {**on_ray(40, "10ms"), "output.results": None}, file="w.toml"
    )


def test_a_local_run_leaves_no_token_file(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    home = tmp_path / "home"
    home.mkdir()
    wl = _workload(tmp_path / "run")
    args = (str(wl), "--headless", "--ray-address", "local", "--summary-json", "-")
    p = _oxconsole(*args, cwd=wl.parent, env=_env(home), timeout=150)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["workers"] == 2
    left = home / ".ray" / "auth_token"
    assert not left.exists(), f"{left} was left behind: {left.read_text()!r}"


def test_a_cluster_that_wants_a_token_is_joined_with_the_token_at_hand(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    home = tmp_path / "home"
    home.mkdir()
    token = tmp_path / "token"
    token.write_text("b" * 64)
    head_env = _env(home, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    head = subprocess.Popen(
        [sys.executable, "-c", HEAD], env=head_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        assert address, "the head did not start"
        wl = _workload(tmp_path / "run")
        env = _env(home, RAY_AUTH_TOKEN_PATH=str(token))  # no RAY_AUTH_MODE: the user did not set it
        args = (str(wl), "--headless", "--ray-address", address, "--summary-json", "-")
        p = _oxconsole(*args, cwd=wl.parent, env=env, timeout=240)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["requests"]["ok"] == 40, p.stdout
    finally:
        assert head.stdin is not None
        head.stdin.close()
        head.wait(60)
    assert not (home / ".ray" / "auth_token").exists()
