"""The control socket under abuse, against a real engine process: an over-long line is answered
before the connection closes, a burst of connects is queued rather than refused, and a runtime
folder that belongs to another user is passed over with a message instead of a crash."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oxconsole.control.protocol import SERVER_MAX_LINE
from tests.support.workloads import write_workload


@pytest.fixture
def base() -> Iterator[Path]:
    """A short private folder (a socket path has ~100 bytes) for runtime, state and results."""
    d = Path(tempfile.mkdtemp(prefix="oxh", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def env_for(base: Path, **extra: str) -> dict[str, str]:
    rt = base / "rt"
    rt.mkdir(mode=0o700, exist_ok=True)
    return {**os.environ, "XDG_RUNTIME_DIR": str(rt), "XDG_STATE_HOME": str(base / "state"), **extra}


def workload(base: Path, name: str, requests: int = 200) -> Path:
    sets = {
        "name": name,
        "run.requests": requests,
        "run.grace": "1s",
        "prompts.synthetic.count": requests,
        "output.results": str(base / name / "r.jsonl"),
    }
    return write_workload("sim_exact", base, sets, file=f"{name}.toml")


def ps(env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole", "ps", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    runs = json.loads(r.stdout)
    assert isinstance(runs, list)
    return runs, r.stderr


class Host:
    """`python -m oxconsole.cli.detached` on a workload of ~10 s; its registry entry once it listens."""

    def __init__(self, base: Path, env: dict[str, str], name: str = "hard") -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "oxconsole.cli.detached", "--workload", str(workload(base, name))],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        runs: list[dict[str, Any]] = []
        while not runs and time.monotonic() < deadline:
            runs, _ = ps(env)
        assert runs, "the engine process did not register"
        self.entry = runs[0]
        self.socket = str(self.entry["socket"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def host(base: Path) -> Iterator[Host]:
    h = Host(base, env_for(base))
    try:
        yield h
    finally:
        h.stop()


def read_lines(s: socket.socket) -> list[dict[str, Any]]:
    """Every line until the server closes the connection."""
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def hello(sock_path: str) -> dict[str, Any]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    s.sendall(b'{"op": "hello", "hz": 1}\n')
    reply = json.loads(s.makefile("rb").readline())
    s.close()
    assert isinstance(reply, dict)
    return reply


# --- an over-long line --------------------------------------------------------------------------
@pytest.mark.slow
def test_a_10_mb_line_gets_an_error_reply_before_the_connection_closes(host: Host) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(host.socket)
    sent: list[BaseException] = []

    def send() -> None:
        try:
            s.sendall(b"x" * (10 * 1024 * 1024) + b"\n")
        except OSError as e:  # a reset or a broken pipe: the line was not read, only dropped
            sent.append(e)

    t = threading.Thread(target=send)
    t.start()
    replies = read_lines(s)  # no ConnectionResetError: the server read the line to its end
    t.join(30)
    s.close()
    assert sent == []
    assert [r["op"] for r in replies] == ["error"]
    assert "line too long" in replies[0]["message"] and str(SERVER_MAX_LINE) in replies[0]["message"]
    assert hello(host.socket)["op"] == "hello"  # the run goes on serving
    assert host.proc.poll() is None


# --- a burst of connects ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_burst_of_200_connects_is_queued_and_each_gets_its_hello(host: Host) -> None:
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    if somaxconn < 256:
        pytest.skip(f"net.core.somaxconn is {somaxconn}: the kernel caps every backlog below 200")
    socks: list[socket.socket] = []
    refused = 0
    os.kill(host.proc.pid, signal.SIGSTOP)  # the engine accepts nothing: every connect waits in the backlog
    try:
        for _ in range(200):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(host.socket)
            except BlockingIOError:  # EAGAIN: the backlog is full
                refused += 1
                s.close()
                continue
            socks.append(s)
    finally:
        os.kill(host.proc.pid, signal.SIGCONT)
    try:
        assert refused == 0
        for s in socks:
            s.setblocking(True)
            s.settimeout(20)
            s.sendall(b'{"op": "hello", "hz": 1}\n')
        answered = 0
        for s in socks:
            line = s.makefile("rb").readline()
            answered += json.loads(line)["op"] == "hello"
        assert answered == 200
    finally:
        for s in socks:
            s.close()


# --- the engine log -----------------------------------------------------------------------------
@pytest.mark.slow
def test_engine_log_is_owner_only(host: Host, base: Path) -> None:
    log = base / "hard" / "r.engine.log"
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)


# --- a runtime folder of another user -----------------------------------------------------------
@pytest.mark.parametrize(
    "tmp_runtime_too", [False, True], ids=["xdg-foreign", "xdg-and-tmp-fallback-foreign"]
)
@pytest.mark.slow
def test_runtime_folder_of_another_user_is_passed_over_with_a_message(
    base: Path, tmp_runtime_too: bool
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    rt, tmp = base / "rt", base / "tmp"
    rt.mkdir(mode=0o700)
    os.chown(rt, 65534, 65534)
    tmp.mkdir()
    if tmp_runtime_too:  # platformdirs' own fallback, runtime-<uid> in TMPDIR, is another user's too
        (tmp / f"runtime-{os.getuid()}").mkdir(mode=0o700)
        os.chown(tmp / f"runtime-{os.getuid()}", 65534, 65534)
    env = {
        **os.environ,
        "XDG_RUNTIME_DIR": str(rt),
        "XDG_STATE_HOME": str(base / "state"),
        "TMPDIR": str(tmp),
    }
    runs, err = ps(env)
    assert runs == []
    assert f"XDG_RUNTIME_DIR is not used: {rt} is owned by uid 65534" in err and "looking in" in err
    h = Host(base, env, name="elsewhere")
    try:
        runs, err = ps(env)
        assert [r["pid"] for r in runs] == [h.proc.pid]
        assert not Path(h.socket).is_relative_to(rt)
        assert hello(h.socket)["name"] == "elsewhere"
        r = subprocess.run(
            [sys.executable, "-m", "oxconsole", "attach", "nothing-by-that-name"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr and str(rt) in r.stderr
        assert "elsewhere" in r.stderr  # the runs going are listed: it looked in the right folder
    finally:
        h.stop()
    assert os.listdir(rt) == []  # nothing was put in the other user's folder
    log = (base / "elsewhere" / "r.engine.log").read_text()
    assert f"XDG_RUNTIME_DIR is not used: {rt}" in log and "the run's control socket is in" in log
