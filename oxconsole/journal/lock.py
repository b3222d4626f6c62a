"""One writer per journal: a lock file beside it, held with `flock` for as long as the run lives.

Why this module exists: two `--resume` of one journal at once would both send the requests it is
missing (and bill them twice), and a second fresh run of one workload would move the first's
live journal aside and write into its manifest. The lock is taken before the journal is read,
moved or opened; a second run finds it held and stops with bad input (exit 2) naming the journal
and the pid of the run that holds it.

`flock` locks belong to an open file, so the kernel drops them when the holder dies (`kill -9`
leaves no stale lock). The lock file is removed when its holder lets go; a taker checks that the
file it locked is still the one at the path (else it locked a file just removed, and tries
again). A console hands its lock to the engine process it starts (`handover`): the descriptor is
inherited and named in `LOCK_FD_ENV`, and the engine adopts it instead of waiting on itself.
"""

from __future__ import annotations

import atexit
import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_FD_ENV", "JournalBusy", "JournalLock", "lock_path"]

LOCK_FD_ENV = "OXCONSOLE_JOURNAL_LOCK_FD"
"""The descriptor of a journal lock a child process inherits from the process that took it."""

_TRIES = 5

_HELD: dict[Path, JournalLock] = {}
"""Locks this process holds, by lock file: a second run of one journal in one process (a test
running the command line twice, in this process) takes over the first's lock, which has ended."""


class JournalBusy(Exception):
    """Another live process holds the journal's lock: the message names the journal and its pid."""


def lock_path(journal: Path) -> Path:
    return journal.with_name(journal.name + ".lock")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _holder(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


class JournalLock:
    """The lock of one journal, held by this process until `release` (or its exit)."""

    def __init__(self, journal: Path, fd: int) -> None:
        self.journal = journal
        self.path = lock_path(journal)
        self._fd = fd
        self._remove = True
        _HELD[self.path.absolute()] = self
        atexit.register(self.release)

    @classmethod
    def acquire(cls, journal: Path) -> JournalLock:
        """Take the journal's lock (or adopt the one inherited from the process that started this
        one); JournalBusy when another process holds it."""
        path = lock_path(journal)
        held = _HELD.get(path.absolute())
        if held is not None:
            if held._fd >= 0 and _same_file(held._fd, path):
                return held
            held.release()
        inherited = _inherited(path)
        if inherited is not None:
            lock = cls(journal, inherited)
            lock._write_pid()
            return lock
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(_TRIES):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise JournalBusy(
                    f"{journal}: another run is writing this journal (pid {_holder(path)}, lock "
                    f"{path}); wait for it to end, or give this run another --output"
                ) from None
            if _same_file(fd, path):
                lock = cls(journal, fd)
                lock._write_pid()
                return lock
            os.close(fd)  # locked a lock file its holder removed meanwhile: take the new one
        raise JournalBusy(f"{journal}: its lock {path} keeps changing: another run is starting")

    def _write_pid(self) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def handover(self) -> tuple[int, dict[str, str]]:
        """The descriptor to pass to a child process (`pass_fds`) and the environment naming it;
        from now on the child removes the lock file, this process only closes its copy."""
        self._remove = False
        os.set_inheritable(self._fd, True)
        return self._fd, {LOCK_FD_ENV: str(self._fd)}

    def release(self) -> None:
        if self._fd < 0:
            return
        if self._remove and _same_file(self._fd, self.path):
            try:
                self.path.unlink()
            except OSError:
                pass
        os.close(self._fd)
        self._fd = -1
        if _HELD.get(self.path.absolute()) is self:
            del _HELD[self.path.absolute()]
        atexit.unregister(self.release)


def _inherited(path: Path) -> int | None:
    """The lock descriptor this process inherited for `path`, locked again by us (a no-op on the
    same open file), or None."""
    value = os.environ.get(LOCK_FD_ENV, "")
    if not value.isdigit():
        return None
    fd = int(value)
    try:
        if not _same_file(fd, path):
            return None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return None
    del os.environ[LOCK_FD_ENV]  # not for this process's own children
    os.set_inheritable(fd, False)
    return fd
