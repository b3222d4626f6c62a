"""Adaptive concurrency benchmark: how fast and how close `run.concurrency = "auto"` finds the knee.

Two parts:

* `--plant` (default on, milliseconds): the controller against a synthetic closed loop on virtual
  time (tests/support/clock.py), the simulator's load curve ``L0 * (1 + (b / C) ** 2)`` and an SLO
  met up to C and missed above it; beside it, for comparison, AIMD (Netflix concurrency-limits'
  AIMDLimit shape: +1 per good request while at least half the limit is used, x0.9 per bad one),
  a Vegas-style limiter (queue = limit * (1 - minRTT / RTT), held between 3 and 6 log10(limit))
  and a Gradient2-style one (limit * clamp(longRTT / RTT, 0.5, 1) + sqrt(limit), smoothed 0.2),
  all written here from their published descriptions. The last two never see the SLO: they hold
  latency near its minimum, wherever that puts them against C.
* `--sim` (real HTTP, `--seconds` each): oxconsole `--headless` against its own simulator with
  ``knee = C`` and ``jitter = 0`` and an `[slo] itl` between the gaps at C and C + 1; the limit over
  time is read from the summary's `changes` (by = "auto").

Each reports the settling time (from the start until the limit stays within ±15% of C), the mean
and spread (time-weighted standard deviation) of the limit after settling relative to C, and the
changes per minute after settling.

    python bench/bench_auto.py [--c 16,64,256] [--sim-c 32] [--seconds 60] [--no-plant] [--no-sim]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from oxconsole.engine.drivers.autosearch import AutoConcurrency  # noqa: E402
from oxconsole.sim.curve import slowdown  # noqa: E402
from tests.support.clock import run_virtual  # noqa: E402

L0 = 0.67
"""Seconds: the unloaded latency of the --sim profile (50 ms ttft, 32 tokens at 50/s)."""
BAND = 0.15
SIM_POWER = 4.0
"""The --sim profile's knee_power: with 4 the gap at C + 1 is 6.5% above the one at C, so the SLO
halfway between is 1.3 ms from either at C = 32 (with 2, 0.3 ms: less than a loaded 2-core
machine's client adds to a mean gap, and rounds at C failed on noise)."""


class Limiter(Protocol):
    limit: int

    def observe(self, t: float, good: bool, latency: float, in_flight: int | None = None) -> int: ...


class Aimd:
    """+1 per good request while half the limit is in use; x0.9 per bad one (AIMDLimit's shape)."""

    def __init__(self, start: int = 4, hi: int = 1024) -> None:
        self.limit, self.hi = start, hi

    def observe(self, t: float, good: bool, latency: float, in_flight: int | None = None) -> int:
        if not good:
            self.limit = max(1, min(self.limit - 1, int(self.limit * 0.9)))
        elif in_flight is None or (in_flight + 1) * 2 >= self.limit:
            self.limit = min(self.hi, self.limit + 1)
        return self.limit


class Vegas:
    """queue = limit * (1 - minRTT / RTT): grow below alpha, shrink above beta (log10 of the limit)."""

    def __init__(self, start: int = 4, hi: int = 1024) -> None:
        self.est, self.hi, self.min_rtt = float(start), hi, math.inf
        self.limit = start

    def observe(self, t: float, good: bool, latency: float, in_flight: int | None = None) -> int:
        self.min_rtt = min(self.min_rtt, latency)
        queue = math.ceil(self.est * (1 - self.min_rtt / latency))
        log = max(1.0, math.log10(self.est))
        alpha, beta = 3 * log, 6 * log
        if queue <= log:
            new = self.est + beta
        elif queue < alpha:
            new = self.est + log
        elif queue > beta:
            new = self.est - log
        else:
            new = self.est
        new = max(1.0, min(self.hi, new))
        self.est = 0.8 * self.est + 0.2 * new if new < self.est else new
        self.limit = int(self.est)
        return self.limit


class Gradient2:
    """limit * clamp(long / short RTT, 0.5, 1) + sqrt(limit), smoothed; long RTT an EMA of 600."""

    def __init__(self, start: int = 4, hi: int = 1024) -> None:
        self.est, self.hi, self.long = float(start), hi, 0.0
        self.n = 0
        self.limit = start

    def observe(self, t: float, good: bool, latency: float, in_flight: int | None = None) -> int:
        self.n += 1
        w = 2.0 / (min(self.n, 600) + 1)
        self.long = latency if self.n == 1 else self.long * (1 - w) + latency * w
        if self.long / latency > 2:
            self.long *= 0.9
        if in_flight is not None and (in_flight + 1) < self.est / 2:
            return self.limit
        grad = max(0.5, min(1.0, self.long / latency))
        new = self.est * grad + math.sqrt(self.est)
        new = self.est * 0.8 + new * 0.2
        self.est = max(1.0, min(self.hi, new))
        self.limit = int(self.est)
        return self.limit


def plant(ctl: Limiter, c: int, duration: float) -> list[tuple[float, int]]:
    """The closed loop on virtual time: the limit's steps (time, limit)."""
    slo = L0 * (slowdown(c, c, 2.0) + slowdown(c + 1, c, 2.0)) / 2
    steps = [(0.0, ctl.limit)]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        n = 0
        wake = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def one(b: int) -> None:
            nonlocal n
            lat = L0 * slowdown(b, c, 2.0)
            await asyncio.sleep(lat)
            n -= 1
            old = ctl.limit
            ctl.observe(loop.time(), lat <= slo, lat, n)
            if ctl.limit != old:
                steps.append((loop.time(), ctl.limit))
            wake.set()

        while loop.time() < duration:
            while n < ctl.limit:
                n += 1
                task = asyncio.ensure_future(one(n))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            wake.clear()
            await wake.wait()
        for task in tasks:
            task.cancel()

    run_virtual(main())
    return steps


def figures(steps: list[tuple[float, int]], c: int, duration: float) -> dict[str, float]:
    """Settling time, mean and spread of the limit after it (relative to c), changes a minute."""
    settle = 0.0
    for i, (_, v) in enumerate(steps):
        if abs(v - c) > BAND * c + 1:  # a limit is whole: at small c one step is more than 15%
            settle = steps[i + 1][0] if i + 1 < len(steps) else math.inf
    since = settle if settle < duration else 0.0  # never settled: the whole run's figures
    segs = []
    for i, (t, v) in enumerate(steps):
        end = min(duration, steps[i + 1][0] if i + 1 < len(steps) else duration)
        a = max(t, since)
        if end > a:
            segs.append((end - a, v))
    total = sum(w for w, _ in segs)
    mean = sum(w * v for w, v in segs) / total
    sd = math.sqrt(sum(w * (v - mean) ** 2 for w, v in segs) / total)
    changes = sum(1 for t, _ in steps if since < t <= duration)
    span = max(1e-9, duration - since)
    return {
        "settle_s": settle,
        "mean_over_c": mean / c,
        "sd_over_c": sd / c,
        "min_over_c": min(v for _, v in segs) / c,
        "max_over_c": max(v for _, v in segs) / c,
        "changes_per_min": 60.0 * changes / span,
        "duration_s": duration,
    }


def show(name: str, c: int, f: dict[str, float]) -> None:
    settle = "never" if f["settle_s"] >= f["duration_s"] else f"{f['settle_s']:5.1f} s"
    print(
        f"  {name:<10} C={c:<4} settle {settle:>7}   mean {f['mean_over_c']:5.2f} C"
        f"   sd {f['sd_over_c']:5.3f} C   range {f['min_over_c']:.2f}-{f['max_over_c']:.2f} C"
        f"   {f['changes_per_min']:5.1f} changes/min"
    )


def run_plant(cs: list[int], duration: float) -> None:
    makers: list[tuple[str, Callable[[], Limiter]]] = [
        ("auto", lambda: AutoConcurrency(0.95, hi=1024)),
        ("aimd", Aimd),
        ("vegas", Vegas),
        ("gradient2", Gradient2),
    ]
    print(f"plant (virtual time, {duration:g} s, L0 = {L0} s, slowdown 1 + (b/C)^2, jitter 0):")
    for c in cs:
        for name, make in makers:
            show(name, c, figures(plant(make(), c, duration), c, duration))


WORKLOAD = """
name = "bench-auto"
[run]
concurrency = "auto"
duration = "{seconds}s"
timeout = "60s"
[output]
results = "{results}"
save_text = false
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
max_tokens = 32
[prompts]
synthetic = {{ count = 1000, input_tokens = 10, output_tokens = 32 }}
[slo]
itl = "{itl_ms:.3f}ms"
target = 0.95
[sim.models.m]
ttft = "50ms"
tokens_per_s = 50
output_tokens = 32
capacity = 4096
jitter = 0
knee = {c}
knee_power = {p}
"""


def run_sim(c: int, seconds: float) -> dict[str, Any]:
    """oxconsole --headless against its simulator with knee c: the summary."""
    itl_ms = 20.0 * (slowdown(c, c, SIM_POWER) + slowdown(c + 1, c, SIM_POWER)) / 2
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        wl = tmp / "auto.toml"
        wl.write_text(
            WORKLOAD.format(seconds=seconds, results=tmp / "r.jsonl", itl_ms=itl_ms, c=c, p=SIM_POWER)
        )
        out = tmp / "summary.json"
        cmd = [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--summary-json", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if r.returncode not in (0, 3):
            raise SystemExit(f"oxconsole exited {r.returncode}: {r.stderr[-2000:]}")
        summary: dict[str, Any] = orjson.loads(out.read_bytes())
        return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--c", default="16,64,256", help="capacities for the plant")
    ap.add_argument("--sim-c", default="32", help="capacities for the simulator runs")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=1, help="simulator runs per capacity")
    ap.add_argument("--no-plant", action="store_true")
    ap.add_argument("--no-sim", action="store_true")
    args = ap.parse_args()
    if not args.no_plant:
        run_plant([int(x) for x in args.c.split(",")], 120.0)
    if args.no_sim:
        return
    print(f"simulator over HTTP (oxconsole --headless, {args.seconds:g} s, jitter 0):")
    for c in (int(x) for x in args.sim_c.split(",")):
        for _ in range(args.repeat):
            s = run_sim(c, args.seconds)
            changes = [ch for ch in s.get("changes", []) if ch.get("what") == "concurrency"]
            assert all(ch.get("by") == "auto" for ch in changes)
            steps = [(0.0, 4)] + [(float(ch["t"]), int(ch["to"])) for ch in changes]
            show("auto/sim", c, figures(steps, c, float(s.get("duration_s", args.seconds))))
            print("             steps " + " ".join(f"{t:.1f}:{v}" for t, v in steps))
            gp = s.get("goodput") or {}
            rps, frac = gp.get("requests_per_s", 0), gp.get("fraction", 0)
            total = s.get("requests", {}).get("total", "?")
            print(f"             goodput {rps:.1f} req/s, {frac:.3f} good; {total} requests")


if __name__ == "__main__":
    main()
