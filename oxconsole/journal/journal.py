"""The results journal: one JSON line per finished request, appended and flushed per record.

Why this module exists: results must survive a crash. Records are written with `os.write` of
whole lines on an O_APPEND descriptor (no user-space buffer to lose): the records finished within
one event-loop iteration go out together in one `os.write` at the end of that iteration (a
`call_soon`), so a crash loses at most the requests that were finishing at that moment, as if
they had been in flight, and at most the last line is torn. Without a running loop each record is
written at once. `fsync` runs at most once a second off the event loop and once at close. A
journal whose last line was torn by an earlier crash is continued on a fresh line, so the torn
line stays the only bad one.

A write or fsync that fails (disk full, quota, I/O error) is never an exception in a callback and
never silent, and neither is a record that cannot be encoded or a journal file deleted (or its
folder) under the run, found at the next fsync: the journal stops taking lines, keeps the first
error (`failure`, naming the file and the reason), counts what really reached the file
(`written`) and calls `on_failure` once, so the engine can stop at once and the run can end with
exit 4. `saved_records` reads back the lines this
journal wrote (from `start`), so a failed run's summary can count exactly what was saved. The file
is created owner-only (0600): it holds response text.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.idset import IdSet
from oxconsole.journal.reading import JournalIssues, journal_items
from oxconsole.journal.records import RequestRecord, untrial_id

GONE = "the journal was deleted or moved while the run wrote it (its folder removed?): its lines are lost"


class Journal:
    def __init__(self, path: Path, on_failure: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_failure = on_failure
        """Called once, on the loop's thread, with `failure` when a write or fsync first fails."""
        self.failure: str | None = None
        """The first write or fsync error, as "PATH: reason"; nothing is written after it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._dirty = False
        self._pending: list[bytes] = []
        self._pending_count = 0
        self.records = 0
        """Lines handed to the journal."""
        self.written = 0
        """Whole lines that reached the file (`records` less those lost to a failure)."""
        size = os.fstat(self._fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    self._write_all(b"\n")
        self.start = os.fstat(self._fd).st_size
        """Bytes in the file before this journal's first line (an earlier session's, on --resume)."""

    def write(self, rec: RequestRecord) -> None:
        self.write_dict(rec.to_json_dict())

    def write_dict(self, d: dict[str, Any]) -> None:
        try:
            line = orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError as e:  # orjson.JSONEncodeError: a value no record should hold
            self.records += 1
            self._fail(f"a record could not be written as JSON ({e})")
            return
        self.write_lines(line, 1)

    def write_lines(self, data: bytes, count: int) -> None:
        """Append `count` whole JSON lines, already encoded (each ending in a newline)."""
        self.records += count
        if self.failure is not None:
            return
        pending = self._pending
        pending.append(data)
        self._pending_count += count
        if len(pending) == 1:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
            else:
                loop.call_soon(self.flush)

    def _write_all(self, data: bytes) -> int:
        """Write all of `data`; on an error, the bytes written before it and the error."""
        n = 0
        try:
            while n < len(data):  # short writes are rare (disk full, signals) but possible
                n += os.write(self._fd, data[n:])
        except OSError as e:
            self._fail(e)
        return n

    def _fail(self, e: OSError | str) -> None:
        if self.failure is not None:
            return
        reason = e if isinstance(e, str) else e.strerror or str(e)
        self.failure = f"{self.path}: {reason}"
        self._pending.clear()
        self._pending_count = 0
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def flush(self) -> None:
        """Write the lines not written yet, in one `os.write` (more if it comes back short)."""
        pending = self._pending
        if not pending or self.failure is not None:
            return
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        count = self._pending_count
        pending.clear()
        self._pending_count = 0
        n = self._write_all(data)
        self.written += count if n == len(data) else data.count(b"\n", 0, n)
        self._dirty = True

    def _fsync(self) -> None:
        if self._dirty and self._fd >= 0 and self.failure is None:
            self._dirty = False
            try:
                os.fsync(self._fd)
            except OSError as e:
                self._fail(e)
            else:
                self._check_still_there()

    def _check_still_there(self) -> None:
        """Lines written into a file that was deleted (or its folder) or replaced are lost as
        surely as lines a full disk refused: after each fsync, the path must still name this file."""
        try:
            ours = os.fstat(self._fd)
            st = os.stat(self.path)
        except FileNotFoundError:
            self._fail(GONE)
            return
        except OSError as e:
            self._fail(e)
            return
        if ours.st_nlink == 0 or (st.st_dev, st.st_ino) != (ours.st_dev, ours.st_ino):
            self._fail(GONE)

    def sync(self) -> None:
        self.flush()
        self._fsync()

    async def sync_async(self) -> None:
        self.flush()  # on the loop's thread, where lines are added
        if self._dirty and self.failure is None:
            err: list[OSError] = []
            await asyncio.get_running_loop().run_in_executor(None, self._fsync_into, err)
            if err:
                self._fail(err[0])  # back on the loop's thread
            else:
                self._check_still_there()

    def _fsync_into(self, err: list[OSError]) -> None:
        """fsync off the loop; an error is handed back to the loop's thread, not raised there."""
        self._dirty = False
        try:
            os.fsync(self._fd)
        except OSError as e:
            err.append(e)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1


