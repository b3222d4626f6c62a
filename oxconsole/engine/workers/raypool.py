"""`run.cluster = "ray"`: a run's shards as Ray actors, on one machine or many.

Why this module exists: `run.workers` scales to the cores of one machine; past that the shards must
run elsewhere while the process the user started stays the run's coordinator (journal, summary,
console, control socket, live commands). `RayShards` are `pool.ProcessShards` whose workers are
actors: each runs the same `worker.Worker` on its share, and the same messages (`messages.py`)
cross Ray instead of a pipe, so everything on the coordinator's side (records into the journal and
collector, gauges, commands in shares, a worker lost) is the same code. `raychannel.py` carries
the bytes; this module starts and ends Ray, the placement group and the actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from typing import Any

from oxconsole.engine.workers.pool import ProcessShards, WorkerHandle
from oxconsole.engine.workers.raychannel import START_S, ActorProc, DriverChannel, EngineActor, import_ray
from oxconsole.engine.workers.rayfiles import to_ship
from oxconsole.engine.workers.raytoken import local_start_token, retry_in_token_mode
from oxconsole.engine.workers.split import share, worker_count
from oxconsole.workload import Workload, WorkloadError

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
            local_start_token()  # no ~/.ray/auth_token left behind (raytoken.py)
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
            _join_or_retry_with_token(ray, address)
    except Exception as e:  # Ray raises ConnectionError, ValueError, RuntimeError... by situation
        raise WorkloadError(
            f"run.cluster: could not join the Ray cluster at {address!r}: {e}{_join_hint(address, e)}"
        ) from e
    return True


CLIENT_TRIES = 3
"""Ray Client joins tried: its head forks a server for each client, and that fork fails now and
then ("Starting Ray client server failed": gRPC's poller in the child, Ray 2.60, about 1 in 5
joins here); the next one starts."""


def _join(ray: Any, address: str) -> None:
    """`ray.init` at a cluster's address, again after a Ray Client server that failed to start."""
    for attempt in range(1, CLIENT_TRIES + 1):
        try:
            # logging_level: Ray Client sets its logger up again from this (INFO otherwise)
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            return
        except Exception as e:
            if attempt == CLIENT_TRIES or "client server failed" not in str(e).lower():
                raise
            if ray.is_initialized():
                ray.shutdown()


def _join_or_retry_with_token(ray: Any, address: str) -> None:
    """`_join`, and once more in token mode when it failed and a token is at hand (raytoken.py)."""
    try:
        _join(ray, address)
    except Exception as e:
        if not retry_in_token_mode(e):
            raise
        if ray.is_initialized():
            ray.shutdown()
        _join(ray, address)


def _join_hint(address: str, e: Exception) -> str:
    """What to try when Ray could not be joined, for the causes seen in practice (Ray 2.60: a
    cluster started where a token exists, e.g. after a local run, uses token authentication, and
    a driver joins it only with RAY_AUTH_MODE=token; Ray says only "failed to connect")."""
    where = (
        "the head's client port (10001 by default)" if address.startswith("ray://") else "the head's GCS port"
    )
    if "timeout" in str(e).lower() or "failed to connect" in str(e).lower():
        return (
            f"\n  check that {where} is reachable from here; if the cluster uses token "
            "authentication, set RAY_AUTH_MODE=token (the token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH "
            "or ~/.ray/auth_token)"
        )
    return ""


class _Halted(Exception):
    """A stop came while the actors were starting."""


