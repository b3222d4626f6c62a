"""Run the simulator in a child process and learn its URL.

Why this module exists: a simulator on the engine's own event loop would compete with the client it
is measuring (and in-process timing would flatter both). `SimProcess` starts
``python -m oxconsole.sim --port 0 --profiles-json ...``, optionally pinned to some CPUs, reads the
base URL from the child's first stdout line, and makes sure the child does not outlive us: `stop()`
terminates it (then kills it after 3 s), and on Linux the child asks the kernel for SIGTERM when its
parent dies (PR_SET_PDEATHSIG). That signal follows the *thread* that started the child, so start it
from a thread that lives as long as the simulator is needed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO

from oxconsole.sim.cli import limits_to_json, profiles_to_json
from oxconsole.sim.quality import Truth
from oxconsole.workload import SimLimits, SimModelProfile

__all__ = ["SimProcess", "SimProcessError"]

_PR_SET_PDEATHSIG = 1
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding `oxconsole/`


class SimProcessError(RuntimeError):
    """The simulator child could not be started (its stderr is in the message)."""


def _libc_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _make_preexec(cpus: set[int] | None) -> Callable[[], None] | None:
    """The child-side set-up: die with the parent, optional CPU pinning. Resolved before fork."""
    prctl = _libc_prctl()
    if prctl is None and not cpus:
        return None
    parent = os.getpid()
    setaffinity = getattr(os, "sched_setaffinity", None)

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
        if cpus and setaffinity is not None:
            setaffinity(0, cpus)

    return preexec


class SimProcess:
    """The simulator in a child process. ``with SimProcess(profiles) as sim: sim.url`` or start()/stop()."""

    def __init__(
        self,
        profiles: dict[str, SimModelProfile] | None = None,
        *,
        seed: int = 0,
        host: str = "127.0.0.1",
        cpus: set[int] | None = None,
        startup_timeout: float = 15.0,
        python: str = sys.executable,
        limits: SimLimits | None = None,
        truth: Truth | None = None,
    ) -> None:
        self.profiles = dict(profiles or {})
        self.truth = truth
        """What the simulator must know to answer right (`sim/quality.py`); None = nothing."""
        self.limits = limits or SimLimits()
        self.seed = seed
        self.host = host
        self.cpus = set(cpus) if cpus else None
        self.startup_timeout = startup_timeout
        self.python = python
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:PORT/v1``); only after start()."""
        if self._url is None:
            raise SimProcessError("the simulator is not running")
        return self._url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> str:
        """Start the child and wait for its URL (at most `startup_timeout` seconds); returns the URL."""
        if self._proc is not None:
            raise SimProcessError("the simulator is already started")
        cmd = [
            self.python,
            "-m",
            "oxconsole.sim",
            "--host",
            self.host,
            "--port",
            "0",
            "--seed",
            str(self.seed),
            "--profiles-json",
            profiles_to_json(self.profiles),
        ]
        if self.limits != SimLimits():
            cmd += ["--limits-json", limits_to_json(self.limits)]
        truth_file = None
        if self.truth is not None:  # read by the child before it prints its URL, then removed
            with tempfile.NamedTemporaryFile("wb", suffix=".truth.json", delete=False) as f:
                f.write(self.truth.to_json())
            truth_file = f.name
            cmd += ["--truth-json", truth_file]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        # stderr goes to a file, not a pipe: nobody reads it during a long run, and a full pipe
        # would block the child.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as the child runs
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            # Its own session: a Ctrl-C at the terminal goes to the engine, which may still need the
            # simulator while requests in flight finish; the engine stops it with stop().
            start_new_session=True,
            preexec_fn=_make_preexec(self.cpus),  # fork-safe: only prctl and affinity calls
        )
        try:
            self._url = self._read_url()
        except BaseException:
            self.stop()
            raise
        finally:
            if truth_file is not None:
                with contextlib.suppress(OSError):
                    os.unlink(truth_file)
        return self._url

    def _read_url(self) -> str:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + self.startup_timeout
        buf = b""
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SimProcessError(
                        f"the simulator did not print its URL within {self.startup_timeout:g} s"
                        + self._stderr_tail()
                    )
                if not sel.select(left):
                    continue
                data = os.read(fd, 4096)
                if not data:
                    code = proc.wait(timeout=5)
                    raise SimProcessError(
                        f"the simulator exited (code {code}) before printing its URL" + self._stderr_tail()
                    )
                buf += data
        line = buf.split(b"\n", 1)[0].decode(errors="replace").strip()
        if not line.startswith("http"):
            raise SimProcessError(f"the simulator printed {line!r} instead of its URL" + self._stderr_tail())
        return line

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            text = self._stderr.read()[-4000:].decode(errors="replace").strip()
            if text:
                return f"; its stderr:\n{text}"
        return ""

    def stop(self, timeout: float = 3.0) -> None:
        """Terminate the child (SIGTERM), kill it if it is still there after `timeout` s, and reap it."""
        proc, self._proc = self._proc, None
        self._url = None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> SimProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
