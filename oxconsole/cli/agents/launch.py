"""`oxconsole mcp [--http HOST:PORT]`: the agents' server, on stdio or on loopback HTTP.

Why this module exists: the command checks what it is asked to serve (a loopback address, a
bearer token) before it imports the MCP SDK (0.7 s of imports), so a refusal is at once and in the
command line's words (exit 2); and it says in one line when the optional `mcp` extra is missing.
The server itself is `tools.py` over `runs.py`; `http.py` serves it over streamable HTTP.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from functools import partial

from oxconsole.base.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, Parser
from oxconsole.cli.agents import TOKEN_ENV

__all__ = ["TOKEN_ENV", "BadAddress", "mcp_main", "parse_address", "token_from_env"]

PROG = "oxconsole mcp"


class BadAddress(ValueError):
    """An `--http` value or token that cannot be served; the message says what was expected."""


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6) as a loopback IP and a port; `BadAddress` otherwise.
    `localhost` is 127.0.0.1. Anything that is not loopback (0.0.0.0, ::, a LAN address, another
    name) is refused: the server starts and stops runs, so it is served to this machine only."""
    where = f"--http {text}"
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise BadAddress(f"{where}: expected HOST:PORT (such as 127.0.0.1:8765), got no host")
    try:
        port = int(port_text)
    except ValueError:
        raise BadAddress(f"{where}: expected a port number after ':', got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise BadAddress(f"{where}: expected a port from 0 to 65535 (0 = any free port), got {port}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host.lower() == "localhost":
        host = "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise BadAddress(
            f"{where}: expected a loopback address (127.0.0.1, ::1 or localhost), got the name {host!r}; "
            "the MCP server starts and stops runs, so it is served to this machine only"
        ) from None
    if not ip.is_loopback:
        raise BadAddress(
            f"{where}: expected a loopback address (127.0.0.1, ::1 or localhost), got {host}; the MCP "
            "server starts and stops runs, so it is served to this machine only"
        )
    return str(ip), port


def token_from_env(env: dict[str, str] | None = None) -> str:
    """The bearer token from `OXCONSOLE_MCP_TOKEN`; `BadAddress` when it is unset or blank."""
    token = (os.environ if env is None else env).get(TOKEN_ENV, "")
    if not token.strip():
        raise BadAddress(
            f"--http: expected the bearer token in {TOKEN_ENV}, got none; set it to a long random "
            f"string (such as `export {TOKEN_ENV}=$(openssl rand -hex 32)`) and give clients "
            f"`Authorization: Bearer` with it"
        )
    if not re.fullmatch(r"[A-Za-z0-9._~+/-]+=*", token):  # RFC 6750 b64token; never echoed
        raise BadAddress(
            f"--http: expected {TOKEN_ENV} to hold letters, digits and -._~+/ only (a header value), "
            "got other characters (spaces, quotes, non-ASCII); `openssl rand -hex 32` makes one"
        )
    return token


def _parser() -> Parser:
    p = Parser(
        prog=PROG,
        description="A Model Context Protocol server that starts, watches and tunes runs "
        "(on stdio; docs/agents.md). Needs the mcp extra: pip install 'oxconsole[mcp]'.",
    )
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help=f"serve streamable HTTP at http://HOST:PORT/mcp instead; loopback only, and every "
        f"request must carry Authorization: Bearer ${TOKEN_ENV}",
    )
    return p


def mcp_main(argv: list[str]) -> int:
    ns = _parser().parse_args(argv)
    address = None
    try:
        if ns.http is not None:
            address = parse_address(ns.http)
            token = token_from_env()
    except BadAddress as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        import anyio

        from oxconsole.cli.agents.runs import Runs
        from oxconsole.cli.agents.tools import build_server
    except ImportError as e:
        print(
            f"{PROG}: the MCP SDK is not installed ({e.name or e}); install the extra: "
            "pip install 'oxconsole[mcp]'",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    runs = Runs()
    mcp, _ = build_server(runs)
    try:
        if address is None:
            anyio.run(mcp.run_stdio_async)
            return EXIT_OK
        from oxconsole.cli.agents.http import serve_http

        def ready(url: str) -> None:
            print(
                f"{PROG}: serving {url} (streamable HTTP, bearer token required)", file=sys.stderr, flush=True
            )

        host, port = address
        anyio.run(partial(serve_http, mcp, host, port, token, ready))
    except OSError as e:  # the port is taken, or the address is not this machine's
        print(f"{PROG}: --http {ns.http}: cannot listen there: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK
