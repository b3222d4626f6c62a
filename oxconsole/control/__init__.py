"""The control socket between a running engine and its consoles, and the registry of runs.

Why this package exists: the engine runs in a process of its own, and consoles come and go; this
is how they find each other (`registry`), what they say (`protocol`), the engine's end
(`server`), the console's end (`client`), and the interface the console reads any run through
(`source`). Nothing here imports Textual or the console.
"""

from oxconsole.control.registry import RunEntry, RunInfo, list_runs, pid_alive, run_dirs, runs_dir
from oxconsole.control.server import ControlServer, serve_run
from oxconsole.control.socketsource import SocketSource
from oxconsole.control.source import LocalSource, RunSource

__all__ = [
    "ControlServer",
    "LocalSource",
    "RunEntry",
    "RunInfo",
    "RunSource",
    "SocketSource",
    "list_runs",
    "pid_alive",
    "run_dirs",
    "runs_dir",
    "serve_run",
]
