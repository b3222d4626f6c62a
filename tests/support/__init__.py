"""What the test files share: a run's journal read back, an engine run to its end, waiting for a
condition without sleeping a fixed time, and the command line as a child process or in this one.

One copy each, so a test that waits does so the same way everywhere: by polling its condition up
to a generous deadline (a loaded machine is slow, never wrong), never by sleeping a guessed time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from oxconsole.engine.runner import Engine, RunOutcome
from oxconsole.engine.workers.shardset import LocalShards
from oxconsole.sim import start_sim
from oxconsole.workload import Workload, check_prompts

REPO = Path(__file__).resolve().parents[2]
"""The repository's root folder."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (an ephemeral one: above 32767, outside
    the 10002-19999 Ray keeps for its workers)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, blank lines skipped (a torn line fails the test)."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def journal(w: Workload) -> list[dict[str, Any]]:
    """The records a run of `w` journaled, in file order."""
    return read_jsonl(w.results_path())


def engine_for(w: Workload, **kw: Any) -> Engine:
    """An engine for `w` writing its journal, with the expected total as the command line gives it."""
    kw.setdefault("total_expected", check_prompts(w).total_requests)
    return Engine(w, results_path=w.results_path(), **kw)


async def run(w: Workload, engine: Engine | None = None, *, sim: str = "in-process") -> RunOutcome:
    """Run `w` (or the engine given for it) to its end.

    Endpoints at `base_url = "sim"` are served by the simulator on this loop (`start_sim`, with the
    workload's profiles and seed): the same simulator over the same loopback HTTP, without the
    half second the engine's own simulator process takes to start. `sim="process"` leaves that to
    the engine, as a real run does (the command-line, console and timing tests go that way).
    """
    e = engine or engine_for(w)
    runners = []
    if sim == "in-process":
        assert isinstance(e.shards, LocalShards), e.shards  # a run in this process
        urls = e.shards.endpoint_urls
        for ep in w.endpoints.values():
            if ep.base_url == "sim" and ep.name not in urls:
                runner, url = await start_sim(profiles=w.sim, seed=w.run.seed, limits=w.sim_limits)
                runners.append(runner)
                urls[ep.name] = url
    try:
        return await e.run()
    finally:
        for r in runners:
            await r.cleanup()


async def until(
    cond: Callable[[], object], timeout: float = 10.0, what: str = "a condition", interval: float = 0.01
) -> None:
    """Poll `cond` on the running loop until it is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def wait_until(
    cond: Callable[[], object], timeout: float = 15.0, what: str = "a condition", interval: float = 0.02
) -> None:
    """`until` for code outside an event loop (a test driving child processes)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def wait_records(path: Path, n: int, p: subprocess.Popen[str], timeout: float = 90.0) -> None:
    """Until the journal `path` has `n` lines, written by the child `p`; a child that ends first,
    or `timeout` s, fails the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"fewer than {n} records in {path} (exit {p.poll()})")


def oxconsole(
    *args: str, cwd: Path, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m oxconsole ARGS` to its end, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "oxconsole", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def oxconsole_here(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`oxconsole ARGS` run by `cli.main` in this process, its stdout and stderr captured as text:
    what `oxconsole()` returns, without a Python process of its own (whose imports cost about a
    second of CPU). Stdout is not a terminal, so a run is headless, as under `oxconsole()`.

    Only for what needs no process of its own: not for signals, resource limits, kills, a real
    terminal, or output written to /dev/stdout or /dev/stderr (file descriptors this does not
    capture). Call it from a test that is not itself running an event loop."""
    import contextlib
    import io

    from oxconsole.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as e:  # argparse: --help, a bad flag
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["oxconsole", *args], code, out.getvalue(), err.getvalue())


def q_in_a_terminal(
    args: list[str], *, cwd: Path, journal: Path, size: tuple[int, int] = (24, 80), timeout: float = 90
) -> tuple[int, str]:
    """`python -m oxconsole ARGS` in a real terminal (a pty of `size` rows x columns), `q` pressed
    half a second after the console is up and `journal` has a record; its exit code and what the
    terminal showed after the console closed."""
    import fcntl
    import math
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", *args],
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    screen = b""
    pressed: float | None = None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other end closed: the console has exited
                    break
                if not data:
                    break
                screen += data
            if pressed is None and b"\x1b[?1049h" in screen and journal.exists() and journal.stat().st_size:
                pressed = time.monotonic() + 0.5  # the console is up and the run going: q soon
            if pressed is not None and pressed <= time.monotonic():
                os.write(master, b"q")
                pressed = math.inf
        rc = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    return rc, screen[screen.rfind(b"\x1b[?1049l") :].decode(errors="replace")  # after the console
