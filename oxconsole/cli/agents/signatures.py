"""The MCP tools' signatures: each argument's type and description, and each answer's shape.

Why this module exists: these types are what a client sees of the tools (their input and output
JSON Schemas, written by the SDK from them); the values themselves are judged by the engine's
checks (`tools.py` hands them on), not by these schemas. Kept apart from the tools' code, so the
contract a client reads is in one place.
"""

from __future__ import annotations

from typing import Annotated, Any, Required, TypedDict

from pydantic import Field, WithJsonSchema

# --- argument schemas: what a client sees; the values are judged by the engine's checks -------------
RUN_NAME = Annotated[
    str,
    Field(description="The run: NAME-PID as `runs` lists it, or its NAME while no other run has it."),
]
WORKLOAD = Annotated[
    str | None,
    Field(description="Path of a workload TOML file on this machine (as `oxconsole WORKLOAD.toml`)."),
]
URL = Annotated[
    str | None,
    Field(
        description='Base URL of an OpenAI-compatible endpoint ("http://host:8000/v1"), or "sim" for '
        "the embedded simulator; with `workload` it overrides the endpoint, without it a workload "
        "is built from the URL and `model`."
    ),
]
MODEL = Annotated[str | None, Field(description="Model name as the endpoint's GET /models lists it.")]
OVERRIDES = Annotated[
    list[str] | None,
    Field(
        description='Workload overrides as `--set` takes them, each "KEY=VALUE" with a dotted key and a '
        'TOML value: ["run.concurrency=200", "models.0.weight=2", "run.duration=\\"10m\\""].'
    ),
]
CONCURRENCY = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "integer",
            "minimum": 1,
            "maximum": 1_000_000,
            "description": "Requests in flight at most (run.concurrency), 1 to 1,000,000.",
        }
    ),
]
RATE = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "maximum": 1e6,
            "description": "Requests per second the run may send (run.rate, a token bucket); 0 = unlimited.",
        }
    ),
]
REQUESTS = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "integer",
            "minimum": 1,
            "description": "Requests to send in all (run.requests); not with `duration`.",
        }
    ),
]
DURATION = Annotated[
    object,
    WithJsonSchema(
        {
            "type": ["string", "number"],
            "description": 'Wall-clock cap (run.duration): seconds, or "90s", "10m", "1h"; '
            "not with `requests`.",
        }
    ),
]
TPM = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "maximum": 1e12,
            "description": "Token budget: tokens (input + output) per minute across the run "
            "(run.tpm); 0 = none.",
        }
    ),
]
WEIGHTS = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": 0, "maximum": 1e9},
            "description": "Routing weights by model name, {model: weight}: relative shares of traffic "
            "under weighted routing (models.N.weight); only the models named change.",
        }
    ),
]
ENABLED = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {"type": "boolean"},
            "description": "Models to switch on (true) or off (false), {model: bool}; a model switched "
            "off gets no new requests, those in flight finish.",
        }
    ),
]
CASCADE = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "uniqueItems": True,
            "description": "The cascade's models in force, in order (runs with [quality] and "
            "routing.cascade only); a model left out is a step switched off.",
        }
    ),
]
PAUSED = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "boolean",
            "description": "true: stop dispatching (requests in flight finish); false: go on.",
        }
    ),
]
AUTO = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "boolean",
            "description": "true: the engine looks for the highest concurrency meeting the run's [slo] "
            "and holds it (needs [slo]); false: the concurrency stays where it is. Setting "
            "`concurrency` turns auto off.",
        }
    ),
]
CANCEL = Annotated[
    object,
    WithJsonSchema(
        {
            "type": "boolean",
            "default": False,
            "description": "true: cancel the requests in flight at once; false (default): let them "
            "finish within the run's grace time (run.grace).",
        }
    ),
]


# --- results ------------------------------------------------------------------------------------
class ValidateOut(TypedDict):
    valid: Annotated[bool, Field(description="true: the workload would run as described.")]
    errors: Annotated[
        list[str], Field(description="Every problem found, each naming file, key and expectation.")
    ]
    name: Annotated[str | None, Field(description="The run's name (the workload's `name`).")]
    would_run: Annotated[str | None, Field(description="What would run, as `oxconsole validate` prints it.")]
    models: list[str]
    requests: Annotated[int | None, Field(description="Requests that would be sent; null when set by time.")]


class StartOut(TypedDict):
    name: Annotated[str, Field(description="NAME-PID: the run's key for snapshot, set and stop.")]
    pid: Annotated[int, Field(description="The run's process; it goes on after this server exits.")]
    journal: Annotated[str, Field(description="The results journal (JSONL) the run appends to.")]


class RunsOut(TypedDict):
    runs: Annotated[
        list[dict[str, Any]],
        Field(
            description="The runs going for this user, oldest first, as `oxconsole ps --json` lists them: "
            "name, pid, state (starting|running|paused|draining), done, total, req_per_s, errors, "
            "started_at (unix s), workload_path, results_path."
        ),
    ]


Timing = Annotated[
    dict[str, float | None],
    Field(
        description="mean, p50, p90, p95, p99, max in milliseconds over ok requests (null: none measured)."
    ),
]


class SnapshotOut(TypedDict, total=False):
    """The run so far: the summary's keys (see `summary`) plus what it is doing now. Every key but
    `run` and `state` may be absent (a run starting has no figures yet)."""

    run: Required[Annotated[str, Field(description="NAME-PID: the run's key.")]]
    state: Required[Annotated[str, Field(description="starting | running | paused | draining | done")]]
    name: Annotated[str, Field(description="The workload's name.")]
    in_flight: Annotated[int, Field(description="Requests sent and not yet answered.")]
    concurrency: Annotated[int, Field(description="Concurrency limit now (requests in flight at most).")]
    rate: Annotated[float, Field(description="Rate limit now, requests per second; 0 = unlimited.")]
    tpm: Annotated[float, Field(description="Token budget now, tokens per minute; 0 = none.")]
    paused: bool
    auto: Annotated[bool, Field(description="true: the auto controller sets the concurrency.")]
    phase: Annotated[
        dict[str, Any],
        Field(description="The phase now (the span since the last change): index, since_s, settings."),
    ]
    exit_code: Annotated[
        int, Field(description="Once the run has ended: its exit code (0 every request ok).")
    ]
    duration_s: Annotated[float, Field(description="Seconds of running time so far.")]
    requests: Annotated[
        dict[str, int], Field(description="total, ok, error, retried, fallbacks (, not_sent, cancelled).")
    ]
    throughput: Annotated[dict[str, float], Field(description="requests_per_s (ok), output_tokens_per_s.")]
    latency_ms: Timing
    ttft_ms: Timing
    itl_ms: Timing
    queue_ms: Timing
    changes: Annotated[
        list[dict[str, Any]],
        Field(
            description='Every change so far: t (s since start), what, from, to, model?, by ("agent": yours).'
        ),
    ]
    phases: list[dict[str, Any]]
    tokens: dict[str, int]
    cost: dict[str, Any]
    errors: dict[str, int]
    models: dict[str, Any]


class SetOut(TypedDict):
    changes: Annotated[
        list[dict[str, Any]],
        Field(
            description='The changes made, as the run logged them: t, what, from, to, model?, by = "agent". '
            "Empty when every value was already in force, or when held."
        ),
    ]
    held: Annotated[
        bool,
        Field(
            description="true: the run is still starting; the values were accepted and take effect "
            "(and are logged) when its clock starts."
        ),
    ]
