"""Measure what the live console costs: CPU seconds of the console process over a live run.

Runs ``oxconsole WORKLOAD`` (the real CLI: engine in its own process, console attached to it) in a
pseudo-terminal of the given size, lets it render for ``--seconds``, reads the console process's
CPU time from /proc, then presses ``q`` and waits for the summary. Linux only.

    python bench/console_cpu.py examples/demo.toml --seconds 30 --refresh 4 --size 160x48 \
        --set prompts.repeat=200
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def threads(pid: int) -> dict[str, float]:
    """CPU seconds per thread name (several threads may share a name)."""
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            name = head.split("(", 1)[1]
            fields = rest.split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return out


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--refresh", type=float, default=4.0)
    ap.add_argument("--size", default="160x48")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ns = ap.parse_args()
    cols, rows = (int(x) for x in ns.size.split("x"))
    argv = [sys.executable, "-m", "oxconsole", ns.workload, "--refresh", str(ns.refresh)]
    for o in ns.overrides:
        argv += ["--set", o]
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    received = 0

    def pump(seconds: float) -> None:
        nonlocal received
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                try:
                    received += len(os.read(fd, 65536))
                except OSError:
                    return

    pump(5.0)  # start-up: imports, simulator, first frames
    cpu0, rx0, t0 = cpu_seconds(pid), received, time.monotonic()
    th0 = threads(pid)
    kids0 = {k: cpu_seconds(k) for k in children(pid)}
    pump(ns.seconds)
    cpu1, rx1, t1 = cpu_seconds(pid), received, time.monotonic()
    th1 = threads(pid)
    kids1 = {k: cpu_seconds(k) for k in children(pid)}
    wall = t1 - t0
    used = cpu1 - cpu0
    print(f"console process: {used:.2f} s CPU over {wall:.1f} s = {100 * used / wall:.1f}% of a core")
    for name, c in sorted(th1.items(), key=lambda kv: -kv[1]):
        used = c - th0.get(name, 0.0)
        if used > 0.005 * wall:
            print(f"  thread {name}: {100 * used / wall:.1f}%")
    print(f"terminal output: {(rx1 - rx0) / wall / 1024:.1f} KiB/s at {ns.refresh:g} Hz, {ns.size}")
    for k in kids1:
        if k in kids0:
            print(f"child {k} (engine host / simulator): {100 * (kids1[k] - kids0[k]) / wall:.1f}% of a core")
    os.write(fd, b"q")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pump(0.2)
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, 9)
        print("console did not exit after q", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
