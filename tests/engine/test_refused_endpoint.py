"""An endpoint of a workload file that refuses the connections opened before the first request is
bad input: exit 2 before anything is sent, naming the workload file and `endpoints.X.base_url`,
as `--url` does; not six retried attempts and exit 1. With worker processes too."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import free_port, oxconsole, oxconsole_here
from tests.support.workloads import write_workload


def write(tmp_path: Path, workers: int = 1) -> tuple[Path, int]:
    """tests/workloads/minimal.toml as refused.toml: model "a" at the simulator, "b" at a port that
    refuses, 40 synthetic prompts, six attempts 1 s apart."""
    port = free_port()
    sets = {
        "name": "refused",
        "run": {"concurrency": 4, "workers": workers},
        "endpoints": {"good": {"base_url": "sim"}, "gone": {"base_url": f"http://127.0.0.1:{port}/v1"}},
        "models": [{"name": "a", "endpoint": "good"}, {"name": "b", "endpoint": "gone"}],
        "prompts": {"synthetic": {"count": 40, "input_tokens": 5, "output_tokens": 2}},
        "retry": {"max_attempts": 6, "backoff": "1s"},
        "output.results": "results.jsonl",
    }
    return write_workload("minimal", tmp_path, sets, file="refused.toml"), port


def check(p: object, tmp_path: Path, port: int) -> None:
    code, err = p.returncode, p.stderr  # type: ignore[attr-defined]
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    want = f'refused.toml: endpoints.gone.base_url: expected a server that accepts connections, got "http://127.0.0.1:{port}/v1"'
    assert want in err, err[-2000:]
    assert f"connection refused at 127.0.0.1:{port}" in err and "nothing was sent" in err, err[-2000:]
    assert "endpoints.good" not in err, err[-2000:]
    journal = tmp_path / "results.jsonl"
    assert not journal.exists() or not journal.read_bytes().strip(), journal.read_text()[:500]


def test_a_refused_endpoint_is_bad_input_before_anything_is_sent(tmp_path: Path) -> None:
    wl, port = write(tmp_path)
    t0 = time.monotonic()
    p = oxconsole_here(str(wl), "--headless", cwd=tmp_path)
    took = time.monotonic() - t0
    check(p, tmp_path, port)
    assert took < 20, f"{took:.1f} s: retried, not refused at once"


@pytest.mark.subprocess
def test_a_refused_endpoint_is_bad_input_with_worker_processes(tmp_path: Path) -> None:
    wl, port = write(tmp_path, workers=2)
    p = oxconsole(str(wl), "--headless", cwd=tmp_path, timeout=120)
    check(p, tmp_path, port)


@pytest.mark.subprocess
def test_under_the_console_the_refusal_is_said_before_it_opens(tmp_path: Path) -> None:
    """`oxconsole w.toml` in a terminal: the engine process finds the refusal in its set-up, before
    its control socket opens, so the console that started it prints why and exits 2."""
    wl, port = write(tmp_path)
    master, slave = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(wl)],
        cwd=tmp_path,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "TERM": "xterm-256color"},
        start_new_session=True,
    )
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 60  # and 30 s for the exit: within the test's 120 s, saying why
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready and p.poll() is not None:
                break  # exited and nothing left to read (a child it started may hold the terminal)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other end closed: the command has exited
                    break
                if not data:
                    break
                screen += data
        rc = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    text = screen.decode(errors="replace")
    assert rc == 2, (rc, text[-2000:])
    assert f"connection refused at 127.0.0.1:{port}" in text and "endpoints.gone.base_url" in text, text[
        -2000:
    ]
