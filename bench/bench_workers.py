"""run.workers benchmark: client CPU per request and throughput with 1 vs 2 engine processes.

A zero-latency simulator (16-chunk streams) on loopback; oxconsole --headless with
`run.workers = 1` then `= 2`, repeated, medians and ratios printed in one run.

* pinned: the simulator on core 0, oxconsole (all its processes) on core 1 — shows the client CPU
  per request (parent + workers, after imports) staying flat from 1 to 2 workers;
* free: nothing pinned — the throughput ratio, which on a 2-core machine is bounded by the
  simulator needing a core too (the issue's >= 1.7x needs a core per worker beside the server).

`--server nginx`: instead, the throughput ratio against nginx (C, one worker process) answering
every POST with the simulator's own 16-chunk stream, recorded once: a server cheap enough not to
be the limit, so what the second worker buys shows even on 2 cores (needs `nginx` on the PATH,
e.g. Debian's nginx-light).

    python bench/bench_workers.py [--requests 6000] [--concurrency 128] [--reps 3] [--server nginx]
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
from bench_client import pin, start_server

WRAP = (
    "import resource,sys,time,json\n"
    "from oxconsole.cli.main import main\n"
    "def cpu():\n"
    "    s=resource.getrusage(resource.RUSAGE_SELF); c=resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "    return s.ru_utime+s.ru_stime+c.ru_utime+c.ru_stime\n"
    "rc=main(sys.argv[1:])\n"
    "print(json.dumps({'rc':rc,'cpu_s':cpu()}),file=sys.stderr)\n"
)


def bench_workload(
    name: str, url: str, n: int, conc: int, workers: int, tmp: Path, cluster: str = "local"
) -> Path:
    """The benchmarks' workload (one 16-token prompt, `n` requests at `conc`), written in `tmp`."""
    wl = tmp / "w.toml"
    wl.write_text(
        f"""
name = "{name}"
[run]
cluster = "{cluster}"
concurrency = {conc}
requests = {n}
workers = {workers}
[output]
results = "{tmp / "results.jsonl"}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "bench"
max_tokens = 16
[prompts]
items = ["Say sixteen words."]
"""
    )
    return wl


