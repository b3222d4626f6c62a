"""run.cluster = "ray" benchmark: 2 engine actors vs 1 against nginx, and the driver's CPU per request.

nginx (C, one worker process) answers every POST with the simulator's own 16-chunk stream, recorded
once (`bench_workers.start_nginx`): a server cheap enough not to be the limit. oxconsole --headless
runs with `--ray-address local` (a Ray instance started on 127.0.0.1 for each run, shut down after)
and `run.workers = 1`, then `= 2`; and once as a plain local engine (`run.cluster = "local"`,
one process) for the CPU one engine spends per request. The driver's CPU is the oxconsole
process's own (`RUSAGE_SELF`: journal, collector, snapshots, Ray's client side), not the actors'.

    python bench/bench_ray.py [--requests 20000] [--concurrency 128] [--reps 3] [--server sim] [--ratio-only]

Each run also reports the CPU of every process it started, by role (`proccpu.py`: the driver,
the actors, Ray's GCS, raylet and agents, nginx), with start-up and in the steady state, and the
cores the run's processes had (this machine's cores are shared). `--ratio-only`: only the two Ray
configurations (no local engine, no start-up runs).

`--server sim`: the zero-latency simulator instead (bench_client.start_server), where nginx is
missing; it needs a core of its own, so the actors' ratio is then bounded by it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_client import start_server
from bench_workers import bench_workload, start_nginx
from proccpu import ProcCPU

WRAP = (
    "import resource,sys,time,json\n"
    "from oxconsole.cli.main import main\n"
    "rc=main(sys.argv[1:])\n"
    "s=resource.getrusage(resource.RUSAGE_SELF)\n"
    "print(json.dumps({'rc':rc,'cpu_s':s.ru_utime+s.ru_stime}),file=sys.stderr)\n"
)


def run(
    url: str, cluster: str, workers: int, n: int, conc: int, tmp: Path, server: int | None = None
) -> dict[str, float]:
    """One oxconsole run; with `server` (its pid), the CPU of every process by role as `cpu:ROLE`."""
    wl = bench_workload("bench-ray", url, n, conc, workers, tmp, cluster)
    summary = tmp / "s.json"
    extra = ["--ray-address", "local"] if cluster == "ray" else []
    cmd = [sys.executable, "-c", WRAP, str(wl), "--headless", "--summary-json", str(summary),
           "--progress-interval", "1000", *extra]  # fmt: skip
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env)
    results = tmp / "results.jsonl"
    size = lambda: results.stat().st_size if results.exists() else 0.0  # noqa: E731
    with ProcCPU([p.pid] + ([server] if server else []), progress=size) as cpu:
        _, err = p.communicate()
    meta = json.loads(err.strip().splitlines()[-1])
    s = json.loads(summary.read_text())
    (tmp / "results.jsonl").unlink(missing_ok=True)
    return {
        "req_s": s["throughput"]["requests_per_s"],
        "cpu_ms": meta["cpu_s"] * 1000 / n,
        "ok": s["requests"]["ok"],
        "wall_s": s["duration_s"],
        **{f"cpu:{k}": v for k, v in cpu.by_role().items()},
        **{f"cores:{k}": v for k, v in cpu.steady().items()},
    }


CONFIGS = (("local 1", "local", 1), ("ray 1", "ray", 1), ("ray 2", "ray", 2))


def roles(rows: list[dict[str, float]], kind: str, scale: float) -> str:
    """Median CPU of each kind of process (`kind` "cpu:": seconds in all; "cores:": steady state)."""
    med = {
        k[len(kind) :]: statistics.median(r.get(k, 0.0) for r in rows) * scale
        for k in {k for r in rows for k in r if k.startswith(kind)}
    }
    return ", ".join(f"{k} {v:.3f}" for k, v in sorted(med.items(), key=lambda kv: -kv[1]) if v >= 0.0005)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--small", type=int, default=500, help="requests of the start-up cost runs")
    ap.add_argument("--server", choices=("nginx", "sim"), default="nginx", help="sim: where nginx is missing")
    ap.add_argument(
        "--ratio-only", action="store_true", help="only ray 1 and ray 2 (no local engine, no small runs)"
    )
    args = ap.parse_args()
    configs = CONFIGS[1:] if args.ratio_only else CONFIGS
    rows: dict[str, list[dict[str, float]]] = {}
    small: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as td:
        proc, url = start_nginx(Path(td), 16) if args.server == "nginx" else start_server(16)
        try:
            for rep in range(args.reps):
                for label, cluster, workers in configs:
                    r = run(url, cluster, workers, args.requests, args.concurrency, Path(td), proc.pid)
                    rows.setdefault(label, []).append(r)
                    print(
                        f"rep {rep + 1} {label}: {r['req_s']:.0f} req/s, {r['cpu_ms']:.3f} ms CPU/req "
                        f"(this process, incl. imports), ok {r['ok']:.0f}; the run's processes had "
                        f"{sum(v for k, v in r.items() if k.startswith('cores:')):.2f} cores (steady state)",
                        file=sys.stderr,
                    )
                ratio = rows["ray 2"][-1]["req_s"] / rows["ray 1"][-1]["req_s"]
                print(f"rep {rep + 1}: ray 2 / ray 1 = {ratio:.2f}x", file=sys.stderr)
            if not args.ratio_only:
                # The same with few requests: what a run costs whatever its size (imports, ray.init),
                # so that the difference is the cost of the requests alone.
                small = {k: run(url, c, w, args.small, args.concurrency, Path(td)) for k, c, w in (
                    ("local 1", "local", 1), ("ray 2", "ray", 2))}  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(5)
    report(args, rows, small)


def report(
    args: argparse.Namespace, rows: dict[str, list[dict[str, float]]], small: dict[str, dict[str, float]]
) -> None:
    med = {k: (statistics.median(x["req_s"] for x in v), statistics.median(x["cpu_ms"] for x in v))
           for k, v in rows.items()}  # fmt: skip
    print(
        f"\nray against {args.server}: 16-chunk streams, concurrency {args.concurrency}, "
        f"{args.requests} requests, {args.reps} reps, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    for k, (rs, cpu) in med.items():
        print(f"{k:8}: {rs:7.0f} req/s, {cpu:.3f} ms CPU/req in the process started")
        per_req = roles(rows[k], "cpu:", 1000 / args.requests)
        print(f"          CPU by process, ms a request, start-up included: {per_req}")
        print(f"          cores by process, steady state (20-80% of the run): {roles(rows[k], 'cores:', 1)}")
    ratios = [b["req_s"] / a["req_s"] for a, b in zip(rows["ray 1"], rows["ray 2"], strict=True)]
    print(f"ray 2 actors / 1 actor = {statistics.median(ratios):.2f}x req/s (each rep: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    if not small:
        return
    big, few = args.requests, args.small

    def marginal(k: str) -> float:  # ms of CPU a request, start-up costs taken out
        return (med[k][1] * big - small[k]["cpu_ms"] * few) / (big - few)

    drv, eng = marginal("ray 2"), marginal("local 1")
    print(f"per request, start-up taken out ({few} vs {big} requests): driver with 2 actors {drv:.3f} ms, ")
    print(f"one local engine {eng:.3f} ms: the driver spends {drv / eng:.0%} of an engine's CPU a request,")
    print(f"so one driver core takes about {1000 / drv:,.0f} records/s")


if __name__ == "__main__":
    main()
