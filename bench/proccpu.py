"""Where a benchmark's CPU goes, process by process (no pidstat here): /proc sampled in a thread.

`ProcCPU(roots)` samples, every `interval` seconds, the CPU time (user + system) of every process
under the given root pids (their children, theirs, ...), keeping each pid's last figure (processes
that end keep what they had at the last sample, so a short-lived one may be under-counted by up to
one interval). `by_role()` sums them by what the process is (Ray's GCS, raylet, an actor, the
driver, nginx...), from its command line.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

ROLES = (  # (substring of the command line, role), first match wins
    ("EngineActor", "actors"),
    ("ray::IDLE", "idle ray workers"),
    ("ray::DashboardAgent", "ray dashboard agent"),
    ("ray::RuntimeEnvAgent", "ray runtime-env agent"),
    ("ray::", "other ray workers"),
    ("gcs_server", "ray gcs"),
    ("raylet", "ray raylet"),
    ("log_monitor", "ray log monitor"),
    ("monitor.py", "ray autoscaler monitor"),
    ("dashboard.py", "ray dashboard"),
    ("oxconsole.sim", "simulator"),
    ("nginx", "nginx"),
    ("oxconsole.cli.main import main", "driver (process started)"),
    ("multiprocessing", "local workers"),
)


def role(cmdline: str) -> str:
    for needle, name in ROLES:
        if needle in cmdline:
            return name
    return "other: " + cmdline[:60]


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


class ProcCPU:
    def __init__(
        self, roots: list[int], interval: float = 0.2, progress: Callable[[], float] | None = None
    ) -> None:
        self.roots = set(roots)
        self.interval = interval
        self.progress = progress
        """How far the run is (e.g. the journal's size), for `steady()`."""
        self.cpu: dict[int, float] = {}
        self.cmd: dict[int, str] = {}
        self.history: list[tuple[float, float, dict[str, float]]] = []
        """(time, progress, CPU seconds by role) at each sample."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ProcCPU:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        stats: dict[int, tuple[int, float]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (s := _stat(int(entry.name))) is not None:
                stats[int(entry.name)] = s
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        todo = [p for p in self.roots if p in stats]
        seen: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            todo.extend(children.get(pid, []))
            self.cpu[pid] = stats[pid][1]
            try:  # re-read: a Ray worker renames itself once it becomes an actor (empty once it exits)
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                cmd = ""
            if cmd:
                self.cmd[pid] = cmd
        if self.progress is not None:
            self.history.append((time.monotonic(), self.progress(), self.by_role()))

    def by_role(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, cpu in self.cpu.items():
            name = role(self.cmd.get(pid, "?"))
            out[name] = out.get(name, 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def steady(self, lo: float = 0.2, hi: float = 0.8) -> dict[str, float]:
        """Cores each role used while the run went from `lo` to `hi` of its final progress (start-up
        and shutdown left out)."""
        final = max((p for _, p, _ in self.history), default=0.0)
        inside = [h for h in self.history if lo * final <= h[1] <= hi * final]
        if len(inside) < 2:
            return {}
        (t0, _, a), (t1, _, b) = inside[0], inside[-1]
        return {k: (v - a.get(k, 0.0)) / (t1 - t0) for k, v in b.items() if v - a.get(k, 0.0) > 0}
