"""Every name of the `mcp` SDK this package uses that the SDK does not make public, in one place.

Why this module exists: `MCPServer` (mcp 2.3) serves the 2026-07-28 `subscriptions/listen` stream
but not the 2025-era `resources/subscribe` / `resources/unsubscribe` requests that today's clients
send; the SDK's migration guide ("Registering lowlevel handlers from MCPServer") says to register
them on its private low-level server until a public API exists. A subscription also has to end with
its connection, and the connection is reachable only through the session's private attribute.
When either changes in a 2.x release, this file is the one to mend (tests/cli/agents/test_resources.py fails).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

__all__ = ["connection_key", "on_connection_close", "serve_legacy_subscribe"]

SubscribeHandler = Callable[[ServerRequestContext[Any, Any], SubscribeRequestParams], Awaitable[EmptyResult]]
UnsubscribeHandler = Callable[
    [ServerRequestContext[Any, Any], UnsubscribeRequestParams], Awaitable[EmptyResult]
]


def serve_legacy_subscribe(
    server: MCPServer[Any], subscribe: SubscribeHandler, unsubscribe: UnsubscribeHandler
) -> None:
    """Answer `resources/subscribe` and `resources/unsubscribe` (handshake-era clients); with them
    registered the server's handshake capabilities say `resources.subscribe = true`."""
    low = server._lowlevel_server
    low.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    low.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)


def connection_key(session: ServerSession) -> object:
    """The connection a request came on (each request gets its own `ServerSession` proxy)."""
    return session._connection


def on_connection_close(session: ServerSession, callback: Callable[[], None]) -> None:
    """Call `callback` once the connection `session` belongs to has closed."""
    session._connection.exit_stack.callback(callback)
