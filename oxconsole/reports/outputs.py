"""Where a run's files go: checked before anything is sent, an old journal kept aside, and told
to the user when the run ends.

Why this module exists: a results or summary path that cannot be written must be bad input found
before the first request (not a traceback, nor a summary lost after an hour's run), and every run
must end by saying where its journal and summary are; the command line, the engine process and
`attach` share these rules. Only the standard library at module level, so the fast commands stay
fast.

What may be given as a path:
- the journal (`[output] results`, `--output`): a regular file, or none yet in a folder that can
  be written to or created; never a folder, a device (`/dev/null`, `/dev/full`), a FIFO or a socket.
  The `.meta.json` beside it follows the same rule.
- the summary (`--summary-json`): the same, or one of `SUMMARY_STREAMS` (`-` and `/dev/stdout`
  write the JSON on stdout, and the summary table then goes to stderr so that stdout holds only
  the JSON; `/dev/stderr` writes it on stderr). Any other special file is refused: pipe `-` instead.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DEFAULT_JOURNAL",
    "SUMMARY_STREAMS",
    "beside_journal",
    "check_outputs",
    "earlier_journals",
    "journal_lines",
    "keep_aside",
    "summary_stream",
    "where_lines",
]

SUMMARY_STREAMS = {
    "-": "stdout",
    "/dev/stdout": "stdout",
    "/dev/fd/1": "stdout",
    "/dev/stderr": "stderr",
    "/dev/fd/2": "stderr",
}
"""`--summary-json` values that mean this process's stdout or stderr rather than a file."""
MANY_EARLIER = 2
"""From this many journals kept aside beside the current one, the end of a run says how many and
how to clean them."""
_STAMP = r"(\d{8}-\d{6})(?:-(\d+))?"
"""The time stamp `keep_aside` puts in a kept journal's name (`results.20261130-101500.jsonl`)."""

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


DEFAULT_JOURNAL = "results.jsonl"
"""The journal's file name under the default `[output] results` (`runs/{name}/results.jsonl`)."""


def beside_journal(results: Path, name: str) -> Path:
    """A file a run writes beside its journal (`summary.json`, `engine.log`): `NAME` itself when
    the journal has the default name, one folder a run (`runs/x/results.jsonl` ->
    `runs/x/summary.json`); else after the journal (`runs/a.jsonl` -> `runs/a.summary.json`), so
    that journals sharing a folder never share, nor overwrite, each other's summary and log."""
    if results.name == DEFAULT_JOURNAL:
        return results.with_name(name)
    stem = results.name[: -len(results.suffix)] if results.suffix else results.name
    return results.with_name(f"{stem}.{name}")


def summary_stream(arg: str) -> str | None:
    """`stdout` or `stderr` when `--summary-json` names one of them; None for a file."""
    return SUMMARY_STREAMS.get(arg)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in `folder` (made first if missing), or None."""
    probe = folder
    while True:
        try:
            st = probe.stat()
            break
        except (FileNotFoundError, NotADirectoryError):
            if probe.parent == probe:
                return f"{folder}: expected a folder that exists or can be created, found no such path"
            probe = probe.parent
        except OSError as e:
            return f"{folder}: expected a folder that can be written to, but {probe}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{folder}: expected a folder, but {probe} is {_kind(st.st_mode)}"
    if not os.access(probe, os.W_OK | os.X_OK):
        if probe == folder:
            return f"{folder}: expected a folder you can write to; it is read-only"
        return f"{folder}: expected a folder that exists or can be created; {probe} is read-only"
    return None


def _file_problem(path: Path, what: str, *, appended: bool) -> str | None:
    """Why `path` cannot be `what` (written whole, or `appended` to), or None."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return _folder_problem(path.parent)
    except OSError as e:
        return f"{path}: expected {what}, but it cannot be looked at: {e.strerror or e}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: expected {what}, found {_kind(st.st_mode)}"
    if appended and not os.access(path, os.W_OK):
        return f"{path}: expected {what} you can write to; it is read-only"
    return _folder_problem(path.parent)


