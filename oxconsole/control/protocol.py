"""The wire between a run and its consoles: newline-delimited orjson objects on a Unix socket.

Why this module exists: the server (`control.server`) and the client (`control.socketsource`) must agree
on every message; this is where the messages are written down, once.

One JSON object a line, each with an `op`:

    client -> server   {"op": "hello", "hz": 4}
                           hz: snapshots a second wanted, clamped to [MIN_HZ, MAX_HZ]
                       {"op": "cmd", "cmd": "set_concurrency", "value": 200}
                           a live command, the fields of `engine.commands.command_to_dict`,
                           and optionally "by": who sent it, as `changes` log it ("key" from
                           the console, "agent" from `oxconsole mcp`, "command" when absent),
                           and optionally "id": then the server answers "done" or "error"
                           with that id
                       {"op": "cmds", "id": 7, "cmds": [{"cmd": ...}, ...], "by": "agent"}
                           several commands, all admitted before any is applied: one refused
                           changes nothing; answered "done" (every change made) or "error"
                       {"op": "summary", "id": 8}
                           the run so far in the summary's keys, answered "summary"
                       {"op": "bye"}
                           the client leaves; the run goes on
    server -> client   {"op": "hello", "name", "workload_path", "overrides", "results_path", "pid",
                        "started_at"}
                           the run's `RunInfo`, sent once in answer to hello
                       {"op": "snap", "s": Snapshot.to_dict()}
                           at the client's hz, newest only (frames skipped while it is behind)
                       {"op": "end", "summary": {...}, "exit_code": n, "warnings": [...]}
                           the run has ended: its summary JSON, exit code and warnings (a
                           sweep's: {"sweep": its --summary-json object, "lines": [[stream,
                           text], ...] what it printed at its end}, `sweep/served.py`)
                       {"op": "done", "id": 7, "changes": [{"t", "what", "from", "to", "by"}],
                        "held": false}
                           the commands of a "cmd" or "cmds" with an id were applied: the
                           changes they made, as `changes` logs them (empty: nothing moved);
                           "held": true while the run starts (applied, and logged, when its
                           clock starts)
                       {"op": "summary", "id": 8, "summary": {...}, "live": {...}}
                           the run so far (`RunEngine.summary_now`) and its live settings:
                           in_flight, concurrency, rate, paused, auto, state, phase
                       {"op": "error", "message": "...", "id": 7}
                           a message the server could not use (bad JSON, unknown op, a command
                           not applied, a command after the end); a line over SERVER_MAX_LINE
                           is answered so, then the connection is closed. A command the run
                           refuses (`engine.commands.CommandError`: a wrong type, a value not
                           finite or out of range, an unknown model) changed nothing, and the
                           message says why: "set_rate: expected a finite number >= 0 and <= 1e6
                           ..., got inf". A command that was applied gets no answer unless it
                           carried an id. A message with an id is answered with that id.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["MAX_HZ", "MAX_LINE", "MIN_HZ", "SERVER_MAX_LINE", "encode", "parse"]

MAX_LINE = 32 * 1024 * 1024
"""Longest line a client accepts (a snapshot)."""
SERVER_MAX_LINE = 64 * 1024
"""Longest line the server accepts (commands are small)."""
MIN_HZ, MAX_HZ = 0.2, 30.0
"""The snapshot rates a client may ask for in its hello."""


def encode(msg: dict[str, Any]) -> bytes:
    """One message as one line."""
    return orjson.dumps(msg) + b"\n"


def parse(line: bytes) -> dict[str, Any] | None:
    """One line as a message; None when it is not a JSON object."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) else None
