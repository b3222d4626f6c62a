"""The embedded OpenAI-compatible simulator (aiohttp): latency, capacity and fault profiles per model.

Why this package exists: runs with ``base_url = "sim"``, the engine's tests and client benchmarks need
an endpoint whose timing and failures are known exactly. `app` holds the aiohttp app and its
handlers, `streams` the timed writing, `faults` the fault draws, `state` the per-model state and
`wire` the pre-encoded wire format; `cli` is the ``oxconsole sim`` command, `process` a helper that
runs it in a child process (so the simulator does not share a core, or an event loop, with the
client it is measuring).
"""

from __future__ import annotations

from oxconsole.sim.process import SimProcess, SimProcessError
from oxconsole.sim.routes import SIM_STATE, SimState, build_app, is_loopback, start_sim
from oxconsole.sim.state import ModelStats

__all__ = [
    "SIM_STATE",
    "ModelStats",
    "SimProcess",
    "SimProcessError",
    "SimState",
    "build_app",
    "is_loopback",
    "start_sim",
]