READ_CHUNK = 1 << 20


def saved_records(path: Path, start: int = 0) -> Iterator[RequestRecord]:
    """The records of the whole lines in `path` from byte `start` to the size it has now, streamed;
    a line that does not parse (torn by a failed or cut write) is skipped. Nothing for a file that
    is not a regular file (/dev/null reads empty, /dev/full without end)."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size <= start:
        return
    left = st.st_size - start
    rest = b""
    with open(path, "rb") as f:
        f.seek(start)
        while left > 0:
            chunk = f.read(min(READ_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                rec = _record(line)
                if rec is not None:
                    yield rec
    # `rest` has no newline: a line cut short by the failed write, not a saved record


def _record(line: bytes) -> RequestRecord | None:
    if not line.strip():
        return None
    try:
        d = orjson.loads(line)
        return RequestRecord.from_json_dict(d) if isinstance(d, dict) and "id" in d else None
    except (orjson.JSONDecodeError, ValueError, TypeError, KeyError):
        return None


def _ok_id(d: dict[str, Any]) -> str | None:
    return str(d["id"]) if d.get("status") == "ok" else None


def _trial_ok_id(trial: int) -> Callable[[dict[str, Any]], str | None]:
    """`_ok_id` of trial `trial`'s records, as the request's own id (without `@trialN`)."""

    def ok_id(d: dict[str, Any]) -> str | None:
        if d.get("status") != "ok" or d.get("trial") != trial:
            return None
        return untrial_id(str(d["id"]), trial)

    return ok_id


def _ok_lines(path: Path, issues: JournalIssues | None = None, trial: int = 0) -> Iterator[str]:
    """The ids of the `ok` records of a journal (of one trial's, by its requests' own ids, for
    `trial` > 0), streamed, read as `report` reads them."""
    if not path.exists():
        return
    for rid in journal_items(path, _trial_ok_id(trial) if trial else _ok_id, issues):
        if rid is not None:
            yield rid


def ok_ids(path: Path, trial: int = 0) -> tuple[IdSet, JournalIssues]:
    """Ids recorded `ok` in a journal, and what was skipped reading it (`JournalIssues`: a torn
    last line, records no run wrote), counted exactly as `oxconsole report` counts them. With
    `trial` > 0 (`run.trials`): that trial's, as the ids of the prompts it sent (what a resumed
    trial skips).

    The set holds 8 bytes an id (`IdSet`), not the id strings: a resume of a million-line journal
    stays small; iterating it reads the ids from the journal again.
    """
    issues = JournalIssues()
    done = IdSet(_ok_lines(path, issues, trial), reread=lambda: _ok_lines(path, trial=trial))
    return done, issues
