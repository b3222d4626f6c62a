"""Getting a run ready: the checked workload, the journal's path (every output checked first, an
old journal kept aside) and the names of the files a run leaves beside its journal.

Why this module exists: the command line, the engine process and `sweep` prepare a run the same
way, and agree on where its files are. It imports neither the engine nor Textual at module level.
"""

from __future__ import annotations

import sys
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from oxconsole.base.exits import BadInput

if TYPE_CHECKING:
    from oxconsole.journal.lock import JournalLock
    from oxconsole.workload import PromptStats, Workload

__all__ = [
    "LOG_NAME",
    "SUMMARY_NAME",
    "PreparedRun",
    "check_progress_interval",
    "load_checked",
    "prepare_run",
]

LOG_NAME = "engine.log"
"""The engine process's output, beside the results journal."""
SUMMARY_NAME = "summary.json"
"""The summary the engine process writes beside the results journal before the run ends."""


def check_progress_interval(seconds: float) -> None:
    if seconds <= 0:
        raise BadInput(f"--progress-interval: expected seconds > 0, got {seconds}")


def load_checked(path: str, overrides: list[str]) -> tuple[Workload, PromptStats]:
    """The workload with its prompts read and every key variable set; BadInput otherwise."""
    from oxconsole.workload import (
        WorkloadError,
        check_prompts,
        load_workload,
        resolve_api_key,
        resolve_headers,
    )

    try:
        w = load_workload(path, overrides)
    except WorkloadError as e:
        raise BadInput("\n".join([str(e), *_unset_keys(path, overrides, str(e))])) from None
    problems: list[str] = []
    stats = None
    try:
        stats = check_prompts(w)
    except WorkloadError as e:
        problems.append(str(e))
    for ep in dict.fromkeys(m.endpoint for m in w.models):  # every endpoint once, all of them
        try:
            resolve_api_key(w, ep)
            resolve_headers(w, ep)
        except WorkloadError as e:
            problems.append(str(e))
    if problems or stats is None:
        raise BadInput("\n".join(problems))
    return w, stats


def _unset_keys(path: str, overrides: list[str], said: str) -> list[str]:
    """The `api_key_env` variables that are not set, for a workload with other errors too (every
    error found is said at once): read from the raw document with the `--set`s that apply."""
    import os
    import tomllib

    from oxconsole.workload import WorkloadError, apply_override

    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    for o in overrides:
        try:
            apply_override(raw, o, path)
        except WorkloadError:
            continue
    endpoints = raw.get("endpoints")
    out: list[str] = []
    for name, ep in endpoints.items() if isinstance(endpoints, dict) else ():
        var = ep.get("api_key_env") if isinstance(ep, dict) else None
        key = f"endpoints.{name}.api_key_env"
        if isinstance(var, str) and var and not os.environ.get(var, "").strip() and key not in said:
            out.append(
                f"{path}: {key}: environment variable {var} is not set; expected it to hold the API key "
                f"(export {var}=..., or remove api_key_env for a server that needs no key)"
            )
    return out


def _results_path(
    w: Workload, output: str | None, resume: bool, summary_json: str | None
) -> tuple[Path, Path | None, JournalLock | None]:
    """The journal path, with every output checked first (BadInput naming each path that cannot be
    written); its lock taken; an existing journal is then kept aside (never overwritten) unless
    resuming: where."""
    from oxconsole.reports.outputs import check_outputs, keep_aside

    path = Path(output) if output else w.results_path()
    if resume and not path.exists():
        raise BadInput(f"{path}: --resume: expected an existing results journal, found none")
    results_from = "--output" if output else f"{w.path}: output.results"
    problems = check_outputs(path, summary_json, resume=resume, results_from=results_from)
    if len(problems) == 1:
        raise BadInput(f"{problems[0]} (nothing was sent)")
    if problems:
        raise BadInput("outputs that cannot be written (nothing was sent):\n  " + "\n  ".join(problems))
    lock = _lock(path)
    if not resume and path.is_file() and path.stat().st_size > 0:
        aside = keep_aside(path)
        _manifest_aside(path, aside)
        return path, aside, lock
    if not resume:
        _series_aside(path, None)
    return path, None, lock


def _lock(path: Path) -> JournalLock | None:
    """The journal's lock, before it is read or moved (one writer at a time); BadInput when
    another run holds it. None for a results path that is not a file (/dev/null)."""
    from oxconsole.journal.lock import JournalBusy, JournalLock

    if path.exists() and not path.is_file():
        return None
    try:
        return JournalLock.acquire(path)
    except JournalBusy as e:
        raise BadInput(f"{e} (nothing was sent)") from None


def _manifest_aside(path: Path, aside: Path) -> None:
    """The journal's manifest goes with it (`report` on the old journal still knows its sessions)."""
    from oxconsole.journal.manifest import manifest_path

    manifest = manifest_path(path)
    if manifest.exists():
        manifest.rename(manifest_path(aside))
    _series_aside(path, aside)


def _series_aside(path: Path, aside: Path | None) -> None:
    """The server series beside the journal (`<stem>.server.jsonl`, appended by a run) goes with
    it; one left without its journal is kept aside by its own time, so a new run starts its own."""
    from oxconsole.metrics.server.series import series_path
    from oxconsole.reports.outputs import keep_aside

    series = series_path(path)
    try:
        if not series.is_file():
            return
        if aside is not None:
            series.rename(series_path(aside))
        else:
            keep_aside(series)
    except OSError:
        pass  # the new run's series is then appended to it: `report` reads both runs' rounds


@dataclass
class PreparedRun:
    """A run validated and ready to start: what the headless runner and the engine process share."""

    workload: Workload
    results_path: Path
    skip: AbstractSet[str]
    """Ids already `ok` in the journal (--resume): not sent again."""
    total: int | None
    """Requests this run will send, when known."""
    overrides: tuple[str, ...]
    kept_aside: Path | None = None
    """Where the journal of an earlier run at `results_path` was moved, if one was."""
    resume: bool = False
    """Appending to an existing journal (--resume): the run ends with the whole journal's summary."""
    lock: JournalLock | None = None
    """The journal's lock (`journal/lock.py`), held until this process ends or hands it over."""


def prepare_run(
    workload: str,
    overrides: list[str],
    output: str | None,
    resume: bool,
    summary_json: str | None = None,
) -> PreparedRun:
    """Load and check the workload, check every output path (`oxconsole.reports.outputs`), settle the
    journal path (an old one is kept aside), read ids already done on --resume. Notes go to
    stderr; bad input raises BadInput, before anything is sent or moved."""
    w, stats = load_checked(workload, overrides)
    path, aside, lock = _results_path(w, output, resume, summary_json)
    skip: AbstractSet[str] = set()
    if resume:
        from oxconsole.journal.journal import ok_ids

        skip, issues = ok_ids(path)
        for msg in issues.messages(path):  # the same lines, counted the same way, as `report`
            print(f"oxconsole: warning: {msg}", file=sys.stderr)
        print(f"oxconsole: resuming: {len(skip)} request(s) already ok in {path}", file=sys.stderr)
    total = stats.total_requests
    if total is not None and skip:
        total = max(0, total - len(skip))
    return PreparedRun(w, path, skip, total, tuple(overrides), aside, resume, lock)
