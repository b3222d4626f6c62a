"""`--http HOST:PORT`: the server over streamable HTTP, on loopback only, behind a bearer token.

Why this module exists: over stdio the client is the process that started us; over HTTP anyone who
can connect could start and stop runs, so the address must be this machine's loopback (checked
before anything listens) and every request must carry `Authorization: Bearer $OXCONSOLE_MCP_TOKEN`
(compared in constant time; the token is never logged or echoed). The gate wraps the whole ASGI
app, so no route, present or added later, is reachable without it. The SDK's own auth hooks
(`AuthSettings` + `TokenVerifier`) are OAuth-shaped (an issuer URL is required) and guard only
the MCP route; a static token needs neither.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from oxconsole.cli.agents import TOKEN_ENV

__all__ = ["MCP_PATH", "BearerGate", "http_app", "serve_http"]

MCP_PATH = "/mcp"


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


class BearerGate:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` is answered 401 and
    goes no further. Digests of equal length are compared with `hmac.compare_digest`, so neither the
    token's bytes nor its length leak through timing. Lifespan events pass through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = _digest(token.encode())
        self.refused = 0

    def allows(self, headers: list[tuple[bytes, bytes]]) -> bool:
        given = b""
        for k, v in headers:
            if k.lower() == b"authorization":
                given = v
                break
        scheme, _, credentials = given.strip().partition(b" ")
        ok = hmac.compare_digest(_digest(credentials.strip()), self._expected)
        return ok and scheme.lower() == b"bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self.allows(scope.get("headers") or []):
            self.refused += 1
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = json.dumps(
                {
                    "error": "invalid_token",
                    "error_description": f"expected Authorization: Bearer ${TOKEN_ENV}",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="oxconsole", error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def http_app(mcp: MCPServer[Any], host: str, token: str) -> BearerGate:
    """The MCP server's streamable HTTP app (at /mcp), behind the token. The SDK's DNS-rebinding
    guard stays on: a request's Host must name loopback, whatever the browser was told."""
    shown = f"[{host}]" if ":" in host else host
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{shown}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=[f"http://{shown}:*", "http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
    app = mcp.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=host)
    return BearerGate(app, token)


async def serve_http(
    mcp: MCPServer[Any], host: str, port: int, token: str, ready: Callable[[str], None] | None = None
) -> None:
    """Serve until cancelled (or SIGINT/SIGTERM, which uvicorn handles). `ready(url)` is called once
    the socket listens (port 0 picks a free port: the URL says which)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        http_app(mcp, host, token),
        log_level="warning",
        access_log=False,  # request lines only, never headers; off to keep stderr for our messages
        lifespan="on",
        ws="none",
        server_header=False,
    )
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    if ready is not None:
        ready(f"http://{shown}:{bound}{MCP_PATH}")
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
