"""What the end of a run tells its user beyond the table: the command that continues it
(`--resume` with the run's own flags) and the notes on results not saved, requests not sent and
a goodput below its target.

Why this module exists: the headless run, the engine process and the console that started a run
end with the same words and the same resume command.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CACHE_HINT", "RAY_OVERRIDE", "cache_note", "end_notes", "resume_command"]


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

    from oxconsole.base.redaction import shown_override

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


CACHE_HINT = (
    "no cached tokens reported though the prompts share a prefix: the server does not report its "
    "prefix cache (vLLM: --enable-prompt-tokens-details, SGLang: --enable-cache-report; the "
    "simulator: [sim.models.NAME] prefix_cache = true)"
)


def cache_note(summary: Mapping[str, Any], shared_prefix: bool) -> str | None:
    """`CACHE_HINT` for a run whose prompts share a prefix (`prefix_tokens`, multi-turn sessions)
    and whose answers never said how much of it was cached; None otherwise."""
    shared = shared_prefix or bool(summary.get("conversations"))
    tokens = summary.get("tokens") or {}
    answered = (summary.get("requests") or {}).get("ok")
    return CACHE_HINT if shared and answered and "cached" not in tokens else None


def end_notes(
    summary: Mapping[str, Any], resume: Callable[[], str], shared_prefix: bool = False
) -> list[str]:
    """What the end of a run says beyond its table: results that could not be saved (which file,
    why), how many requests were not sent or were cancelled at a stop, with the command that sends
    them (`resume()`), a goodput below the `[slo]` target, each burst's step response, a client
    behind its schedule, and how to turn on a server's cache report when the prompts share a
    prefix (`shared_prefix`) and none was reported."""
    from oxconsole.metrics.due import behind
    from oxconsole.metrics.goodput import slo_note
    from oxconsole.metrics.stepresponse import step_notes

    notes: list[str] = []
    req = summary.get("requests") or {}
    if summary.get("saved") is False:
        notes.append(
            f"error: results could not be saved: {summary.get('save_error')}; the run stopped at once "
            f"and its summary counts only the {req.get('total', 0):,} requests in the journal"
        )
    not_sent = req.get("not_sent", 0)
    cancelled = req.get("cancelled") or 0
    stopped = f"{cancelled:,} {'request' if cancelled == 1 else 'requests'} cancelled at the stop"
    if not_sent is None:
        notes.append(f"stopped before the end of the run; continue with: {resume()}")
    elif not_sent:
        what = "request" if not_sent == 1 else "requests"
        notes.append(f"{not_sent:,} {what} not sent; continue with: {resume()}")
    elif cancelled:
        notes.append(f"{stopped}; continue with: {resume()}")
    if cancelled and not_sent != 0:
        notes.append(f"{stopped}: --resume sends them again")
    notes += filter(None, [slo_note(summary), cache_note(summary, shared_prefix)])
    notes += step_notes(summary)
    notes += filter(None, [behind(summary)])
    return notes
