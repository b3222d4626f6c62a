"""Measurement truth: what oxconsole reports against a simulator whose timing is known exactly.

The simulator (its own process) serves one model with jitter 0, ttft 300 ms and 10 tokens/s for
16 tokens, so every request's true TTFT is 300 ms and its true latency 300 + 15 * 100 = 1800 ms.
oxconsole sends ~550 req/s under open-loop arrival (`arrival = "constant"`), so ~1,000 requests are
in flight and the simulator writes ~9k timed chunks a second. Printed, per configuration:

* the summary's TTFT and latency p50 / p99 minus the truth (targets: 3 ms at p50, 30 ms at p99);
* the client's event-loop lag (a 5 ms probe task beside the engine) and its GC pauses;
* the simulator's own lateness (each timed write against its schedule), so a server error is not
  blamed on the client;
* the summary's percentiles against exact ones computed from the journal (target: within 0.1%);
* client CPU and peak RSS.

    python bench/bench_truth.py [--rate 550] [--duration 25] [--configs default,nofreeze,asyncio,w2]
                                [--pin]

Configurations: `default` (uvloop; the engine paces the GC: frozen at the start, automatic
collection off, a young collection from its ticker once 20k net allocations accumulate),
`nofreeze` (CPython's defaults), `nogc` (no cyclic GC at all during the run: what GC costs),
`freeze10k` (frozen, automatic young collections every 10k allocations: the engine's setting
before), `freeze700` (frozen, automatic at CPython's 700), `asyncio` (no uvloop),
`w2` (run.workers = 2). `--trace` splits each request's error into the way there, the
simulator's own lateness and the way back (the simulator's per-request trace).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TTFT_MS, TPS, TOKENS = 300.0, 10.0, 16
TRUE_TTFT = TTFT_MS
TRUE_LATENCY = TTFT_MS + (TOKENS - 1) * 1000.0 / TPS  # 1800 ms


def pin(core: int, enabled: bool) -> list[str]:
    if enabled and shutil.which("taskset") and (os.cpu_count() or 1) > core:
        return ["taskset", "-c", str(core)]
    return []


def start_sim(
    pinned: bool, profile: str | None = None, trace: bool = False
) -> tuple[subprocess.Popen[str], str]:
    profiles = {
        "m": {
            "ttft": TTFT_MS / 1000.0,
            "tokens_per_s": TPS,
            "output_tokens": TOKENS,
            "capacity": 100000,
            "jitter": 0,
        }
    }
    proc = subprocess.Popen(
        [
            *pin(0, pinned),
            sys.executable,
            *(["-m", "cProfile", "-o", profile] if profile else []),
            "-m",
            "oxconsole.sim",
            "--profiles-json",
            json.dumps(profiles),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OXCONSOLE_SIM_TRACE": "1"} if trace else None,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def sim_stats(url: str, path: str = "/sim/stats") -> Any:
    with urllib.request.urlopen(url.removesuffix("/v1") + path, timeout=30) as r:
        return json.loads(r.read())


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def workload(tmp: Path, url: str, rate: float, duration: float, workers: int) -> Path:
    n = int(rate * duration)
    wl = tmp / "truth.toml"
    wl.write_text(
        f"""