class RayShards(ProcessShards):
    """`ProcessShards` whose N workers are Ray actors (`num_cpus = 1` each, spread over the nodes)."""

    def __init__(self, workload: Workload, workers: int | None = None) -> None:
        super().__init__(workload, workers or worker_count(workload))
        self._started_ray = False
        self._pg: Any = None
        self.nodes: list[tuple[str, str]] = []
        """(address, Ray node id) of each actor's node, once they have started."""
        self._halt = threading.Event()
        """A stop came: joining, placing and starting give up (each can take Ray tens of seconds)."""
        self._halted: asyncio.Event | None = None
        self._joining = False
        """`ray.init` is still running in its thread, left there by a stop: nothing of Ray is touched."""
        self._let_go = threading.Event()
        """Set once the run has let go of Ray: the thread that joined it may end."""

    def stop(self, cancel: bool) -> None:
        self._halt.set()
        loop, halted = self._loop, self._halted
        if loop is not None and halted is not None and not loop.is_closed():
            loop.call_soon_threadsafe(halted.set)
        super().stop(cancel)

    async def connect(self) -> None:
        """Join the cluster (before the journal opens: a cluster that cannot be joined is bad input)."""
        self._loop = asyncio.get_running_loop()
        self._halted = asyncio.Event()
        if self._halt.is_set():
            self._halted.set()
        self._started_ray = await self._join()

    async def release(self) -> None:
        await asyncio.to_thread(self._release)

    async def _join(self) -> bool:
        """`connect` in a thread of its own, given up when a stop comes first (Ray tries to join for
        20 to 60 s before it says it cannot): the run then ends at once, with nothing sent.

        The thread lives until the run has let go of Ray (`_release`): a local Ray's processes are
        started with PR_SET_PDEATHSIG, which the kernel sends when the *thread* that started them
        ends, so a thread that ended after `ray.init` would take the local cluster with it."""
        loop = asyncio.get_running_loop()
        joined: asyncio.Future[bool] = loop.create_future()

        def settle(result: bool | None, error: BaseException | None) -> None:
            if joined.done():
                return
            if error is not None:
                joined.set_exception(error)
            else:
                joined.set_result(bool(result))

        def hand_over(result: bool | None, error: BaseException | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the run is over
                loop.call_soon_threadsafe(settle, result, error)

        def work() -> None:
            try:
                result = connect(self.n)
            except BaseException as e:  # handed to the loop, raised there; nothing of Ray to keep
                hand_over(None, e)
                return
            hand_over(result, None)
            self._let_go.wait()  # see above: Ray's processes end with this thread

        self._joining = True
        threading.Thread(target=work, daemon=True, name="oxconsole-ray-join").start()
        assert self._halted is not None
        halted = asyncio.create_task(self._halted.wait())
        either: set[asyncio.Future[Any]] = {joined, halted}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        halted.cancel()
        if not joined.done():
            joined.cancel()
            return False  # still joining: left to its thread (self._joining stays True)
        self._joining = False
        return joined.result()

    def _release(self) -> None:
        try:
            if self._joining:
                return
            ray = import_ray()
            for wk in self.workers:
                wk.proc.kill()
            if self._pg is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self._pg)
            if self._started_ray:
                ray.shutdown()
        finally:
            self._let_go.set()

    async def _start_workers(self) -> None:
        """The actors, each with its share and its own simulator for `base_url = "sim"`; none when
        a stop came before they all started."""
        if not self._halt.is_set():
            await asyncio.to_thread(self._spawn_actors)

    def _wait(self, refs: list[Any], limit: float) -> bool:
        """Until every ref is ready (True), `limit` seconds pass or a stop comes (False)."""
        ray = import_ray()
        deadline = time.monotonic() + limit
        while not self._halt.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=min(0.25, left))
            if len(ready) == len(refs):
                return True
        return False

    def _spawn_actors(self) -> None:
        ray = import_ray()
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self.w.run.workers == "auto":  # one actor per CPU of the cluster
            self.n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._pg = placement_group([{"CPU": 1}] * self.n, strategy="SPREAD")
        placed = self._wait([self._pg.ready()], PLACE_S)
        if self._halt.is_set():
            return
        if not placed:
            raise WorkloadError(
                f"run.workers: the Ray cluster found no CPU for each of {self.n} actors in {PLACE_S:.0f} s "
                f"(it has {ray.cluster_resources().get('CPU', 0):g} CPUs)"
            )
        sims = [e.name for e in self.w.endpoints.values() if e.base_url == "sim"]
        skip = ray.put(list(self.host.skip_ids)) if self.host.skip_ids else None
        remote = ray.remote(num_cpus=1, max_concurrency=4)(EngineActor)
        actors = []
        for i in range(self.n):
            strategy = PlacementGroupSchedulingStrategy(self._pg, placement_group_bundle_index=i)
            actors.append(remote.options(scheduling_strategy=strategy, name=None).remote())
        files = to_ship(self.w, ray.put, self.host.warnings.append)
        starts = [
            a.start.remote(share(self.w, i, self.n), (i, self.n), sims, skip, files)
            for i, a in enumerate(actors)
        ]
        try:
            started = self._wait(starts, START_S)
            if self._halt.is_set():
                raise _Halted
            if not started:
                raise ray.exceptions.GetTimeoutError(f"not all actors started in {START_S:.0f} s")
            self.nodes = [(str(ip), str(node)) for ip, node in ray.get(starts)]
        except Exception as e:  # GetTimeoutError, a stop, or an actor that could not be created
            for a in actors:
                ray.kill(a)
            if isinstance(e, _Halted):
                return
            if isinstance(e, ray.exceptions.GetTimeoutError):
                why = f"the Ray actors did not start within {START_S:.0f} s"
            else:
                why = f"a Ray actor could not start: {e}"
                if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
                    why += (
                        "\n  RAY_AUTH_MODE=token is set here: a cluster without token authentication "
                        "cancels the actors of a driver that sends one (Ray 2.60)"
                    )
            raise WorkloadError(f"run.cluster: {why}") from e
        for i, actor in enumerate(actors):
            self.workers.append(WorkerHandle(ActorProc(actor), DriverChannel(actor)))
            threading.Thread(target=self._reader, args=(i,), daemon=True, name=f"oxconsole-ray-{i}").start()

    def _gone(self, i: int) -> None:
        """An actor has no exit code to wait for: what was lost is said by `_lost`."""

    def _lost(self, i: int) -> str:
        ip, node = self.nodes[i] if i < len(self.nodes) else ("?", "?")
        conn = self.workers[i].conn
        why = conn.why if isinstance(conn, DriverChannel) else "?"
        return f"ray actor {i} (node {ip}, id {node[:8]}) was lost: {why}"
