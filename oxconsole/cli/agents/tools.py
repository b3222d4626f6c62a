"""The MCP server: the contract's eight tools and two resources over a `Runs`.

Why this module exists: it is the one place that speaks MCP about runs. Each tool turns its
arguments into what a key or a flag would have produced (a `RunRequest`, command objects), asks
the backend, and hands back either the answer (JSON, with an output schema) or the refusal in the
CLI's own words as an error result (`is_error`, the message alone: no SDK prefix). Knob values
are taken as the agent sent them and judged by the engine's checks, so `concurrency: "fifty"` is
refused with the same sentence `--set` or a key would get; the input schemas still say integer,
minimum 1, so a careful client never sends it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from oxconsole.cli.agents import sdk
from oxconsole.cli.agents.runs import Refused, RunRequest, Runs
from oxconsole.cli.agents.signatures import (
    AUTO,
    CANCEL,
    CASCADE,
    CONCURRENCY,
    DURATION,
    ENABLED,
    MODEL,
    OVERRIDES,
    PAUSED,
    RATE,
    REQUESTS,
    RUN_NAME,
    TPM,
    URL,
    WEIGHTS,
    WORKLOAD,
    RunsOut,
    SetOut,
    SnapshotOut,
    StartOut,
    ValidateOut,
)
from oxconsole.cli.agents.watch import RUNS_URI, SNAPSHOT_TEMPLATE, ListeningBus, Watch
from oxconsole.engine.commands import Command, CommandError, command_from_dict

__all__ = ["build_server"]

INSTRUCTIONS = """\
oxconsole runs load against OpenAI-compatible endpoints and measures them. Typical loop: `validate`
a workload (or a URL and model), `start` it, read `snapshot` (or subscribe to
oxconsole://runs/{name}/snapshot, updated once a second) while turning `set` (concurrency, rate,
weights...), then `stop` or wait, and read `summary`; `compare` journals of several runs. Runs
started here are ordinary runs: a person can `oxconsole attach NAME` to them, and you can drive
runs a person started. Your changes are logged in the run's `changes` with by = "agent".
Latencies are in milliseconds, rates in requests per second, durations in seconds.
"""


def _ok(data: Mapping[str, object]) -> CallToolResult:
    """The answer as structured content and, for clients that read only text, as compact JSON (with
    `indent` the json module falls back to its pure-Python encoder: 10x slower on a snapshot)."""
    text = json.dumps(data, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(data))


def _refused(message: str) -> CallToolResult:
    """The refusal as the CLI words it, alone (`MCPServer` would prefix "Error executing tool X: ")."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _request(
    workload: str | None,
    url: str | None,
    model: str | None,
    overrides: list[str] | None,
    **flags: object,
) -> RunRequest:
    return RunRequest(workload=workload, url=url, model=model, overrides=tuple(overrides or ()), **flags)


def _per_model(what: str, table: object) -> dict[object, object]:
    if table is None:
        return {}
    if isinstance(table, dict):
        return dict(table)
    raise Refused(f"set: {what}: expected an object {{model: value}}, got {type(table).__name__}")


def _commands(
    concurrency: object,
    rate: object,
    tpm: object,
    weights: object,
    enabled: object,
    cascade: object,
    paused: object,
    auto: object,
) -> list[Command]:
    """The commands the console's keys would send for these values, in an order where none undoes
    another (concurrency before auto: a hand on the limit turns auto off). Values go as the agent
    sent them: the run judges them (`LiveSettings.admit`) and refuses in its own words."""
    raw: list[dict[str, Any]] = []
    if concurrency is not None:
        raw.append({"cmd": "set_concurrency", "value": concurrency})
    if rate is not None:
        raw.append({"cmd": "set_rate", "value": rate})
    if tpm is not None:
        raw.append({"cmd": "set_tpm", "value": tpm})
    raw += [{"cmd": "set_weight", "model": m, "value": v} for m, v in _per_model("weights", weights).items()]
    raw += [
        {"cmd": "enable_model", "model": m, "enabled": v} for m, v in _per_model("enabled", enabled).items()
    ]
    if cascade is not None:
        raw.append({"cmd": "set_cascade", "steps": tuple(cascade) if isinstance(cascade, list) else cascade})
    if auto is not None:
        raw.append({"cmd": "set_auto", "on": auto})
    if paused is not None:
        if not isinstance(paused, bool):
            shown = json.dumps(paused) if isinstance(paused, str | int | float) else type(paused).__name__
            raise Refused(f"set: paused: expected true or false, got {shown}")
        raw.append({"cmd": "pause" if paused else "resume"})
    try:
        return [command_from_dict(d) for d in raw]
    except CommandError as e:
        raise Refused(str(e)) from None


