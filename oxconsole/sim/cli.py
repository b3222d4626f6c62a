"""``oxconsole sim``: run the simulator as a standalone server until SIGINT/SIGTERM.

Why this module exists: users point other tools at the simulator, and the engine runs it in a child
process (`oxconsole.sim.process`). Either way the contract is the same: the base URL is the first
line on stdout (flushed), then the server runs until it is told to stop, and exits 0 without a
traceback. Profiles come from a workload's ``[sim.models.*]`` tables (``--config``) and/or a hidden
``--profiles-json`` (what the engine passes to the child).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import errno
import gc
import signal
import sys
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.aio import run_loop
from oxconsole.base.gcpace import PacedGC
from oxconsole.sim.quality import Truth, truth_for
from oxconsole.sim.routes import SIM_STATE, SimState, is_loopback, start_sim
from oxconsole.workload import SimLimits, SimModelProfile
from oxconsole.workload.simschema import METRICS_FORMATS, REASONING_FIELDS

DEFAULT_PORT = 8765
"""`oxconsole sim`'s port unless told otherwise: fixed, so that a base URL written in a workload
keeps working, and clear of the usual servers' defaults (vLLM 8000, llama.cpp 8080, SGLang 30000,
Ollama 11434). Runs with `base_url = "sim"` start their own simulator on any free port."""
_FIELDS = {f.name: f for f in dataclasses.fields(SimModelProfile)}
_INT_FIELDS = frozenset(
    {"output_tokens", "capacity", "reasoning_tokens", "cache_block", "replicas", "max_replicas", "kv_tokens"}
)
_BOOL_FIELDS = frozenset({"usage", "prefix_cache"})
_CHOICE_FIELDS = {"reasoning_field": REASONING_FIELDS}
_OPTIONAL_FIELDS = frozenset({"quality"})  # None: the profile does not set it


def profiles_to_json(profiles: dict[str, SimModelProfile]) -> str:
    """The ``--profiles-json`` argument for these profiles."""
    return orjson.dumps({name: dataclasses.asdict(p) for name, p in profiles.items()}).decode()


def _json_object(text: str, flag: str, expected: str) -> dict[str, Any]:
    """The JSON object a flag carries; ValueError naming the flag otherwise."""
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"{flag}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{flag}: expected {expected}")
    return data


def profiles_from_json(text: str) -> dict[str, SimModelProfile]:
    """Parse ``--profiles-json``: ``{"model": {"ttft": 0.1, ...}, ...}``; raises ValueError when bad."""
    data = _json_object(text, "--profiles-json", "an object of model name -> profile")
    out: dict[str, SimModelProfile] = {}
    for name, fields in data.items():
        if not isinstance(fields, dict):
            raise ValueError(f"--profiles-json: {name}: expected an object of profile fields")
        kwargs: dict[str, Any] = {}
        for key, value in fields.items():
            if key not in _FIELDS:
                raise ValueError(
                    f"--profiles-json: {name}.{key}: unknown key (expected one of {', '.join(_FIELDS)})"
                )
            if value is None and key in _OPTIONAL_FIELDS:
                continue
            if key in _CHOICE_FIELDS:
                if value not in _CHOICE_FIELDS[key]:
                    raise ValueError(
                        f"--profiles-json: {name}.{key}: expected one of {', '.join(_CHOICE_FIELDS[key])}, "
                        f"got {value!r}"
                    )
                kwargs[key] = value
                continue
            if key in _BOOL_FIELDS:
                if not isinstance(value, bool):
                    raise ValueError(f"--profiles-json: {name}.{key}: expected true or false, got {value!r}")
                kwargs[key] = value
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"--profiles-json: {name}.{key}: expected a number >= 0, got {value!r}")
            if key in _INT_FIELDS:
                if value != int(value):
                    raise ValueError(f"--profiles-json: {name}.{key}: expected an integer, got {value!r}")
                value = int(value)
            else:
                value = float(value)
            kwargs[key] = value
        out[name] = SimModelProfile(**kwargs)
    return out


def limits_to_json(limits: SimLimits) -> str:
    """The ``--limits-json`` argument for these rate limits."""
    return orjson.dumps(dataclasses.asdict(limits)).decode()


def limits_from_json(text: str) -> SimLimits:
    """Parse ``--limits-json``: ``{"rpm_limit": 60, "tpm_limit": 0, "window": 60.0,
    "metrics_format": "vllm"}``; raises ValueError when bad."""
    data = _json_object(text, "--limits-json", "an object of rpm_limit, tpm_limit, window, metrics_format")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "metrics_format":
            if value not in METRICS_FORMATS:
                raise ValueError(f"--limits-json: {key}: expected one of {', '.join(METRICS_FORMATS)}")
            kwargs[key] = value
            continue
        if key not in ("rpm_limit", "tpm_limit", "window"):
            raise ValueError(
                f"--limits-json: {key}: unknown key (expected rpm_limit, tpm_limit, window or metrics_format)"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"--limits-json: {key}: expected a number >= 0, got {value!r}")
        if key != "window" and value != int(value):
            raise ValueError(f"--limits-json: {key}: expected an integer, got {value!r}")
        kwargs[key] = float(value) if key == "window" else int(value)
    if kwargs.get("window", 1.0) <= 0:
        raise ValueError("--limits-json: window: expected a number > 0")
    return SimLimits(**kwargs)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="oxconsole sim",
        description="Run the embedded OpenAI-compatible simulator; prints its base URL on the first line.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help=(
            f"port (default {DEFAULT_PORT}, so that the URL stays the same between runs, or any free port "
            "when another server has it, said on stderr; 0 = any free port)"
        ),
    )
    p.add_argument("--config", type=Path, help="workload TOML (or a file of [sim.models.*] tables)")
    p.add_argument("--seed", type=int, default=0, help="seed for jitter and faults (default 0)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback --host (the simulator has no authentication)",
    )
    p.add_argument("--profiles-json", help=argparse.SUPPRESS)
    p.add_argument("--limits-json", help=argparse.SUPPRESS)
    p.add_argument("--truth-json", type=Path, help=argparse.SUPPRESS)  # sim/quality.py Truth, a file
    return p


def raise_open_files() -> str | None:
    """Raise the open-files soft limit to the hard limit: every connection is a descriptor, and a
    run of 10,000 in flight holds 10,000 of them here. Returns a note when the limit stays low."""
    try:
        import resource
    except ImportError:  # not on this platform
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < _FEW_FILES:
        return (
            f"the open-files limit is {soft} (hard limit {hard}): about {soft - 32} connections at once "
            "at most; raise it (ulimit -n) for more"
        )
    return None


_FEW_FILES = 4096


def _quiet_gc(state: SimState, loop: asyncio.AbstractEventLoop) -> PacedGC:
    """The garbage collector paced from a 100 ms timer (`PacedGC`) once the server is up: automatic
    collections stalled the timed writes by up to 83 ms at 1,000 open streams (a young generation
    of live streams, nothing freed). Pauses are timed and served in ``/sim/stats``."""
    gc.collect()
    pacer = PacedGC()
    state.gc = pacer
    state.lateness.watch_gc()

    def tick() -> None:
        pacer.tick()
        loop.call_later(0.1, tick)

    loop.call_later(0.1, tick)
    return pacer


async def _serve(
    args: argparse.Namespace, profiles: dict[str, SimModelProfile], limits: SimLimits, truth: Truth | None
) -> int:
    note = raise_open_files()
    if note:
        print(f"oxconsole sim: warning: {note}", file=sys.stderr)
    port = DEFAULT_PORT if args.port is None else args.port
    try:
        try:
            runner, url = await start_sim(
                args.host,
                port,
                profiles,
                seed=args.seed,
                allow_remote=args.allow_remote,
                limits=limits,
                truth=truth,
            )
        except OSError as e:
            if args.port is not None or e.errno != errno.EADDRINUSE:
                raise
            # The default port is taken (a second simulator, another server): any free port rather
            # than failing, since the URL is printed on the first line anyway.
            print(f"oxconsole sim: port {port} is in use; listening on a free port", file=sys.stderr)
            port = args.port = 0
            runner, url = await start_sim(
                args.host,
                0,
                profiles,
                seed=args.seed,
                allow_remote=args.allow_remote,
                limits=limits,
                truth=truth,
            )
    except (ValueError, OSError) as e:
        hint = ""
        if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
            hint = (
                f" (another server listens on port {args.port}: pass --port N, or --port 0 for any free port)"
            )
        print(f"oxconsole sim: {e}{hint}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    _quiet_gc(runner.app[SIM_STATE], loop)
    try:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(url, flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
    return 0


def _truth(args: argparse.Namespace) -> Truth | None:
    """What the simulator knows to answer right: the engine's file, or a workload's `[quality]` and
    prompts (`--config`, when it is a whole workload)."""
    if args.truth_json is not None:
        return Truth.from_json(args.truth_json.read_bytes())
    if args.config is None:
        return None
    from oxconsole.workload import WorkloadError, load_workload
    from oxconsole.workload.prompts.feed import one_pass

    try:
        w = load_workload(args.config)
        return truth_for(w, one_pass(w))
    except WorkloadError:
        return None  # a file of [sim.models] tables only: nothing to be right about


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    profiles: dict[str, SimModelProfile] = {}
    limits = SimLimits()
    if args.config is not None:
        from oxconsole.workload import WorkloadError, load_sim_limits, load_sim_section

        try:
            profiles.update(load_sim_section(args.config))
            limits = load_sim_limits(args.config)
        except WorkloadError as e:
            print("\n".join(f"oxconsole sim: {line}" for line in e.errors), file=sys.stderr)
            return 2
        except OSError as e:
            print(f"oxconsole sim: {args.config}: {e.strerror or e}", file=sys.stderr)
            return 2
    if args.profiles_json is not None or args.limits_json is not None:
        try:
            if args.profiles_json is not None:
                profiles.update(profiles_from_json(args.profiles_json))
            if args.limits_json is not None:
                limits = limits_from_json(args.limits_json)
        except ValueError as e:
            print(f"oxconsole sim: {e}", file=sys.stderr)
            return 2
    try:
        truth = _truth(args)
    except (OSError, ValueError) as e:
        print(f"oxconsole sim: {e}", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        if not args.allow_remote:
            print(
                f"oxconsole sim: refusing to listen on {args.host!r}: the simulator has no authentication; "
                "pass --allow-remote to do it anyway",
                file=sys.stderr,
            )
            return 2
        print(
            f"oxconsole sim: warning: listening on {args.host!r}; anyone who can reach it can use it",
            file=sys.stderr,
        )
    try:
        return run_loop(_serve(args, profiles, limits, truth))
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return 0
