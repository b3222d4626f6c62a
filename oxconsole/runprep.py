"""Getting a run ready: bad input and exit codes, the argument parser, the checked workload, the
results path, and the files a run leaves beside its journal.

Why this module exists: the command line, the engine process and `attach` must turn the same
mistakes into the same message and the same exit code, and agree on where a run's files are.
It imports neither the engine nor Textual at module level, so the fast commands stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oxconsole.journal.lock import JournalLock
    from oxconsole.workload import PromptStats, Workload

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ERRORS",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_SAVED",
    "EXIT_OK",
    "LOG_NAME",
    "RAY_OVERRIDE",
    "SUMMARY_NAME",
    "BadInput",
    "Parser",
    "PreparedRun",
    "check_progress_interval",
    "end_notes",
    "load_checked",
    "prepare_run",
    "resume_command",
    "write_json",
]

EXIT_OK, EXIT_ERRORS, EXIT_BAD_INPUT, EXIT_NOT_SAVED, EXIT_INTERRUPTED = 0, 1, 2, 4, 130
"""Every request ok; some ended in error; bad input (no traceback); results could not be saved
(the journal or the summary); stopped before every request was sent. Precedence 2, 4, 130, 3, 1, 0
(`RunOutcome.exit_code` decides a run's)."""
LOG_NAME = "engine.log"
"""The engine process's output, beside the results journal."""
SUMMARY_NAME = "summary.json"
"""The summary the engine process writes beside the results journal before the run ends."""


class BadInput(Exception):
    """A user error: printed as one paragraph, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse with usage errors as bad input: the usage line, one message, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


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
        stats = check_prompts(w)
        for m in w.models:
            resolve_api_key(w, m.endpoint)
            resolve_headers(w, m.endpoint)
    except WorkloadError as e:
        raise BadInput(str(e)) from None
    return w, stats


def _results_path(
    w: Workload, output: str | None, resume: bool, summary_json: str | None
) -> tuple[Path, Path | None, JournalLock | None]:
    """The journal path, with every output checked first (BadInput naming each path that cannot be
    written); its lock taken; an existing journal is then kept aside (never overwritten) unless
    resuming: where."""
    from oxconsole.outputs import check_outputs, keep_aside

    path = Path(output) if output else w.results_path()
    if resume and not path.exists():
        raise BadInput(f"{path}: --resume: expected an existing results journal, found none")
    problems = check_outputs(path, summary_json, resume=resume)
    if len(problems) == 1:
        raise BadInput(f"{problems[0]} (nothing was sent)")
    if problems:
        raise BadInput("outputs that cannot be written (nothing was sent):\n  " + "\n  ".join(problems))
    lock = _lock(path)
    if not resume and path.is_file() and path.stat().st_size > 0:
        aside = keep_aside(path)
        _manifest_aside(path, aside)
        return path, aside, lock
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
    """Load and check the workload, check every output path (`oxconsole.outputs`), settle the
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


def write_json(path: Path, data: object, *, private: bool = False) -> None:
    """Write `data` as JSON so that a reader never sees half a file (a temporary file beside it,
    then a rename).

    Default: indented with a final newline (summaries, read by people), missing folders created.
    `private` (a run's registry entry): one compact line, mode 0600, and the folder must exist
    already (a folder made here would not be owner-only). A `--summary-json` of `-` or
    /dev/stdout is not a path for this (see `oxconsole.outputs.SUMMARY_STREAMS`).
    """
    import orjson

    if private:
        body, mode = orjson.dumps(data), 0o600
    else:
        body, mode = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n", 0o666
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "wb") as f:
        f.write(body)
    os.replace(tmp, path)


def _shown(path: str | os.PathLike[str]) -> str:
    """A path as a user would type it here: relative when under the current folder."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(p)


RAY_OVERRIDE = 'run.cluster="ray"'
"""The `--set` that `--ray-address ADDR` adds (with RAY_ADDRESS=ADDR); a resume hint gives the flag."""


def resume_command(workload: str, overrides: Sequence[str], results: str | os.PathLike[str] | None) -> str:
    """The command that continues a run: `oxconsole WORKLOAD --resume` with the run's `--set` flags,
    and `--output` when its journal is not where the workload (so overridden) puts it from here."""
    import shlex

    from oxconsole.redaction import shown_override

    args = ["oxconsole", _shown(workload), "--resume"]
    if results is not None and not os.path.lexists(results):
        args.pop()  # the journal is gone (its folder deleted): nothing to resume, run it again
    for o in overrides:
        if o == RAY_OVERRIDE and os.environ.get("RAY_ADDRESS"):  # what --ray-address ADDR added
            args += ["--ray-address", os.environ["RAY_ADDRESS"]]
        else:
            args += ["--set", shown_override(o)]  # a header's value may be a key: not repeated
    if results is not None:
        from oxconsole.workload import WorkloadError, load_workload

        try:
            default = load_workload(workload, overrides).results_path().resolve()
        except (WorkloadError, OSError):
            default = None
        if default != Path(results).resolve():
            args += ["--output", _shown(results)]
    return shlex.join(args)


def end_notes(summary: Mapping[str, Any], resume: Callable[[], str]) -> list[str]:
    """What the end of a run says beyond its table: results that could not be saved (which file,
    why), how many requests were not sent with the command that sends them (`resume()`), and a
    goodput below the `[slo]` target."""
    from oxconsole.metrics.goodput import slo_note

    notes: list[str] = []
    req = summary.get("requests") or {}
    if summary.get("saved") is False:
        notes.append(
            f"error: results could not be saved: {summary.get('save_error')}; the run stopped at once "
            f"and its summary counts only the {req.get('total', 0):,} requests in the journal"
        )
    not_sent = req.get("not_sent", 0)
    if not_sent is None:
        notes.append(f"stopped before the end of the run; continue with: {resume()}")
    elif not_sent:
        what = "request" if not_sent == 1 else "requests"
        notes.append(f"{not_sent:,} {what} not sent; continue with: {resume()}")
    notes += filter(None, [slo_note(summary)])
    return notes
