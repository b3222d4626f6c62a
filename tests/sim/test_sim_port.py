"""`oxconsole sim` listens on its fixed default port, or on a free one when that is taken."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys

import pytest

from oxconsole.sim.cli import DEFAULT_PORT


@pytest.mark.xdist_group("sim-default-port")  # never beside the other test that takes the port
def test_a_taken_default_port_falls_back_to_a_free_one_and_says_so() -> None:
    holder = socket.socket()
    # as the simulator binds (aiohttp sets SO_REUSEADDR): a connection of an earlier test still in
    # TIME_WAIT on the port does not hold it, only a listener does
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", DEFAULT_PORT))
        holder.listen()
    except OSError as e:  # something else holds it already: the same situation
        assert e.errno == errno.EADDRINUSE
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "sim"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), url
        assert f":{DEFAULT_PORT}/" not in url
        assert f"port {DEFAULT_PORT} is in use" in proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(10)
        holder.close()


def test_a_taken_port_asked_for_is_bad_input() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        r = subprocess.run(
            [sys.executable, "-m", "oxconsole", "sim", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        holder.close()
    assert r.returncode == 2 and "--port 0" in r.stderr and "Traceback" not in r.stderr
