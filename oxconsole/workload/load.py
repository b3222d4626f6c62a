"""Reading a workload file: TOML in, `--set` overrides applied, every section validated into a `Workload`.

Why this module exists: the entry points (`load_workload`, `load_sim_section`, `resolve_api_key`)
and the TOML reader whose errors name the file, line and column. The file is named as the user
gave it, with any control character escaped.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oxconsole.workload.overrides import apply_override
from oxconsole.workload.plans import PricePlan, parse_plans
from oxconsole.workload.problems import Problems, WorkloadError, did_you_mean, error, join_key, printable
from oxconsole.workload.schema import Workload
from oxconsole.workload.sections import build_workload
from oxconsole.workload.simschema import SimLimits, SimModelProfile
from oxconsole.workload.simsection import parse_sim_limits, parse_sim_profiles

_TOML_POS = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)\s*$")


def _read_toml(path: Path, label: str) -> dict[str, Any]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadError(f"{label}: expected a workload file, got no such file") from None
    except IsADirectoryError:
        raise WorkloadError(f"{label}: expected a workload file, got a directory") from None
    except PermissionError:
        raise WorkloadError(f"{label}: expected a readable workload file, got permission denied") from None
    except OSError as e:
        raise WorkloadError(f"{label}: expected a readable workload file, got {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise WorkloadError(
            f"{label}: expected a UTF-8 TOML text file, got bytes that are not UTF-8 (at byte {e.start})"
        ) from None
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        raise WorkloadError(f"{label}: expected a TOML text file, got binary data (NUL bytes)")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        where = label
        if m:
            msg = msg[: m.start()]
            where = (
                f"{label}: line {m.group(1)}, column {m.group(2)}" if m.group(1) else f"{label}: end of file"
            )
        msg = msg[:1].lower() + msg[1:]
        raise WorkloadError(f"{where}: expected valid TOML, got a syntax error: {msg}") from None
    except RecursionError:
        raise WorkloadError(f"{label}: expected valid TOML, got values nested too deeply") from None


def load_sim_section(path: str | Path) -> dict[str, SimModelProfile]:
    """Read only the `[sim.models.*]` tables of a workload or of a file holding just those tables."""
    label = printable(str(path))
    raw = _read_toml(Path(path), label)
    if "sim" not in raw:
        raise error(label, "sim.models", 'one or more [sim.models."NAME"] tables', "no [sim] table")
    return parse_sim_profiles(raw["sim"], label)


def load_sim_limits(path: str | Path) -> SimLimits:
    """Read only the `[sim]` table's `rpm_limit` / `tpm_limit` (defaults when there is none)."""
    label = printable(str(path))
    raw = _read_toml(Path(path), label)
    return parse_sim_limits(raw.get("sim", {}), label)


def load_plans(path: str | Path) -> dict[str, PricePlan]:
    """Read only the `[plans.*]` tables of a workload or of a file holding just those tables
    (`oxconsole report --plans FILE`); model overrides are not checked against any [[models]].
    Raises WorkloadError listing every error."""
    label = printable(str(path))
    raw = _read_toml(Path(path), label)
    if "plans" not in raw:
        raise error(label, "plans", "one or more [plans.NAME] tables", "no [plans] table")
    errs = Problems(label)
    plans = parse_plans(errs, raw["plans"], None)
    errs.raise_if_any(raw)
    if not plans:
        raise error(label, "plans", "one or more [plans.NAME] tables", "an empty [plans] table")
    return plans


def load_workload(path: str | Path, overrides: Sequence[str] = ()) -> Workload:
    """Read, override (--set) and validate a workload file.

    Raises WorkloadError with the user's words, listing every error at once: each `--set` that
    could not be applied (in command-line order), then every error in the document, in file order.
    Only a file that cannot be read as TOML stops at its first error.
    """
    p = Path(path)
    label = printable(str(path))
    raw = _read_toml(p, label)
    errs = Problems(label)
    for arg in overrides:
        try:
            apply_override(raw, arg, label)
        except WorkloadError as e:
            errs.note(*e.errors)
    return build_workload(raw, p, errs)


def resolve_api_key(w: Workload, endpoint: str) -> str | None:
    """The key for one endpoint from its `api_key_env` variable; None when the endpoint needs no key."""
    label = printable(str(w.path))
    ep = w.endpoints.get(endpoint)
    if ep is None:
        hint = did_you_mean(endpoint, w.endpoints)
        raise error(
            label,
            join_key("endpoints", endpoint),
            "an endpoint defined in [endpoints]" + (f' (did you mean "{hint}"?)' if hint else ""),
            "no such table",
        )
    if ep.api_key_env is None:
        return None
    value = os.environ.get(ep.api_key_env, "")
    if not value.strip():
        state = "is not set" if ep.api_key_env not in os.environ else "is not set (it is empty)"
        raise WorkloadError(
            f"{label}: {join_key(join_key('endpoints', endpoint), 'api_key_env')}: environment variable "
            f"{ep.api_key_env} {state}; expected it to hold the API key "
            f"(export {ep.api_key_env}=..., or remove api_key_env for a server that needs no key)"
        )
    return value


def resolve_headers(w: Workload, endpoint: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """One endpoint's extra headers (`headers`, then `headers_env` read from the environment) and
    the values that came from the environment (to keep them out of error details and logs)."""
    ep = w.endpoints[endpoint]
    headers = dict(ep.headers)
    secrets: list[str] = []
    for name, var in ep.headers_env.items():
        value = os.environ.get(var, "")
        if not value.strip():
            state = "is not set" if var not in os.environ else "is not set (it is empty)"
            path = join_key(join_key(join_key("endpoints", endpoint), "headers_env"), name)
            raise WorkloadError(
                f"{printable(str(w.path))}: {path}: environment variable {var} {state}; "
                f"expected it to hold the value of header {name}"
            )
        headers[name] = value
        secrets.append(value)
    return headers, tuple(secrets)
