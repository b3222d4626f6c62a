"""The workload file: one typed, immutable structure loaded from TOML.

Why this package exists: every other part (engine, simulator, console, report) reads the workload
through these dataclasses only, so the schema, its defaults and its error messages live in one place.
Errors are raised as `WorkloadError` whose message is already in the user's words, one line per
error and every error of the file at once (`errors` holds the lines):
``workload.toml: run.concurrency: expected an integer >= 1, got "fifty"``.

INTERFACE (fixed; other modules rely on these names, imported from this package):
  load_workload(path, overrides=()) -> Workload      # overrides: ["run.concurrency=200", ...]
  iter_prompts(workload) -> Iterator[Prompt]          # streams; applies repeat/requests/duration cycling
  check_prompts(workload) -> PromptStats              # full validation pass over the prompt source
  resolve_api_key(workload, endpoint_name) -> str | None
  resolve_headers(workload, endpoint_name) -> (headers, values from the environment)
  describe(workload, stats) -> str                    # the text `oxconsole validate` prints
  load_sim_section(path) -> dict[str, SimModelProfile]
  load_sim_limits(path) -> SimLimits                  # the [sim] table's rpm_limit / tpm_limit
  load_plans(path) -> dict[str, PricePlan]           # the [plans.*] tables of any TOML file
  parse_sim_profiles(sim_table, file_label) -> dict[str, SimModelProfile]
  WorkloadError(Exception)

Where each question is answered: `schema` (the dataclasses, one per table; a table's keys are
its fields), `prompts.promptdata` (what the prompts are read into), `problems` and `values` (error texts,
`WorkloadError`, collecting them, typed reading of TOML values), `bounds` (the largest values a
run can use, the name rule), `sections` (one parser per table), `overrides` (--set), `load`
(file -> Workload, API keys), `prompts` (the prompt sources; `prompts.feed` streams and checks
them), `describe` (validate's text), `loadshape` ([[stages]], the load shape).

Stdlib only (plus orjson for the prompts file, and `oxconsole.media` to read the images and audio
prompts name): importing this package never loads the UI or HTTP stack.
"""

from __future__ import annotations

from oxconsole.workload.describe import describe
from oxconsole.workload.load import (
    load_plans,
    load_sim_limits,
    load_sim_section,
    load_workload,
    resolve_api_key,
    resolve_headers,
)
from oxconsole.workload.loadshape import stages_duration
from oxconsole.workload.overrides import apply_override
from oxconsole.workload.packing import Pack, format_pack, parse_pack, split_answer
from oxconsole.workload.plans import parse_plans, plans_to_toml
from oxconsole.workload.problems import WorkloadError
from oxconsole.workload.prompts.feed import check_prompts, iter_prompts, request_ids, turn_id
from oxconsole.workload.prompts.promptdata import Prompt, PromptStats
from oxconsole.workload.schema import (
    DEFAULT_RETRY_ON,
    Arrival,
    EndpointConfig,
    ModelConfig,
    OutputConfig,
    PackingConfig,
    PricePlan,
    Prices,
    PromptsConfig,
    RetryConfig,
    RoutingConfig,
    RoutingRule,
    RunConfig,
    SloConfig,
    Stage,
    Strategy,
    SyntheticConfig,
    Workload,
)
from oxconsole.workload.simschema import SimLimits, SimModelProfile
from oxconsole.workload.simsection import parse_sim_profiles
from oxconsole.workload.values import parse_duration

__all__ = [
    "DEFAULT_RETRY_ON",
    "Arrival",
    "EndpointConfig",
    "ModelConfig",
    "OutputConfig",
    "Pack",
    "PackingConfig",
    "PricePlan",
    "Prices",
    "Prompt",
    "PromptStats",
    "PromptsConfig",
    "RetryConfig",
    "RoutingConfig",
    "RoutingRule",
    "RunConfig",
    "SimLimits",
    "SimModelProfile",
    "SloConfig",
    "Stage",
    "Strategy",
    "SyntheticConfig",
    "Workload",
    "WorkloadError",
    "apply_override",
    "check_prompts",
    "describe",
    "format_pack",
    "iter_prompts",
    "load_plans",
    "load_sim_limits",
    "load_sim_section",
    "load_workload",
    "parse_duration",
    "parse_pack",
    "parse_plans",
    "parse_sim_profiles",
    "plans_to_toml",
    "request_ids",
    "resolve_api_key",
    "resolve_headers",
    "split_answer",
    "stages_duration",
    "turn_id",
]