def run(url: str, workers: int, n: int, conc: int, tmp: Path, core: int | None) -> dict[str, float]:
    wl = bench_workload("bench-workers", url, n, conc, workers, tmp)
    summary = tmp / "s.json"
    prefix = pin(core) if core is not None else []
    cmd = [*prefix, sys.executable, "-c", WRAP, str(wl), "--headless", "--summary-json", str(summary),
           "--progress-interval", "1000"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    meta = json.loads(p.stderr.strip().splitlines()[-1])
    s = json.loads(summary.read_text())
    (tmp / "results.jsonl").unlink(missing_ok=True)
    return {
        "req_s": s["throughput"]["requests_per_s"],
        "cpu_ms": meta["cpu_s"] * 1000 / n,
        "ok": s["requests"]["ok"],
    }


def start_nginx(tmp: Path, chunks: int) -> tuple[subprocess.Popen[str], str]:
    """nginx on loopback answering POST /v1/chat/completions with a recorded simulator stream."""
    import shutil
    import socket
    import urllib.request

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    sim, sim_url = start_server(chunks)
    try:
        req = urllib.request.Request(
            sim_url + "/chat/completions",
            data=json.dumps(
                {"model": "bench", "messages": [{"role": "user", "content": "x"}], "stream": True,
                 "stream_options": {"include_usage": True}}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read().decode()
    finally:
        sim.terminate()
        sim.wait(5)
    assert "'" not in body and "$" not in body and body.endswith("[DONE]\n\n")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    temps = "\n".join(
        f"  {k}_temp_path {tmp}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = tmp / "nginx.conf"
    conf.write_text(
        f"""
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
{temps}
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location = /v1/chat/completions {{
      default_type text/event-stream;
      return 200 '{body}';
    }}
  }}
}}
"""
    )
    proc = subprocess.Popen([nginx, "-c", str(conf), "-g", "daemon off;"], text=True)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    return proc, url


def nginx_ratio(args: argparse.Namespace) -> None:
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as td:
        proc, url = start_nginx(Path(td), 16)
        try:
            for rep in range(args.reps):
                for workers in (1, 2):
                    r = run(url, workers, args.requests, args.concurrency, Path(td), None)
                    rows[workers].append(r)
                    print(
                        f"nginx rep {rep + 1} workers={workers}: {r['req_s']:.0f} req/s, "
                        f"{r['cpu_ms']:.3f} ms CPU/req (incl. imports), ok {r['ok']:.0f}",
                        file=sys.stderr,
                    )
        finally:
            proc.terminate()
            proc.wait(5)
    r1 = statistics.median(x["req_s"] for x in rows[1])
    r2 = statistics.median(x["req_s"] for x in rows[2])
    print(
        f"\nworkers against nginx: 16-chunk streams, concurrency {args.concurrency}, {args.requests} "
        f"requests, {args.reps} reps, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    print(f"1 worker {r1:.0f} req/s, 2 workers {r2:.0f} req/s: 2 workers / 1 worker = {r2 / r1:.2f}x req/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--server", choices=("sim", "nginx"), default="sim")
    args = ap.parse_args()
    if args.server == "nginx":
        nginx_ratio(args)
        return
    rows: dict[tuple[str, int], list[dict[str, float]]] = {}
    for mode in ("pinned", "free"):
        proc, url = start_server(16) if mode == "pinned" else _free_server()
        try:
            with tempfile.TemporaryDirectory() as td:
                for rep in range(args.reps):
                    for workers in (1, 2):
                        r = run(
                            url,
                            workers,
                            args.requests,
                            args.concurrency,
                            Path(td),
                            1 if mode == "pinned" else None,
                        )
                        rows.setdefault((mode, workers), []).append(r)
                        print(
                            f"{mode} rep {rep + 1} workers={workers}: {r['req_s']:.0f} req/s, "
                            f"{r['cpu_ms']:.3f} ms CPU/req (incl. imports), ok {r['ok']:.0f}",
                            file=sys.stderr,
                        )
        finally:
            proc.terminate()
            proc.wait(5)
    med = {
        k: (statistics.median(x["req_s"] for x in v), statistics.median(x["cpu_ms"] for x in v))
        for k, v in rows.items()
    }
    print(
        f"\nworkers benchmark: 16-chunk streams, concurrency {args.concurrency}, {args.requests} requests, "
        f"{args.reps} reps, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    )
    print(f"{'mode':<8}{'workers':>8}{'req/s':>10}{'CPU ms/req':>12}")
    for (mode, w), (rs, cpu) in med.items():
        print(f"{mode:<8}{w:>8}{rs:>10.0f}{cpu:>12.3f}")
    for mode in ("pinned", "free"):
        (r1, c1), (r2, c2) = med[(mode, 1)], med[(mode, 2)]
        print(f"{mode}: 2 workers / 1 worker = {r2 / r1:.2f}x req/s, {c2 / c1:.2f}x CPU per request")
    # CPU per request above includes each process's start-up (imports: ~1 s of CPU each, so a
    # second worker adds a fixed cost). The marginal cost per request — CPU of a run of 3n
    # requests minus a run of n, over 2n — cancels fixed costs: is a request dearer with workers?
    proc, url = start_server(16)
    try:
        with tempfile.TemporaryDirectory() as td:
            marg = {}
            for workers in (1, 2):
                small = run(url, workers, args.requests, args.concurrency, Path(td), 1)
                big = run(url, workers, 3 * args.requests, args.concurrency, Path(td), 1)
                marg[workers] = (big["cpu_ms"] * 3 - small["cpu_ms"]) / 2
                print(
                    f"pinned workers={workers}: marginal CPU {marg[workers]:.3f} ms/request", file=sys.stderr
                )
    finally:
        proc.terminate()
        proc.wait(5)
    print(
        f"marginal client CPU per request (pinned, fixed start-up costs cancelled): 1 worker "
        f"{marg[1]:.3f} ms, 2 workers {marg[2]:.3f} ms = {marg[2] / marg[1]:.2f}x"
    )


def _free_server() -> tuple[subprocess.Popen[str], str]:
    profiles = {"bench": {"ttft": 0, "tokens_per_s": 0, "output_tokens": 16, "capacity": 100000, "jitter": 0}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.sim", "--port", "0", "--profiles-json", json.dumps(profiles)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


if __name__ == "__main__":
    main()
