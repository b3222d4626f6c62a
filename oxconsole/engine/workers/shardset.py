"""What the run's coordinator asks of its shards, and the one-process case: one shard in its loop.

Why this module exists: the coordinator (`runner.Engine`) is one piece of code whether its shards
run in its own loop (`LocalShards`, here), in worker processes (`pool.ProcessShards`) or in Ray
actors (`raypool.RayShards`). `Shards` is the whole of what it needs of them: start them, tell
them when the clock starts, hand them per-shard commands, stop them, read their gauges and what
their runs leave for the summary. `Host` is what the shards may ask of the coordinator. In one
process nothing crosses a queue: a command is one call into the shard, a record one call back.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, Protocol

from oxconsole.engine.commands import By, Command
from oxconsole.engine.endpoints import Endpoints, open_files_warning
from oxconsole.engine.livesettings import LiveSettings
from oxconsole.engine.shard import LocalShard, Observe
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.collector import Collector
from oxconsole.metrics.snapshot import Gauges
from oxconsole.workload import Workload

__all__ = ["Host", "LocalShards", "Shards"]


class Host(Protocol):
    """The coordinator as its shards see it (on its loop unless said otherwise)."""

    w: Workload
    live: LiveSettings
    collector: Collector
    warnings: list[str]
    total_expected: int | None
    skip_ids: AbstractSet[str]
    stage_mark: tuple[int, bool] | None

    @property
    def state(self) -> str: ...
    @property
    def results_path(self) -> Path: ...
    def record(self, rec: RequestRecord) -> None: ...
    def collect(self, rec: RequestRecord) -> None: ...
    def write_lines(self, data: bytes, n: int) -> None: ...
    def attempt(self, model: str, error_class: str, detail: str) -> None: ...
    def elapsed(self) -> float: ...
    def request_stop(self, *, cancel: bool = False, interrupted: bool = False) -> None: ...
    def apply(self, cmd: Command, by: By = "command") -> object: ...


class Shards(Protocol):
    """A run's shards, as its coordinator drives them."""

    n: int
    remote: bool
    """The shards are other processes (the summary says how many: `workers`)."""
    crashed: bool
    """A shard ended without saying so: what it had in flight is lost."""

    def bind(self, host: Host) -> None: ...
    async def connect(self) -> None:
        """Before the journal opens: what may refuse the run (a Ray cluster that cannot be joined)."""
        ...

    async def start(self) -> None:
        """Up to where every shard can dispatch."""
        ...

    def begin(self, t0: float, started_at: float) -> None:
        """The run's clock starts now: the shards may dispatch."""
        ...

    async def wait(self) -> None:
        """Until every shard's run has ended."""
        ...

    async def close(self) -> None: ...
    async def release(self) -> None:
        """After everything (the journal closed): what `connect` took."""
        ...

    def send(self, cmds: list[Command]) -> None:
        """Shard i's part of a change: `cmds[i]` (`shares.shard_commands`)."""
        ...

    def mark(self, mark: tuple[int, bool]) -> None: ...
    def stop(self, cancel: bool) -> None: ...
    def observe(self, fn: Observe | None) -> None: ...
    def state(self, state: str) -> str:
        """The state the run shows, from the coordinator's own ("running") and the shards'."""
        ...

    def gauges(self, host: Host) -> Gauges: ...
    def ends(self) -> list[dict[str, Any]]:
        """What each shard's run left (`LocalShard.end`), for the shards that ended."""
        ...

    def served_urls(self) -> Mapping[str, str]:
        """Endpoint -> the base URL its requests go to where that is not its `base_url` (a
        simulator the run started), once started: where the coordinator reads the server's
        metrics. A simulator each Ray actor runs beside itself is not in it (it may be on another
        node)."""
        ...

    @property
    def cooldowns(self) -> list[dict[str, Any]]: ...
    @property
    def dispatch_complete(self) -> bool: ...


class LocalShards:
    """One shard, in the coordinator's own loop: commands and records are direct calls."""

    remote = False
    crashed = False

    def __init__(
        self,
        endpoint_urls: dict[str, str] | None = None,
        endpoints: Endpoints | None = None,
    ) -> None:
        self.n = 1
        self.endpoint_urls = dict(endpoint_urls or {})
        """Where endpoints already run (a simulator started by the caller), read as the run starts."""
        self._endpoints = endpoints
        self.shard: LocalShard | None = None

    def bind(self, host: Host) -> None:
        self.host = host
        self.shard = LocalShard(
            host.w,
            record_sink=host.record,
            attempt_sink=host.attempt,
            warnings=host.warnings,
            skip_ids=host.skip_ids,
            endpoint_urls=self.endpoint_urls,
            endpoints=self._endpoints,
        )
        self.shard.on_deadline = host.request_stop

    @property
    def one(self) -> LocalShard:
        assert self.shard is not None, "bind() first"
        return self.shard

    async def connect(self) -> None:
        pass

    async def start(self) -> None:
        note = open_files_warning(self.host.w)
        if note:
            self.host.warnings.append(note)
        await self.one.prepare()

    def begin(self, t0: float, started_at: float) -> None:
        self.one.begin(t0, started_at)

    async def wait(self) -> None:
        await self.one.run()

    async def close(self) -> None:
        await self.one.shut_down()

    async def release(self) -> None:
        pass

    def send(self, cmds: list[Command]) -> None:
        self.one.act(cmds[0])

    def mark(self, mark: tuple[int, bool]) -> None:
        self.one.stage_mark = mark

    def stop(self, cancel: bool) -> None:
        self.one.stop(cancel=cancel)

    def observe(self, fn: Observe | None) -> None:
        self.one.observe = fn

    def state(self, state: str) -> str:
        return self.one.state if state == "running" else state

    def gauges(self, host: Host) -> Gauges:
        live = host.live
        return self.one.gauges(
            total_expected=host.total_expected, auto=live.auto, state=host.state, rate=live.rate, tpm=live.tpm
        )

    def ends(self) -> list[dict[str, Any]]:
        return [self.one.end()]

    def served_urls(self) -> Mapping[str, str]:
        return self.one.endpoints.urls

    @property
    def cooldowns(self) -> list[dict[str, Any]]:
        return self.one.cooldowns

    @property
    def dispatch_complete(self) -> bool:
        return self.one.dispatch_complete
