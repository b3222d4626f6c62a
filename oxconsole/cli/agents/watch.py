"""The resources' updates: who is subscribed, and the once-a-second loop that tells them.

Why this module exists: MCP has two ways to be told a resource changed, one per protocol era. A
2026-07-28 client opens a `subscriptions/listen` stream, served by the SDK from a subscription bus
we own (`ListeningBus`); a 2025-era client sends `resources/subscribe` and is sent
`notifications/resources/updated` on its connection (`Watch.subscribe`, registered through
`sdk.serve_legacy_subscribe`). One loop (`Watch.run`) serves both: once a second, and only while
someone listens, it asks the backend for the runs and publishes each URI whose content moves.
With nobody listening it waits on an event: an idle server wakes for nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from oxconsole.cli.agents import sdk
from oxconsole.cli.agents.runs import Runs

__all__ = ["RUNS_URI", "SNAPSHOT_TEMPLATE", "ListeningBus", "Watch", "snapshot_uri"]

log = logging.getLogger(__name__)

RUNS_URI = "oxconsole://runs"
SNAPSHOT_TEMPLATE = "oxconsole://runs/{name}/snapshot"
INTERVAL_S = 1.0
"""The contract's "updated once a second"; a snapshot frame costs the engine nothing at this rate
(it already publishes every 250 ms)."""


def snapshot_uri(name: str) -> str:
    return SNAPSHOT_TEMPLATE.format(name=name)


class ListeningBus:
    """The SDK's in-process `SubscriptionBus`, counting the open `subscriptions/listen` streams so
    that the update loop runs only while there is one. `woken` is called when the first opens."""

    def __init__(self) -> None:
        self._inner = InMemorySubscriptionBus()
        self.listeners = 0
        self.woken: Callable[[], None] = lambda: None

    async def publish(self, event: ServerEvent) -> None:
        await self._inner.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = self._inner.subscribe(listener)
        self.listeners += 1
        if self.listeners == 1:
            self.woken()
        done = False

        def leave() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
                unsubscribe()

        return leave


class Watch:
    """Subscriptions of both eras and the loop that publishes the resources' updates."""

    def __init__(self, backend: Runs, bus: ListeningBus, interval: float = INTERVAL_S) -> None:
        self.backend = backend
        self.bus = bus
        self.interval = interval
        self.legacy: dict[str, dict[object, ServerSession]] = {}
        """URI -> the 2025-era connections subscribed to it (their latest session proxy)."""
        self.ticks = 0
        self._wake = anyio.Event()
        self._last_runs: str | None = None
        self._going: set[str] = set()
        self._servers = 0
        bus.woken = self._wake_up

    # --- 2025-era resources/subscribe ----------------------------------------------------------
    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        uri = str(params.uri)
        key = sdk.connection_key(ctx.session)
        subs = self.legacy.setdefault(uri, {})
        if key not in subs:
            sdk.on_connection_close(ctx.session, lambda: self._forget(key))
        subs[key] = ctx.session
        self._wake_up()
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        subs = self.legacy.get(str(params.uri))
        if subs is not None:
            subs.pop(sdk.connection_key(ctx.session), None)
            if not subs:
                del self.legacy[str(params.uri)]
        return EmptyResult()

    def _forget(self, key: object) -> None:
        """A connection closed: drop every subscription it held."""
        for uri in list(self.legacy):
            self.legacy[uri].pop(key, None)
            if not self.legacy[uri]:
                del self.legacy[uri]

    # --- the loop ----------------------------------------------------------------------------------
    @property
    def wanted(self) -> bool:
        return self.bus.listeners > 0 or bool(self.legacy)

    def _wake_up(self) -> None:
        self._wake.set()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Run the loop while the server serves. Entered once per connection on stdio and in-memory,
        once per process under streamable HTTP: only the first entry starts the loop."""
        self._servers += 1
        try:
            if self._servers > 1:
                yield
                return
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.run)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._servers -= 1

    async def run(self) -> None:
        """Forever: while anyone listens, publish what moved, once every `interval` seconds."""
        while True:
            if not self.wanted:
                self._wake = anyio.Event()
                self._last_runs = None  # a new listener is told the state at once
                await self._wake.wait()
            await self.tick()
            await anyio.sleep(self.interval)

    async def tick(self) -> list[str]:
        """Publish the URIs whose content moved since the last tick; the URIs published."""
        self.ticks += 1
        runs = self.backend.runs()
        uris: list[str] = []
        digest = json.dumps(runs, sort_keys=True, default=str)
        if digest != self._last_runs:
            uris.append(RUNS_URI)
        self._last_runs = digest
        names: dict[str, int] = {}
        for e in runs:
            names[str(e["name"])] = names.get(str(e["name"]), 0) + 1
        going = {f"{e['name']}-{e['pid']}" for e in runs} | {n for n, count in names.items() if count == 1}
        # a run going moves every second; one that just left is told once more (its end)
        for name in sorted(going | (self._going - going)):
            uris.append(snapshot_uri(name))
        self._going = going
        for uri in uris:
            await self.bus.publish(ResourceUpdated(uri=uri))
            for key, session in list(self.legacy.get(uri, {}).items()):
                try:
                    await session.send_resource_updated(uri)
                except Exception:  # the connection went away under us: it is not told again
                    log.debug("dropped a subscriber of %s", uri, exc_info=True)
                    self._forget(key)
        return uris
