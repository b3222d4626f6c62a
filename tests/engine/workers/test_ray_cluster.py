"""run.cluster = "ray" on two Ray nodes: the actors spread one per node, a node lost mid-run.

One `ray.cluster_utils.Cluster` for the module: a head and one more node, each with 1 CPU, both on
127.0.0.1 (their processes are this test process's descendants, so the loopback check sees them).
The module shuts down only that cluster's processes (never `ray stop`). Its tests share the "ray"
xdist group with tests/engine/workers/test_ray.py, so two Ray sessions never run in one process at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oxconsole.cli.main import main
from oxconsole.engine.runner import make_engine
from oxconsole.engine.workers.raypool import RayShards
from tests.support import free_port, journal, oxconsole, until, wait_until
from tests.support.ray import assert_loopback, descendants, on_ray, stop_ray, stopped_once
from tests.support.workloads import load_workload

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

NODE: dict[str, Any] = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


CLIENT_PORT = free_port()
"""The head's Ray Client server (ray://), for the run started from outside the cluster."""


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[Any, Any]]:
    """(ray, cluster): a head and one more node, 1 CPU each, on 127.0.0.1; this process joined."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read as Ray is imported (loopback only)
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    stop_ray(ray)  # the session's local Ray, if a test before used it (`ray_support.local_ray`)
    head = {**NODE, "include_dashboard": False, "ray_client_server_port": CLIENT_PORT}
    cluster: Any = Cluster(initialize_head=True, head_node_args=head)
    try:
        cluster.add_node(**NODE)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        yield ray, cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def alive_nodes(ray: Any) -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


async def test_two_actors_spread_one_per_node(tmp_path: Path, two_nodes: tuple[Any, Any]) -> None:
    ray, _ = two_nodes
    w = load_workload("sim_workers", tmp_path, on_ray(300, "20ms"))
    e = make_engine(w, results_path=w.results_path(), total_expected=300)
    assert isinstance(e.shards, RayShards)
    pids: set[int] = set()

    async def midway() -> None:
        await until(lambda: e.latest is not None and e.latest.counts.total >= 10, timeout=90)
        pids.update(descendants(os.getpid()))  # both nodes' Ray processes, the actors, their simulators
        assert_loopback(pids)

    m = asyncio.create_task(midway())
    out = await e.run()
    await m
    assert out.exit_code == 0 and out.summary["workers"] == 2
    nodes = [node for _, node in e.shards.nodes]
    assert len(nodes) == 2 and set(nodes) == alive_nodes(ray), nodes  # one actor on each node
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == 300 == len(set(ids))


@pytest.mark.parametrize("client", [False, True], ids=["gcs-address", "ray-client"])
def test_a_process_outside_joins_the_cluster_at_its_address(
    tmp_path: Path, two_nodes: tuple[Any, Any], client: bool
) -> None:
    """`--ray-address HEAD:PORT` (the GCS, as on a node) and `ray://HEAD:PORT` (Ray Client, as
    from a laptop): a process of its own, not yet in the cluster, joins it and runs the two actors
    there; Ray's own log lines stay off its stderr."""
    _, cluster = two_nodes
    w = load_workload("sim_workers", tmp_path, on_ray(200, "20ms"))
    # the environment this process joined with (RAY_AUTH_MODE=token when Ray turned token auth on)
    address = f"ray://127.0.0.1:{CLIENT_PORT}" if client else cluster.address
    p = oxconsole(
        str(w.path),
        "--headless",
        "--ray-address",
        address,
        "--summary-json",
        "-",
        cwd=w.path.parent,
        timeout=150,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["workers"] == 2
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == 200 == len(set(ids))
    noise = [line for line in p.stderr.splitlines() if re.search(r"\s(INFO|WARNING)\s|Warning:", line)]
    assert not noise, noise


def test_a_node_lost_mid_run_is_reported_and_resume_sends_the_rest(
    tmp_path: Path, two_nodes: tuple[Any, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line's run: a node removed mid-run ends it (exit 1, the lost actor named), and
    `--resume` on a replacement node sends what was left: every id exactly once overall."""
    ray, cluster = two_nodes
    w = load_workload("sim_workers", tmp_path, on_ray(600, "50ms"))
    results = w.results_path()
    [node] = cluster.worker_nodes
    removed: list[float] = []

    def remove_node_midway() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and lines(results) < 20:
            time.sleep(0.05)
        cluster.remove_node(node)
        removed.append(time.monotonic())

    remover = threading.Thread(target=remove_node_midway, daemon=True)
    remover.start()
    assert main([str(w.path), "--headless"]) == 1
    remover.join(10)
    assert removed, "the node was not removed"
    err = capsys.readouterr().err
    assert "ray actor" in err and "was lost" in err and "--resume" in err, err
    first = [r["id"] for r in journal(w)]
    assert len(first) == len(set(first)) and 20 <= len(first) < 600

    cluster.add_node(**NODE)  # the node replaced: two CPUs again for the two actors
    assert len(alive_nodes(ray)) == 2
    assert main([str(w.path), "--headless", "--resume"]) == 0
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == 600 == len(set(ids))


def lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def test_a_stop_while_the_cluster_finds_no_cpus_ends_the_run_and_frees_the_group(
    tmp_path: Path, two_nodes: tuple[Any, Any]
) -> None:
    """3 actors on 2 CPUs: the placement group waits (up to a minute) for a third; a SIGTERM
    meanwhile ends the run at once (exit 130) and removes the group."""
    _, cluster = two_nodes
    from ray.util import placement_group_table

    w = load_workload("sim_workers", tmp_path, {**on_ray(40, "1ms"), "run.workers": 3})
    before = set(placement_group_table())

    def groups(state: str) -> list[str]:
        return [k for k, v in placement_group_table().items() if k not in before and v["state"] == state]

    args = [str(w.path), "--headless", "--ray-address", cluster.address]
    code, err, took = stopped_once(args, w.path.parent, lambda _: groups("PENDING"))
    assert code == 130, err
    assert took < 10, f"{took:.1f} s: the stop waited for the placement"  # it waits up to 60 s
    wait_until(lambda: not groups("PENDING") and groups("REMOVED"), timeout=30, what="the group removed")