name = "truth"
[run]
concurrency = 2000
rate = {rate}
arrival = "constant"
requests = {n}
timeout = "30s"
workers = {workers}
[output]
results = "{tmp / "results.jsonl"}"
save_text = false
[endpoints.default]
base_url = "{url}"
max_connections = 2000
[[models]]
name = "m"
[prompts]
synthetic = {{ count = {n}, input_tokens = 20, output_tokens = {TOKENS} }}
"""
    )
    return wl


def exact(values: list[float], q: float) -> float:
    """Nearest-rank percentile, as the summary defines it."""
    from oxconsole.metrics.histogram import nearest_rank

    return values[nearest_rank(q, len(values)) - 1]


def journal_truth(path: Path, summary: dict[str, Any], skip_s: float) -> dict[str, Any]:
    """Exact percentiles from the journal, the summary's relative disagreement with them, and the
    error against the truth after the first `skip_s` seconds (connections being opened)."""
    import orjson

    ttft: list[float] = []
    lat: list[float] = []
    steady_ttft: list[float] = []
    steady_lat: list[float] = []
    errors = 0
    t0 = math.inf
    rows = []
    with open(path, "rb") as f:
        for line in f:
            d = orjson.loads(line)
            if d["status"] != "ok":
                errors += 1
                continue
            rows.append((d["t_scheduled"], d["ttft_ms"], d["latency_ms"]))
            t0 = min(t0, d["t_scheduled"])
    for t, a, b in rows:
        ttft.append(a)
        lat.append(b)
        if t - t0 >= skip_s:
            steady_ttft.append(a)
            steady_lat.append(b)
    out: dict[str, Any] = {"ok": len(lat), "errors": errors}
    for name, vals, key in (("ttft", ttft, "ttft_ms"), ("latency", lat, "latency_ms")):
        vals.sort()
        agree = {}
        for q in (50, 90, 99):
            ex = exact(vals, q)
            agree[f"p{q}"] = (summary[key][f"p{q}"] - ex) / ex if ex else 0.0
        out[f"{name}_summary_vs_exact"] = max(abs(v) for v in agree.values())
    for name, vals, truth in (("ttft", steady_ttft, TRUE_TTFT), ("latency", steady_lat, TRUE_LATENCY)):
        vals.sort()
        if vals:
            out[f"steady_{name}_err"] = {
                "p50": exact(vals, 50) - truth,
                "p99": exact(vals, 99) - truth,
                "max": vals[-1] - truth,
            }
    return out


def pcts(values: list[float]) -> dict[str, float]:
    values.sort()
    return {"p50": exact(values, 50), "p99": exact(values, 99), "max": values[-1]}


def decompose(wl: Path, journal: Path, trace: list[list[Any]], skip_s: float) -> dict[str, Any]:
    """Split each request's TTFT and latency error into its parts, by wall clock (one machine, one
    clock): the way there (client's attempt start to the simulator's handler start), the wait for
    admission, the simulator's own lateness (first token against admission + ttft) and the way back
    (the simulator's write to the client's stamp). Requests are matched by their prompt's text."""
    import orjson

    from oxconsole.workload import iter_prompts, load_workload

    by_text = {t[0]: t for t in trace}
    text_of = {}
    for p in iter_prompts(load_workload(wl)):
        content = p.messages[-1]["content"]
        if content in by_text:
            text_of[p.id] = content
    parts: dict[str, list[float]] = {
        k: [] for k in ("there", "admit", "server_first", "back_first", "server_last", "back_last")
    }
    t0 = math.inf
    rows = []
    with open(journal, "rb") as f:
        for line in f:
            d = orjson.loads(line)
            if d["status"] == "ok" and d["id"] in text_of:
                rows.append(d)
                t0 = min(t0, d["t_scheduled"])
    for d in rows:
        if d["t_scheduled"] - t0 < skip_s:
            continue
        _, t_in, t_admit, t_first, t_end = by_text[text_of[d["id"]]]
        sent = d["t_sent"]
        parts["there"].append((t_in - sent) * 1000.0)
        parts["admit"].append((t_admit - t_in) * 1000.0)
        parts["server_first"].append((t_first - t_admit) * 1000.0 - TRUE_TTFT)
        parts["back_first"].append((sent + d["ttft_ms"] / 1000.0 - t_first) * 1000.0)
        parts["server_last"].append((t_end - t_admit) * 1000.0 - TRUE_LATENCY)
        parts["back_last"].append((sent + d["latency_ms"] / 1000.0 - t_end) * 1000.0)
    return {"matched": len(parts["there"]), **{k: pcts(v) for k, v in parts.items() if v}}


# --- the client process ---------------------------------------------------------------------------


