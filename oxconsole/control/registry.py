"""The run registry: which runs are going for this user, and where their control sockets are.

Why this module exists: `oxconsole ps` and `attach` find runs they did not start. Each run keeps
a socket and a small JSON entry in one owner-only folder (the runtime folder, or the state folder
when the runtime folder is another user's or unusable); a run that died without cleaning up is
recognised (its pid is gone, or silent and not answering) and its files are removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import stat
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import platformdirs

__all__ = [
    "REGISTRY_INTERVAL",
    "RunEntry",
    "RunInfo",
    "answers",
    "list_runs",
    "pid_alive",
    "run_dirs",
    "run_stem",
    "runs_dir",
    "unlink",
]

APP = "oxconsole"
REGISTRY_INTERVAL = 2.0
"""Seconds between rewrites of a run's entry (its progress for `ps`)."""


def _not_ours(p: Path) -> str | None:
    """Why an existing folder on the way to a runs folder cannot hold this user's sockets (not a
    folder, or another user's); None when it is ours or does not exist yet."""
    try:
        st = p.stat()
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"{p}: {e.strerror or e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{p} is not a folder"
    if st.st_uid != os.getuid():
        return f"{p} is owned by uid {st.st_uid}, not you (uid {os.getuid()})"
    return None


def run_dirs() -> tuple[list[Path], list[str]]:
    """The folders a run's socket may go in, best first: the user's runtime folder, then the state
    folder; and why any other was passed over (another user's folder, or no runtime folder at
    all), for `ps` and `attach` to say. Nothing is created here."""
    notes: list[str] = []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and (why := _not_ours(Path(xdg))):
        notes.append(f"XDG_RUNTIME_DIR is not used: {why}")
    runtime: Path | None = None
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        try:
            runtime = Path(platformdirs.user_runtime_dir(APP)) / "runs"
        except OSError as e:  # its fallback in the temporary folder is another user's
            notes.append(f"no runtime folder: {e}")
    state = Path(platformdirs.user_state_dir(APP)) / "runs"
    dirs: list[Path] = []
    for d in (runtime, state):
        if d is None or d in dirs:
            continue
        why = next(filter(None, map(_not_ours, (d.parent.parent, d.parent, d))), None)
        if why is None:
            dirs.append(d)
        elif not (xdg and d.is_relative_to(xdg)):  # said already
            notes.append(f"{d} is not used: {why}")
    return dirs, notes


def _usable(d: Path) -> bool:
    """Create `d` owner-only, or accept it if it is ours, a real folder, and private."""
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o077:
            os.chmod(d, 0o700)
        return os.access(d, os.W_OK | os.X_OK)
    except OSError:
        return False


def runs_dir() -> Path:
    """The folder for run sockets and registry entries (created 0700): the first of `run_dirs()`
    that can be used, normally `platformdirs.user_runtime_dir("oxconsole")/runs`."""
    dirs, notes = run_dirs()
    for d in dirs:
        if _usable(d):
            return d
    tried = ", ".join(map(str, dirs)) or "none"
    raise OSError(
        f"no usable folder for run sockets (tried {tried}; {'; '.join(notes) or 'no reason known'})"
    )


def run_stem(name: str, pid: int) -> str:
    """The file name (without suffix) of a run's socket and entry: `NAME-PID`, made safe."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"
    return f"{safe[:40]}-{pid}"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not a run
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


@dataclass(frozen=True)
class RunInfo:
    """What a run tells about itself: sent on hello and kept in its registry entry."""

    name: str
    workload_path: str | None
    overrides: tuple[str, ...]
    results_path: str | None
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class RunEntry:
    """One registry entry, as `ps` lists it."""

    name: str
    pid: int
    socket: str
    workload_path: str | None = None
    overrides: tuple[str, ...] = ()
    results_path: str | None = None
    started_at: float = 0.0
    state: str = "starting"
    done: int = 0
    total: int | None = None
    req_per_s: float = 0.0
    errors: int = 0
    updated_at: float = 0.0

    @property
    def key(self) -> str:
        """`NAME-PID`, unique among live runs."""
        return f"{self.name}-{self.pid}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["overrides"] = list(self.overrides)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunEntry:
        total = d.get("total")
        return cls(
            name=str(d["name"]),
            pid=int(d["pid"]),
            socket=str(d["socket"]),
            workload_path=d.get("workload_path"),
            overrides=tuple(str(o) for o in d.get("overrides") or ()),
            results_path=d.get("results_path"),
            started_at=float(d.get("started_at") or 0.0),
            state=str(d.get("state") or "starting"),
            done=int(d.get("done") or 0),
            total=None if total is None else int(total),
            req_per_s=float(d.get("req_per_s") or 0.0),
            errors=int(d.get("errors") or 0),
            updated_at=float(d.get("updated_at") or 0.0),
        )


def unlink(*paths: Path) -> None:
    """Remove files that may already be gone."""
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def answers(sock_path: str) -> bool:
    """Something accepts connections on the socket (or it cannot tell: then True)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.5)
    try:
        s.connect(sock_path)
    except OSError as e:
        return e.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        s.close()
    return True


def _pid_of(p: Path) -> int | None:
    m = re.search(r"-(\d+)$", p.stem)
    return int(m.group(1)) if m else None


def _read_entry(p: Path, *, clean: bool, now: float) -> RunEntry | None:
    """The entry in `p` if its run is alive; with `clean`, a dead run's files are removed."""
    try:
        entry = RunEntry.from_dict(orjson.loads(p.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError):
        pid = _pid_of(p)
        if clean and pid is not None and not pid_alive(pid):
            unlink(p, p.with_suffix(".sock"))
        return None
    alive = pid_alive(entry.pid)
    if alive and now - entry.updated_at > 30 * REGISTRY_INTERVAL:
        alive = answers(entry.socket)  # silent for a minute: the pid may be another process
    if not alive:
        if clean:  # the socket beside the entry only: the path the entry names may be anything
            unlink(p, p.with_suffix(".sock"))
        return None
    return entry if Path(entry.socket).exists() else None


def list_runs(*, clean: bool = True) -> list[RunEntry]:
    """The runs going for this user, oldest first. With `clean`, stale entries are removed."""
    out: list[RunEntry] = []
    now = time.time()
    for d in run_dirs()[0]:
        try:
            if not d.is_dir():
                continue
            for p in d.glob("*.json"):
                entry = _read_entry(p, clean=clean, now=now)
                if entry is not None:
                    out.append(entry)
            if clean:
                for s in d.glob("*.sock"):
                    pid = _pid_of(s)
                    if pid is not None and not s.with_suffix(".json").exists() and not pid_alive(pid):
                        unlink(s)
        except OSError:  # a folder this user cannot read holds none of this user's runs
            continue
    out.sort(key=lambda e: (e.started_at, e.pid))
    return out
