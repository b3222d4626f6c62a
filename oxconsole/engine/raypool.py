"""`run.cluster = "ray"`: the worker pool's engines as Ray actors, on one machine or many.

Why this module exists: `run.workers` scales to the cores of one machine; past that the engines must
run elsewhere while the process the user started stays the run (journal, summary, console, control
socket, live commands). `RayPool` is a `WorkerPool` whose workers are actors: each runs the same
`worker.Worker` on its shard, and the same messages (`wire.py`) cross Ray instead of a pipe, so all
the parent-side logic (records into the journal and collector, gauges, commands in shares, a worker
lost) is the pool's, unchanged. `raychannel.py` carries the bytes; this module starts and ends Ray,
the placement group and the actors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from oxconsole.engine.pool import WorkerHandle, WorkerPool, share
from oxconsole.engine.raychannel import START_S, ActorProc, DriverChannel, EngineActor, import_ray
from oxconsole.engine.rayfiles import to_ship
from oxconsole.workload import WorkloadError

PLACE_S = 60.0
"""How long the cluster may take to find a CPU for every actor before the run gives up (exit 2)."""


def ray_address() -> str:
    """Where the cluster is: `--ray-address` (which sets RAY_ADDRESS), RAY_ADDRESS, else "local"."""
    return os.environ.get("RAY_ADDRESS", "").strip() or "local"


def connect(n: int) -> bool:
    """Join (or, for "local", start) the Ray cluster; False when this process was already in one
    (then it is not ours to shut down). A local instance listens on 127.0.0.1 only."""
    address = ray_address()
    if address == "local":  # read as Ray is imported; with _node_ip_address: loopback only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return False
    # Ray's start-up notes would land amid the progress lines (or under the console); errors still show.
    logging.getLogger("ray").setLevel(logging.ERROR)
    try:
        if address == "local":
            cpus = max(n, os.cpu_count() or 1)
            ray.init(
                address="local",
                _node_ip_address="127.0.0.1",
                num_cpus=cpus,
                include_dashboard=False,
                log_to_driver=False,  # the actors' output stays in Ray's logs, off the console
                configure_logging=False,
            )
        else:
            # logging_level: Ray Client sets its logger up again from this (INFO otherwise)
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as e:  # Ray raises ConnectionError, ValueError, RuntimeError... by situation
        raise WorkloadError(
            f"run.cluster: could not join the Ray cluster at {address!r}: {e}{_join_hint(address, e)}"
        ) from e
    return True


def _join_hint(address: str, e: Exception) -> str:
    """What to try when Ray could not be joined, for the causes seen in practice."""
    if address.startswith("ray://") and "timeout" in str(e).lower():
        if not os.environ.get("RAY_AUTH_MODE"):
            return (
                "\n  if the cluster uses token authentication (recent Ray turns it on wherever a token "
                "exists), set RAY_AUTH_MODE=token and the token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                "~/.ray/auth_token); else check that the head's client port is reachable from here"
            )
        return "\n  check that the head's client port (10001 by default) is reachable from here"
    return ""


class RayPool(WorkerPool):
    """A `WorkerPool` whose N workers are Ray actors (`num_cpus = 1` each, spread over the nodes)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started_ray = False
        self._pg: Any = None
        self.nodes: list[tuple[str, str]] = []
        """(address, Ray node id) of each actor's node, once they have started."""

    async def run(self) -> Any:
        self._started_ray = await asyncio.to_thread(connect, self.n)
        try:
            return await super().run()
        finally:
            await asyncio.to_thread(self._release)

    def _release(self) -> None:
        ray = import_ray()
        for wk in self._workers:
            wk.proc.kill()
        if self._pg is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self._pg)
        if self._started_ray:
            ray.shutdown()

    async def _start_workers(self) -> None:
        """The actors, each with its share and its own simulator for `base_url = "sim"`."""
        await asyncio.to_thread(self._spawn_actors)

    def _spawn_actors(self) -> None:
        ray = import_ray()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self.w.run.workers == "auto":  # one actor per CPU of the cluster
            self.n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._pg = placement_group([{"CPU": 1}] * self.n, strategy="SPREAD")
        ready, _ = ray.wait([self._pg.ready()], timeout=PLACE_S)
        if not ready:
            raise WorkloadError(
                f"run.workers: the Ray cluster found no CPU for each of {self.n} actors in {PLACE_S:.0f} s "
                f"(it has {ray.cluster_resources().get('CPU', 0):g} CPUs)"
            )
        sims = [e.name for e in self.w.endpoints.values() if e.base_url == "sim"]
        skip = ray.put(list(self.skip_ids)) if self.skip_ids else None
        remote = ray.remote(num_cpus=1, max_concurrency=4)(EngineActor)
        actors = []
        for i in range(self.n):
            strategy = PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=i)
            actors.append(remote.options(scheduling_strategy=strategy, name=None).remote())
        files = to_ship(self.w, ray.put, self.warnings.append)
        starts = [
            a.start.remote(share(self.w, i, self.n), (i, self.n), sims, skip, files)
            for i, a in enumerate(actors)
        ]
        try:
            self.nodes = [(str(ip), str(node)) for ip, node in ray.get(starts, timeout=START_S)]
        except Exception as e:  # GetTimeoutError, or an actor that could not be created
            for a in actors:
                ray.kill(a)
            raise WorkloadError(
                f"run.cluster: the Ray actors did not start within {START_S:.0f} s: {e}"
            ) from e
        for i, actor in enumerate(actors):
            self._workers.append(WorkerHandle(ActorProc(actor), DriverChannel(actor)))
            threading.Thread(target=self._reader, args=(i,), daemon=True, name=f"oxconsole-ray-{i}").start()

    def _lost(self, i: int) -> str:
        ip, node = self.nodes[i] if i < len(self.nodes) else ("?", "?")
        conn = self._workers[i].conn
        why = conn.why if isinstance(conn, DriverChannel) else "?"
        return f"ray actor {i} (node {ip}, id {node[:8]}) was lost: {why}"