def build_server(backend: Runs, *, interval: float = 1.0) -> tuple[MCPServer[None], Watch]:
    """The server over `backend`, and its `Watch` (the resources' subscribers and update loop,
    started by the server's lifespan)."""
    bus = ListeningBus()
    watch = Watch(backend, bus, interval)

    @asynccontextmanager
    async def lifespan(_: MCPServer[None]) -> AsyncIterator[None]:
        async with watch.serving():
            yield None

    mcp: MCPServer[None] = MCPServer(
        "oxconsole",
        title="oxconsole",
        description="Start, watch and tune LLM load runs (oxconsole).",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        subscriptions=bus,
        lifespan=lifespan,
        log_level="WARNING",  # the SDK logs each refused call at INFO; stderr is the user's
    )
    for register in _REGISTERED:
        register(mcp, backend)
    sdk.serve_legacy_subscribe(mcp, watch.subscribe, watch.unsubscribe)
    return mcp, watch


_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _validate_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `validate` tool over `backend`."""

    @mcp.tool(
        name="validate",
        title="Check a workload",
        annotations=_READ_ONLY,
    )
    def validate(
        workload: WORKLOAD = None,
        url: URL = None,
        model: MODEL = None,
        set: OVERRIDES = None,  # the contract's name (shadows the builtin here)
    ) -> Annotated[CallToolResult, ValidateOut]:
        """Check a workload without sending anything, as `oxconsole validate` does: the file, its
        prompts, every API-key variable, every override. Give `workload` (a path) and/or `url` with
        `model`; `set` overrides keys. Answers every problem found (each naming the file, the key
        and what was expected), or what would run: models, endpoints, request count, limits."""
        try:
            v = backend.validate(_request(workload, url, model, set))
        except Refused as e:
            out = ValidateOut(
                valid=False, errors=str(e).splitlines(), name=None, would_run=None, models=[], requests=None
            )
            return _ok(out)
        return _ok(
            ValidateOut(
                valid=True,
                errors=[],
                name=v.name,
                would_run=v.description,
                models=list(v.models),
                requests=v.requests,
            )
        )


def _start_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `start` tool over `backend`."""

    @mcp.tool(
        name="start",
        title="Start a run",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False, open_world_hint=True),
    )
    async def start(
        workload: WORKLOAD = None,
        url: URL = None,
        model: MODEL = None,
        set: OVERRIDES = None,  # the contract's name (shadows the builtin here)
        concurrency: CONCURRENCY = None,
        rate: RATE = None,
        requests: REQUESTS = None,
        duration: DURATION = None,
    ) -> Annotated[CallToolResult, StartOut]:
        """Start a run in its own process, as a console run that detached does: it sends real
        traffic to the endpoint and goes on after this call (and after this server) until it ends or
        is stopped; `oxconsole attach NAME` opens a console on it. Arguments as `validate`, plus
        `concurrency` (requests in flight), `rate` (requests/s, 0 = unlimited), `requests` (a count)
        or `duration` (a time). Bad input is refused with the CLI's messages before anything is
        sent. Answers {name, pid, journal}: `name` is the key for snapshot, set and stop."""
        req = _request(
            workload,
            url,
            model,
            set,
            concurrency=concurrency,
            rate=rate,
            requests=requests,
            duration=duration,
        )
        try:
            started = await backend.start(req)
        except Refused as e:
            return _refused(str(e))
        return _ok(StartOut(name=started.name, pid=started.pid, journal=started.journal))


def _runs_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `runs` tool over `backend`."""

    @mcp.tool(name="runs", title="Runs going", annotations=_READ_ONLY)
    def runs() -> Annotated[CallToolResult, RunsOut]:
        """The runs going on this machine for this user, as `oxconsole ps` lists them: each run's
        name and pid (NAME-PID is its key), state, progress (done of total requests), requests per
        second and errors. Runs started by a person are here too, and can be driven the same way."""
        return _ok(RunsOut(runs=backend.runs()))


def _snapshot_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `snapshot` tool over `backend`."""

    @mcp.tool(name="snapshot", title="A run so far", annotations=_READ_ONLY)
    async def snapshot(name: RUN_NAME) -> Annotated[CallToolResult, SnapshotOut]:
        """The run so far, in the summary's keys (requests, throughput, latency_ms, ttft_ms, itl_ms,
        queue_ms, tokens, cost, errors, models, changes), plus its live state: `in_flight`,
        `concurrency`, `rate` (requests/s, 0 = unlimited), `paused`, `auto` and `state`. Figures are
        over the whole run; latencies in milliseconds. Read it again after a `set` to see the
        effect: a change takes a few seconds to show in the percentiles."""
        try:
            return _ok(await backend.snapshot(name))
        except Refused as e:
            return _refused(str(e))


