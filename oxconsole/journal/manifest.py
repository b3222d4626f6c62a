"""The file beside a journal that describes it (`<results>.meta.json`): where it is, read and
written whole.

Why this module exists: the manifest holds what `--resume` checks (`fingerprint.py`, which needs
the workload), the sessions that wrote the journal (`sessions.py`, which `oxconsole report` reads)
and what the last session's summary showed that no record holds (`store_run_sections`: its
changes, phases, stage times, failed attempts), so that a report shows what the run showed.
Reading it must not load the workload machinery, so that `report` starts fast; and every writer
replaces it whole, so that a reader never sees half a file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.figures import FROM_DUE

__all__ = [
    "manifest_path",
    "read_manifest",
    "run_sections",
    "store_run_sections",
    "write_manifest_data",
]


def manifest_path(results: Path) -> Path:
    return results.with_name(results.name + ".meta.json")


def read_manifest(results: Path) -> dict[str, Any]:
    """The manifest beside the journal at `results`; empty when missing or not a JSON object."""
    try:
        data = orjson.loads(manifest_path(results).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_manifest_data(results: Path, data: dict[str, Any]) -> None:
    """Replace the manifest with `data` (a temporary file beside it, then a rename). OSError."""
    path = manifest_path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    os.replace(tmp, path)


RUN_KEY = "run"
"""The manifest's key for what the last session's summary showed that no record holds."""
RUN_SECTIONS = (
    "changes",
    "phases",
    "steps",
    *(f.key for f in FROM_DUE),
    "schedule",
    "stages",
    "stages_end",
    "warmup",
    "attempt_errors",
    "error_details",
    "cooldowns",
    "loop_lag_ms",
    "gc",
    "saved",
    "save_error",
)
"""Summary keys only the run knows (its live changes and their phases, stage times, failed
attempts and their details, the loop's health), kept so that `oxconsole report` shows them."""
RUN_REQUESTS = ("not_sent",)
"""`requests` keys only the run knows (what it did not send, None when stopped early)."""


def store_run_sections(results: Path, summary: dict[str, Any]) -> None:
    """Keep beside the journal what the run's final `summary` shows that its records do not
    (`RUN_SECTIONS`), tagged with the last session's start so that a later session's report never
    takes an earlier session's. OSError."""
    data = read_manifest(results)
    sessions = [d for d in data.get("sessions") or () if isinstance(d, dict)]
    kept: dict[str, Any] = {k: summary[k] for k in RUN_SECTIONS if k in summary}
    requests = summary.get("requests") or {}
    kept["requests"] = {k: requests[k] for k in RUN_REQUESTS if k in requests}
    cascade = summary.get("cascade")
    if isinstance(cascade, dict) and "steps" in cascade:
        kept["cascade_steps"] = cascade["steps"]  # the steps in force at the end
    kept["session"] = sessions[-1].get("started_at") if sessions else None
    data[RUN_KEY] = kept
    write_manifest_data(results, data)


def run_sections(manifest: dict[str, Any], last_session: float | None) -> dict[str, Any]:
    """What `store_run_sections` kept, when the session that kept it is the journal's last
    (`last_session`, its start); else empty."""
    kept = manifest.get(RUN_KEY)
    if not isinstance(kept, dict) or kept.get("session") != last_session:
        return {}
    return kept