def child(wl: str, out: str, config: str) -> None:
    """Run the engine as `oxconsole --headless` does, with a lag probe and GC timing beside it."""
    from oxconsole.base.aio import run_loop
    from oxconsole.cli.headless import engine_with_progress
    from oxconsole.cli.prepare import prepare_run
    from oxconsole.engine import shard
    from oxconsole.metrics.histogram import LogHistogram

    class Unpaced:
        """CPython's collector as the config sets it, instead of the engine's PacedGC."""

        collections = 0
        pause_ms = 0.0

        def tick(self) -> None:
            pass

        def restore(self) -> None:
            pass

    if config in ("nofreeze", "nogc", "freeze700", "freeze10k"):
        shard.quiet_gc = Unpaced  # type: ignore[assignment]
    if config == "nogc":
        gc.disable()
    if config in ("freeze700", "freeze10k"):
        gc.freeze()
        gc.set_threshold(700 if config == "freeze700" else 10_000)
    gc_pauses = LogHistogram()
    gc_total = [0.0, 0]
    gc_start = [0.0]
    gc_gen: dict[int, list[float]] = {g: [0, 0.0, 0.0, 0] for g in (0, 1, 2)}

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            ms = (time.perf_counter() - gc_start[0]) * 1000.0
            gc_pauses.record(ms)
            gc_total[0] += ms
            gc_total[1] += 1
            g = gc_gen[info["generation"]]
            g[0] += 1
            g[1] += ms
            g[2] = max(g[2], ms)
            g[3] += info["collected"]

    gc.callbacks.append(on_gc)
    prep = prepare_run(wl, [], None, False)
    engine = engine_with_progress(prep, 5.0)
    lag = LogHistogram()

    async def probe() -> None:
        step = 0.005
        perf = time.perf_counter
        while True:
            t = perf()
            await asyncio.sleep(step)
            lag.record(max(0.0, (perf() - t - step) * 1000.0))

    async def go() -> Any:
        task = asyncio.create_task(probe())
        try:
            return await engine.run()
        finally:
            task.cancel()

    cpu0 = time.process_time()
    if config == "asyncio":
        outcome = asyncio.run(go())
    else:
        outcome = run_loop(go())
    cpu = time.process_time() - cpu0
    # What a collection would cost now (after the run: what is left is what survived it)
    count_end = gc.get_count()
    young = len(gc.get_objects(0))
    t = time.perf_counter()
    freed = gc.collect(0)
    gc0_end_ms = (time.perf_counter() - t) * 1000.0
    ls = lag.summary()
    gs = gc_pauses.summary()
    Path(out).write_text(
        json.dumps(
            {
                "summary": outcome.summary,
                "cpu_s": cpu,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "lag_ms": {"p50": ls["p50"], "p99": ls["p99"], "max": ls["max"]},
                "gc": {
                    "count": gc_total[1],
                    "total_ms": gc_total[0],
                    "p99": gs["p99"],
                    "max": gs["max"],
                    "by_generation": {
                        str(k): {"count": v[0], "total_ms": v[1], "max_ms": v[2], "collected": v[3]}
                        for k, v in gc_gen.items()
                    },
                },
                "warnings": outcome.warnings,
                "gc_end": {"count": count_end, "young": young, "collect0_ms": gc0_end_ms, "freed": freed},
            }
        )
    )


# --- the parent -----------------------------------------------------------------------------------