def _set_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `set` tool over `backend`."""

    @mcp.tool(
        name="set",
        title="Turn a run's knobs",
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    )
    async def set_(
        name: RUN_NAME,
        concurrency: CONCURRENCY = None,
        rate: RATE = None,
        tpm: TPM = None,
        weights: WEIGHTS = None,
        enabled: ENABLED = None,
        cascade: CASCADE = None,
        paused: PAUSED = None,
        auto: AUTO = None,
    ) -> Annotated[CallToolResult, SetOut]:
        """Change a running run's live settings, as the console's keys do (`+`/`-`, `[`/`]`, `w`,
        space, `a`): give any of `concurrency`, `rate`, `tpm`, `weights`, `enabled`, `cascade`,
        `paused`, `auto`. Every value is checked before any is sent; a refused one changes nothing
        and the answer says why, in the engine's words. Answers the changes made (as logged in the
        run's `changes`, by = "agent"); every console attached to the run shows them."""
        try:
            cmds = _commands(concurrency, rate, tpm, weights, enabled, cascade, paused, auto)
            if not cmds:
                return _refused(
                    "set: expected at least one of concurrency, rate, tpm, weights, enabled, cascade, "
                    "paused, auto; got none"
                )
            changes, held = await backend.apply(name, cmds)
            return _ok(SetOut(changes=changes, held=held))
        except Refused as e:
            return _refused(str(e))


def _stop_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `stop` tool over `backend`."""

    @mcp.tool(
        name="stop",
        title="Stop a run",
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    async def stop(name: RUN_NAME, cancel: CANCEL = False) -> Annotated[CallToolResult, dict[str, Any]]:
        """Stop a run, as `q` in its console does: no new requests; those in flight finish within
        the run's grace time (or are cancelled at once with `cancel: true`), the journal is flushed,
        and the run's summary is answered (its `requests.not_sent` says how many were never sent;
        `oxconsole WORKLOAD --resume` sends them). Waits for the run's end."""
        try:
            return _ok(await backend.stop(name, cancel))
        except Refused as e:
            return _refused(str(e))


def _summary_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `summary` tool over `backend`."""

    @mcp.tool(name="summary", title="A run's summary", annotations=_READ_ONLY)
    def summary(
        name: Annotated[
            str | None, Field(description="A run going or ended here (NAME-PID or NAME).")
        ] = None,
        journal: Annotated[str | None, Field(description="Path of a results journal (JSONL).")] = None,
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        """The summary of a run (`name`) or of a results journal (`journal`, as `oxconsole report
        RESULTS.jsonl --json` recomputes it from the journal alone); give one of them. The summary
        JSON of the contract: requests, throughput, latency_ms, ttft_ms, itl_ms, queue_ms, tokens,
        cost, errors, models, changes; latencies in milliseconds, rates per second."""
        try:
            return _ok(backend.summary(name, journal))
        except Refused as e:
            return _refused(str(e))


def _compare_tool(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `compare` tool over `backend`."""

    @mcp.tool(name="compare", title="Compare runs", annotations=_READ_ONLY)
    def compare(
        journals: Annotated[
            list[str], Field(description="Paths of two or more results journals; the first is the baseline.")
        ],
    ) -> Annotated[CallToolResult, dict[str, Any]]:
        """Compare runs side by side, as `oxconsole report A.jsonl B.jsonl --json` does: each figure
        of each run with its interval, the change from the first run in percent, and whether the
        difference is within noise."""
        try:
            return _ok(backend.compare(journals))
        except Refused as e:
            return _refused(str(e))


def _runs_resource(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `runs` resource over `backend`."""

    @mcp.resource(
        RUNS_URI,
        name="runs",
        title="Runs going",
        description="The runs going for this user ({runs: [...]}, as the `runs` tool answers); "
        "subscribable, updated once a second while any run moves.",
        mime_type="application/json",
    )
    def runs_resource() -> str:
        return json.dumps({"runs": backend.runs()}, default=str)


def _snapshot_resource(mcp: MCPServer[None], backend: Runs) -> None:
    """Register the `snapshot` resource over `backend`."""

    @mcp.resource(
        SNAPSHOT_TEMPLATE,
        name="snapshot",
        title="A run so far",
        description="The run {name} (NAME-PID or NAME) so far, as the `snapshot` tool answers; "
        "subscribable, updated once a second while the run goes, and once more when it ends.",
        mime_type="application/json",
    )
    async def snapshot_resource(name: str) -> str:
        try:
            return json.dumps(await backend.snapshot(name), default=str)
        except Refused as e:
            raise ResourceNotFoundError(str(e)) from None


_REGISTERED: tuple[Callable[[MCPServer[None], Runs], None], ...] = (
    _validate_tool,
    _start_tool,
    _runs_tool,
    _snapshot_tool,
    _set_tool,
    _stop_tool,
    _summary_tool,
    _compare_tool,
    _runs_resource,
    _snapshot_resource,
)
"""The tools, then the resources, in the order a client lists them."""
