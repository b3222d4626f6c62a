"""The servers a run talks to: one HTTP client per endpoint, and the embedded simulator when asked.

Why this module exists: starting a run's endpoints (a simulator process for `base_url = "sim"`,
then a client per endpoint a model uses, with the warnings their settings call for) and closing
them whatever happened is one piece of work, shared by the engine and the worker pool.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import yarl

from oxconsole.engine.send.apis import PATHS
from oxconsole.engine.send.client import EndpointClient, Refused
from oxconsole.engine.send.listed import LIST_WITHIN_S, unlisted
from oxconsole.workload import Workload, WorkloadError, resolve_api_key, resolve_headers
from oxconsole.workload.problems import error, printable, show
from oxconsole.workload.prompts.feed import one_pass

if TYPE_CHECKING:
    from oxconsole.sim.process import SimProcess


def open_files_warning(w: Workload) -> str | None:
    """Raise the open-files soft limit to fit the connections a run may open (10k in flight); a
    warning when it cannot be raised far enough."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    auto = w.run.concurrency_auto  # auto may raise the limit up to run.concurrency_max
    most = w.run.concurrency_max if auto else w.run.concurrency
    need = most + 256  # sockets, the journal, the simulator's pipes, margin
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(max(need, soft), hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            target = soft
        if target < need:
            return (
                ("run.concurrency_max" if auto else "run.concurrency")
                + f" = {most} needs about {need} open files but the "
                f"limit is {target} (hard limit {hard}); raise it (ulimit -n) or expect connection errors"
            )
    return None


async def start_sim(w: Workload, names: Iterable[str]) -> tuple[SimProcess | None, dict[str, str]]:
    """The simulator process for the endpoints `names` (none started when there are none), and the
    URL each of them is served at."""
    names = list(names)
    if not names:
        return None, {}
    from oxconsole.sim.process import SimProcess  # only runs against the simulator load it
    from oxconsole.sim.quality import truth_for

    truth = await asyncio.to_thread(lambda: truth_for(w, one_pass(w)))
    sim = SimProcess(profiles=w.sim, seed=w.run.seed, limits=w.sim_limits, truth=truth)
    await asyncio.to_thread(sim.start)
    return sim, dict.fromkeys(names, sim.url)


CONNECT_AHEAD_MAX = 256
"""The most connections a shard opens before its clock, over all its endpoints."""
CONNECT_WITHIN_S = 5.0
"""How long opening them may delay the start (at most `run.timeout`)."""


def first_wave(in_flight: int, rate: float) -> int:
    """The requests a shard starts with: `in_flight` (its concurrency), no more than a second of
    `rate` sends, at most `CONNECT_AHEAD_MAX`."""
    n = min(in_flight, CONNECT_AHEAD_MAX)
    return min(n, math.ceil(rate)) if rate > 0 else n


def connections_ahead(w: Workload, shares: dict[str, float], n: int) -> dict[str, int]:
    """How many connections each endpoint gets before the clock: the first wave's `n` requests
    (`first_wave`), split by the models' shares of the traffic (`Router.shares`)."""
    by_endpoint: dict[str, float] = {}
    endpoint_of = {m.name: m.endpoint for m in w.models}
    for model, share in shares.items():
        ep = endpoint_of[model]
        by_endpoint[ep] = by_endpoint.get(ep, 0.0) + share
    return {ep: math.ceil(n * share) for ep, share in by_endpoint.items() if share > 0}


class Endpoints:
    """A run's endpoint clients (`clients[name]`) and the simulator it started, if any."""

    def __init__(self, w: Workload, urls: dict[str, str], warnings: list[str]) -> None:
        self.w = w
        self.urls = urls
        """Endpoint name -> URL, instead of its `base_url` (a simulator someone else started)."""
        self.warnings = warnings
        self.clients: dict[str, EndpointClient] = {}
        self.sim: SimProcess | None = None

    async def start(self) -> None:
        """Start the simulator if an endpoint needs one, then a client per endpoint a model uses."""
        w = self.w
        need_sim = [e.name for e in w.endpoints.values() if e.base_url == "sim" and e.name not in self.urls]
        self.sim, sim_urls = await start_sim(w, need_sim)
        self.urls.update(sim_urls)
        used = {m.endpoint for m in w.models}
        for name, ep in w.endpoints.items():
            if name not in used:
                continue
            if ep.insecure:
                self.warnings.append(f"endpoints.{name}.insecure = true: TLS certificates are not verified")
            if ep.max_connections < w.run.concurrency and not w.run.concurrency_auto:
                self.warnings.append(
                    f"endpoints.{name}.max_connections = {ep.max_connections} is below run.concurrency"
                    f" = {w.run.concurrency}: requests beyond it wait for a connection"
                    " (queue time, not the server's)"
                )
            headers, secrets = resolve_headers(w, name)
            self.clients[name] = EndpointClient(
                name,
                self.urls.get(name, ep.base_url),
                resolve_api_key(w, name),
                max_connections=ep.max_connections,
                timeout=w.run.timeout,
                insecure=ep.insecure,
                headers=headers,
                secrets=secrets,
            )
            paths = sorted({PATHS[m.api] for m in w.models if m.endpoint == name})
            await self.clients[name].warm(w.run.timeout, paths)
        await self._check_models()

    async def _check_models(self) -> None:
        """Each endpoint that is a real server asked what it serves (at once, each within
        `LIST_WITHIN_S`): a model it does not list is a warning naming those it does."""
        w = self.w
        names = [n for n in self.clients if w.endpoints[n].base_url != "sim"]
        within = min(LIST_WITHIN_S, w.run.timeout)
        lists = await asyncio.gather(*(self.clients[n].listed(within) for n in names))
        for name, listing in zip(names, lists, strict=True):
            if listing is not None:
                mine = [m.name for m in w.models if m.endpoint == name]
                self.warnings.extend(unlisted(name, self.clients[name].models_url, mine, listing))

    async def connect(self, counts: dict[str, int], within: float) -> dict[str, int]:
        """Open `counts[name]` connections to each endpoint before the clock, all at once
        (`EndpointClient.connect`); how many each has opened. An endpoint that refused them all
        is bad input (`WorkloadError` naming the workload file and its `base_url`): nothing has
        been sent, and nothing could be."""
        names = [n for n in counts if n in self.clients]
        opened = await asyncio.gather(
            *(self.clients[n].connect(counts[n], within) for n in names), return_exceptions=True
        )
        label = printable(str(self.w.path))
        refused = [
            str(
                error(
                    label,
                    f"endpoints.{n}.base_url",
                    "a server that accepts connections",
                    f"{show(self.urls.get(n, self.w.endpoints[n].base_url))}: {why}; nothing was sent",
                )
            )
            for n, why in zip(names, opened, strict=True)
            if isinstance(why, Refused)
        ]
        if refused:
            raise WorkloadError(*refused)
        for why in opened:
            if isinstance(why, BaseException):
                raise why
        return {n: k for n, k in zip(names, opened, strict=True) if isinstance(k, int)}

    def _shown(self, name: str) -> str:
        """Endpoint `name`'s URL as an error shows it: no user or password in it."""
        url = self.urls.get(name, self.w.endpoints[name].base_url)
        try:
            url = str(yarl.URL(url).with_user(None))
        except ValueError:
            pass
        return show(url)

    async def close(self) -> None:
        for c in self.clients.values():
            try:
                await c.close()
            except Exception:  # closing must not hide the run's result
                pass
        if self.sim is not None:
            await asyncio.to_thread(self.sim.stop)
