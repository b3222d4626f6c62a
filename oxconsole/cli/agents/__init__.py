"""Agents at the knobs: `oxconsole mcp`, a Model Context Protocol server over the runs of this user.

`launch` is the command (stdio, or `--http` on loopback behind a bearer token), `tools` the eight
tools and two resources, `runs` what they reach a run through (the command line's parsers and
checks, the detached engine process, the control socket's commands logged `by = "agent"`, the
reports), `watch` the resources' subscribers and their once-a-second updates, `http` the
streamable HTTP app and its token gate, `sdk` the SDK's private names. Only this package imports
the `mcp` SDK (an optional extra).
"""

TOKEN_ENV = "OXCONSOLE_MCP_TOKEN"
"""The variable holding the bearer token `--http` requires (never in a file, a flag or a log)."""