def check_outputs(
    results: Path, summary_json: str | None, *, resume: bool, results_from: str = ""
) -> list[str]:
    """Every reason the journal, its `.meta.json` and the `--summary-json` file could not be
    written, each naming the path and what was expected; empty when all can be. `results_from`
    (`WORKLOAD.toml: output.results`, `--output`) leads the journal's reasons, so that they name
    where the path was given like every other bad input.

    Nothing is created or moved here: this runs before anything is sent or kept aside.
    """
    from oxconsole.journal.manifest import manifest_path

    # An existing non-empty journal is moved aside unless resuming; an empty one is appended to.
    appended = resume or _empty_file(results)
    lead = f"{results_from}: " if results_from else ""
    problems = [
        _file_problem(results, "a regular file for the results journal", appended=appended),
        _file_problem(manifest_path(results), "a regular file for the journal's manifest", appended=False),
    ]
    problems = [lead + p if p else None for p in problems]
    if summary_json and summary_stream(summary_json) is None:
        summary = Path(summary_json)
        if _same_file(summary, results) or _same_file(summary, manifest_path(results)):
            problems.append(f"{summary}: --summary-json: expected a file other than the results journal")
        elif not summary.parent.is_dir():
            # a typo in a folder name is likelier than a wish for new folders: refused, not made
            problems.append(
                f"{summary}: --summary-json: expected a file in a folder that exists, "
                f"but {summary.parent} is not one"
            )
        else:
            problems.append(
                _file_problem(
                    summary, "a regular file for the summary JSON (or - for stdout)", appended=False
                )
            )
    found: list[str] = []
    for p in problems:  # a folder that is read-only is named once, not for each file in it
        if p is not None and p not in found:
            found.append(p)
    return found


def _empty_file(path: Path) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def _same_file(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)


# --- journals kept aside ------------------------------------------------------------------------
def keep_aside(path: Path) -> Path:
    """Move an existing journal to `STEM.<its time>SUFFIX` beside it (never over another); the
    new name."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
    aside = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
    n = 1
    while aside.exists():
        aside = path.with_name(f"{path.stem}.{stamp}-{n}{path.suffix}")
        n += 1
    path.rename(aside)
    return aside


def earlier_journals(path: Path) -> list[Path]:
    """The journals kept aside beside `path` by earlier runs (`keep_aside` names), oldest first."""
    pattern = re.compile(re.escape(path.stem) + r"\." + _STAMP + re.escape(path.suffix) + r"\Z")
    try:
        found = [(m.group(1), m.group(2), n) for n in os.listdir(path.parent) if (m := pattern.match(n))]
    except OSError:
        return []
    found.sort(key=lambda f: (f[0], int(f[1] or 0)))
    return [path.with_name(n) for _, _, n in found]


# --- the end of a run ---------------------------------------------------------------------------
def journal_lines(path: Path) -> int | None:
    """Whole lines in the journal (one per record); None when it cannot be read."""
    n = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
    except OSError:
        return None
    return n


def where_lines(
    results: Path,
    *,
    summaries: Sequence[str] = (),
    log: Path | None = None,
    kept_aside: Path | None = None,
) -> list[str]:
    """What a run says last: where its journal (and how many records), summaries and engine log
    are, and the journals kept aside beside it."""
    n = journal_lines(results)
    count = "unreadable" if n is None else f"{n} record{'' if n == 1 else 's'}"
    parts = [f"results: {results} ({count})"]
    if summaries:
        parts.append("summary: " + ", ".join(summary_stream(s) or s for s in summaries))
    if log is not None:
        parts.append(f"engine log: {log}")
    lines = ["; ".join(parts)]
    if kept_aside is not None:
        lines.append(f"the previous journal was kept as {kept_aside}")
    earlier = earlier_journals(results)
    if len(earlier) >= MANY_EARLIER:
        glob = results.with_name(f"{results.stem}.[0-9]*{results.suffix}")  # not the .server.jsonl beside it
        lines.append(f"{len(earlier)} earlier journals beside it ({glob}); remove them when no longer needed")
    return lines