def run_config(
    config: str,
    rate: float,
    duration: float,
    pinned: bool,
    sim_profile: str | None = None,
    trace: bool = False,
) -> dict[str, Any]:
    workers = 2 if config == "w2" else 1
    with tempfile.TemporaryDirectory(prefix="oxtruth-") as d:
        tmp = Path(d)
        sim, url = start_sim(pinned, sim_profile, trace)
        try:
            sim_cpu0 = proc_cpu(sim.pid)
            wl = workload(tmp, url, rate, duration, workers)
            out = tmp / "out.json"
            t0 = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(
                [*pin(1, pinned), sys.executable, __file__, "--child", str(wl), str(out), config],
                cwd=tmp,
                check=True,
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = time.perf_counter() - t0
            stats = sim_stats(url)
            traced = sim_stats(url, "/sim/trace") if trace else []
            sim_cpu = proc_cpu(sim.pid) - sim_cpu0
        finally:
            sim.terminate()
            sim.wait()
        res: dict[str, Any] = json.loads(out.read_text())
        res["client_cpu_total_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        res["wall_s"] = wall
        res["sim"] = {"cpu_s": sim_cpu, "lateness_ms": stats.get("lateness_ms", {})}
        res["journal"] = journal_truth(tmp / "results.jsonl", res["summary"], skip_s=3.0)
        if trace:
            res["parts"] = decompose(wl, tmp / "results.jsonl", traced, skip_s=3.0)
        return res


def show(config: str, r: dict[str, Any]) -> None:
    s = r["summary"]
    j = r["journal"]
    lat, ttft = s["latency_ms"], s["ttft_ms"]
    print(
        f"\n== {config}: {s['requests']['ok']} ok / {s['requests']['error']} error in {s['duration_s']:.1f}s "
        f"({s['throughput']['requests_per_s']:.0f} req/s)"
    )
    print(
        f"  TTFT    p50 {ttft['p50'] - TRUE_TTFT:+7.2f} ms  p99 {ttft['p99'] - TRUE_TTFT:+7.2f} ms  "
        f"max {ttft['max'] - TRUE_TTFT:+8.2f} ms   (truth {TRUE_TTFT:.0f} ms)"
    )
    print(
        f"  latency p50 {lat['p50'] - TRUE_LATENCY:+7.2f} ms  p99 {lat['p99'] - TRUE_LATENCY:+7.2f} ms  "
        f"max {lat['max'] - TRUE_LATENCY:+8.2f} ms   (truth {TRUE_LATENCY:.0f} ms)"
    )
    for name in ("ttft", "latency"):
        e = j.get(f"steady_{name}_err")
        if e:
            print(f"  after 3s {name:<7} p50 {e['p50']:+7.2f}  p99 {e['p99']:+7.2f}  max {e['max']:+8.2f} ms")
    print(
        f"  summary vs exact (journal): ttft {j['ttft_summary_vs_exact'] * 100:.3f}%  "
        f"latency {j['latency_summary_vs_exact'] * 100:.3f}%  (p50/p90/p99, worst)"
    )
    lg = r["lag_ms"]
    gcs = r["gc"]
    print(
        f"  client loop lag (5 ms probe) p50 {lg['p50']:.2f}  p99 {lg['p99']:.2f}  max {lg['max']:.1f} ms; "
        f"GC {gcs['count']} pauses, {gcs['total_ms']:.0f} ms total, max {gcs['max']:.1f} ms"
    )
    byg = gcs.get("by_generation", {})
    if byg:
        print(
            "  GC by generation: "
            + "; ".join(
                f"gen{k} {v['count']}x {v['total_ms']:.0f} ms (max {v['max_ms']:.1f}, "
                f"{v.get('collected', 0):,} objects freed)"
                for k, v in byg.items()
            )
        )
    late = r["sim"]["lateness_ms"]
    if late:
        f, la = late["first"], late["last"]
        print(
            f"  simulator lateness: first token p50 {f['p50']:.2f} p99 {f['p99']:.2f} max {f['max']:.1f} ms; "
            f"last write p50 {la['p50']:.2f} p99 {la['p99']:.2f} max {la['max']:.1f} ms"
        )
        g = late.get("gc")
        if g:
            print(
                f"  simulator GC: {g['n']} pauses, {g.get('total', 0.0):.0f} ms total, "
                f"p99 {g['p99']:.1f} max {g['max']:.1f} ms"
            )
    print(
        f"  CPU: client {r['client_cpu_total_s']:.1f}s (engine process {r['cpu_s']:.1f}s), "
        f"simulator {r['sim']['cpu_s']:.1f}s over {r['wall_s']:.1f}s wall; "
        f"client peak RSS {r['rss_mb']:.0f} MB"
    )
    parts = r.get("parts")
    if parts:
        print(
            f"  where the error is (after 3s, {parts['matched']} requests matched by prompt, "
            "ms p50 / p99 / max):"
        )
        names = {
            "there": "client start -> simulator handler",
            "admit": "handler -> admitted",
            "server_first": "simulator first token vs schedule",
            "back_first": "simulator first write -> client stamp",
            "server_last": "simulator last write vs schedule",
            "back_last": "simulator last write -> client stamp",
        }
        for k, label in names.items():
            v = parts.get(k)
            if v:
                print(f"    {label:<40} {v['p50']:7.2f} / {v['p99']:7.2f} / {v['max']:7.1f}")
    for w in r.get("warnings", []):
        print(f"  warning: {w}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=550.0)
    ap.add_argument(
        "--duration", type=float, default=25.0, help="seconds of arrivals (requests = rate x this)"
    )
    ap.add_argument("--configs", default="default,w2")
    ap.add_argument("--pin", action="store_true", help="simulator on core 0, client on core 1 (taskset)")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    ap.add_argument("--sim-profile", help="run the simulator under cProfile, stats to this file")
    ap.add_argument(
        "--trace", action="store_true", help="split the error into its parts (the simulator's trace)"
    )
    ns = ap.parse_args()
    print(
        f"truth: TTFT {TRUE_TTFT:.0f} ms, latency {TRUE_LATENCY:.0f} ms; "
        f"{ns.rate:g} req/s for {ns.duration:g}s, "
        f"~{ns.rate * TRUE_LATENCY / 1000:.0f} in flight"
    )
    results = {}
    for config in ns.configs.split(","):
        results[config] = run_config(config, ns.rate, ns.duration, ns.pin, ns.sim_profile, ns.trace)
        show(config, results[config])
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
