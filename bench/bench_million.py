"""A million prompts: validate, run, report and resume in constant memory.

For 100k and 1M-line prompts files (generated in a temp dir, explicit ids, ~100-char prompts):

* `oxconsole validate` — wall time and peak RSS;
* a headless run against a zero-latency simulator (its own process: ttft 0, tokens_per_s 0,
  4 tokens), closed loop, concurrency 256 — peak RSS of the engine process (VmHWM from
  /proc/PID/status) sampled with the journal's line count as the run goes, so growth per 100k
  requests shows. The 100k file runs to the end; the 1M file runs to the end only with
  `--full` (~20 min at ~800 req/s), otherwise for `--seconds` and the samples show the slope;
* a 1M-record journal (the 100k run's records, re-stamped with the 1M file's ids: the engine's
  own line format) for `oxconsole report` (time, peak RSS) and `--resume` of a completed run
  (every id already ok: nothing is sent; peak RSS is the resume's bookkeeping).

    python bench/bench_million.py [--sizes 100000,1000000] [--seconds 120] [--full] [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OX = [sys.executable, "-m", "oxconsole"]
LIMIT_MB = 300.0


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def tree_pids(pid: int) -> list[int]:
    """pid and its descendants (workers), from /proc."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return 0


def measured(
    cmd: list[str], cwd: Path, journal: Path | None = None, every: float = 0.25, timeout: float | None = None
) -> dict[str, Any]:
    """Run cmd; wall time, peak RSS of the process (VmHWM, max over its workers too) and, when a
    journal is given, (seconds, lines, VmHWM MB) samples every ~10 s."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0.0
    peaks: dict[int, float] = {}
    samples: list[tuple[float, int, float]] = []
    next_sample = 10.0
    killed = False
    rusage_mb = 0.0
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            rusage_mb = ru.ru_maxrss / 1024  # the process's own peak, whatever the sampling missed
            break
        for p in tree_pids(proc.pid):
            v = vm_hwm_mb(p)
            if v is not None:
                peaks[p] = max(peaks.get(p, 0.0), v)
        peak = peaks.get(proc.pid, peak)
        t = time.perf_counter() - t0
        if journal is not None and t >= next_sample:
            samples.append((round(t, 1), count_lines(journal), round(peak, 1)))
            next_sample += 10.0
        if timeout is not None and t > timeout and not killed:
            proc.send_signal(2)  # SIGINT: the run stops, drains and flushes its journal
            killed = True
        time.sleep(every)
    wall = time.perf_counter() - t0
    out, err = proc.communicate()
    peak = max(peak, rusage_mb)
    res: dict[str, Any] = {
        "rc": proc.returncode,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak, 1),
        "worker_peak_rss_mb": round(max((v for p, v in peaks.items() if p != proc.pid), default=0.0), 1),
        "stderr_tail": err.strip().splitlines()[-3:],
        "stdout": out,
    }
    if journal is not None:
        samples.append((round(wall, 1), count_lines(journal), round(peak, 1)))
        res["samples"] = samples
    return res


def make_prompts(path: Path, n: int) -> None:
    filler = "Summarise the following in one line: the quick brown fox jumps over the lazy dog again"
    with open(path, "w") as f:
        for i in range(n):
            f.write(f'{{"id": "p{i}", "prompt": "{filler} {i}"}}\n')


def workload(tmp: Path, name: str, prompts: Path, url: str, workers: int) -> Path:
    wl = tmp / f"{name}.toml"
    wl.write_text(
        f"""
name = "{name}"
[run]
concurrency = 256
timeout = "30s"
workers = {workers}
[output]
results = "{tmp / name / "results.jsonl"}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "m"
[prompts]
file = "{prompts}"
"""
    )
    return wl


def start_sim() -> tuple[subprocess.Popen[str], str]:
    profiles = {"m": {"ttft": 0, "tokens_per_s": 0, "output_tokens": 4, "capacity": 100000, "jitter": 0}}
    proc = subprocess.Popen(
        [*OX, "sim", "--port", "0", "--profiles-json", json.dumps(profiles)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def restamp_journal(src: Path, dst: Path, n: int) -> None:
    """A completed n-record journal in the engine's line format: the records of `src`, cycled, with
    the ids p0..p{n-1} (so it matches the n-line prompts file) and times moved on."""
    import orjson

    # At most 10k template records: this process must stay small, because a child's ru_maxrss
    # starts from its parent's RSS at fork (Linux carries it across exec).
    lines: list[dict[str, Any]] = []
    with open(src, "rb") as f:
        for x in f:
            d = orjson.loads(x)
            if d.get("status") == "ok":
                lines.append(d)
                if len(lines) >= 10_000:
                    break
    span = max(d["t_sent"] for d in lines) - min(d["t_scheduled"] for d in lines) + 1.0
    with open(dst, "wb") as f:
        for i in range(n):
            d = dict(lines[i % len(lines)])
            shift = (i // len(lines)) * span
            d["id"] = f"p{i}"
            d["t_scheduled"] += shift
            d["t_sent"] += shift
            f.write(orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE))
    # the manifest --resume checks (the workload's fingerprint) is copied by the caller


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--seconds", type=float, default=120.0, help="cap on the 1M run unless --full")
    ap.add_argument("--full", action="store_true", help="run every size to the end")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--dir", type=Path, help="work here (kept) instead of a temp dir")
    ap.add_argument("--json", type=Path)
    ns = ap.parse_args()
    tmp = ns.dir or Path(tempfile.mkdtemp(prefix="oxmillion-"))
    tmp.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in ns.sizes.split(",")]
    sim, url = start_sim()
    results: dict[str, Any] = {}
    first_journal: Path | None = None
    first_name: str | None = None
    try:
        for n in sizes:
            name = f"m{n}"
            prompts = tmp / f"{name}.jsonl"
            t = time.perf_counter()
            make_prompts(prompts, n)
            gen_s = time.perf_counter() - t
            wl = workload(tmp, name, prompts, url, ns.workers)
            r: dict[str, Any] = {
                "prompts_mb": round(prompts.stat().st_size / 1e6, 1),
                "generate_s": round(gen_s, 1),
            }
            v = measured([*OX, "validate", str(wl)], tmp)
            r["validate"] = {k: v[k] for k in ("rc", "wall_s", "peak_rss_mb")}
            journal = tmp / name / "results.jsonl"
            cap = None if ns.full or n <= 100_000 else ns.seconds
            run = measured(
                [*OX, str(wl), "--headless", "--progress-interval", "30"], tmp, journal=journal, timeout=cap
            )
            r["run"] = {k: run[k] for k in ("rc", "wall_s", "peak_rss_mb", "worker_peak_rss_mb", "samples")}
            r["run"]["requests"] = count_lines(journal)
            r["run"]["req_per_s"] = round(r["run"]["requests"] / max(run["wall_s"], 1e-9), 1)
            if run["rc"] not in (0, 130):
                r["run"]["stderr"] = run["stderr_tail"]
            if first_journal is None:
                first_journal, first_name = journal, name
            # a completed journal of n records for report and resume
            full = tmp / f"{name}-complete" / "results.jsonl"
            full.parent.mkdir(exist_ok=True)
            if count_lines(journal) >= n:
                shutil.copy(journal, full)
                made = "the run's own journal"
            else:
                assert first_journal is not None
                restamp_journal(first_journal if first_name != name else journal, full, n)
                made = "re-stamped run records"
            meta = journal.with_name(journal.name + ".meta.json")
            if meta.exists():
                shutil.copy(meta, full.with_name(full.name + ".meta.json"))
            r["journal"] = {
                "records": count_lines(full),
                "mb": round(full.stat().st_size / 1e6, 1),
                "made": made,
            }
            rep = measured([*OX, "report", str(full), "--json"], tmp)
            r["report"] = {k: rep[k] for k in ("rc", "wall_s", "peak_rss_mb")}
            res = measured([*OX, str(wl), "--headless", "--resume", "--output", str(full)], tmp)
            r["resume"] = {k: res[k] for k in ("rc", "wall_s", "peak_rss_mb", "stderr_tail")}
            results[str(n)] = r
            show(n, r)
    finally:
        sim.terminate()
        sim.wait()
        if ns.dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1))


def show(n: int, r: dict[str, Any]) -> None:
    def ok(mb: float) -> str:
        return "ok" if mb < LIMIT_MB else f"OVER {LIMIT_MB:.0f} MB"

    def line(what: str, d: dict[str, Any]) -> str:
        mb = d["peak_rss_mb"]
        return f"  {what:<9} {d['wall_s']:6.1f} s   peak RSS {mb:6.1f} MB  {ok(mb)} (rc {d['rc']}"

    print(f"\n== {n:,} prompts ({r['prompts_mb']} MB file)")
    v = r["validate"]
    print(line("validate", v) + ")")
    run = r["run"]
    print(
        line("run", run)
        + f", {run['requests']:,} requests, {run['req_per_s']:.0f} req/s"
        + (f", workers peak {run['worker_peak_rss_mb']} MB" if run["worker_peak_rss_mb"] else "")
        + ")"
    )
    print(
        "    samples (s, journal lines, VmHWM MB): "
        + ", ".join(f"({a}, {b:,}, {c})" for a, b, c in run["samples"])
    )
    if "stderr" in run:
        print(f"    stderr: {run['stderr']}")
    j = r["journal"]
    rep = r["report"]
    print(f"  journal   {j['records']:,} records, {j['mb']} MB ({j['made']})")
    print(line("report", rep) + ")")
    res = r["resume"]
    print(line("resume", res) + ")")
    if res["rc"] != 0:
        print(f"    stderr: {res['stderr_tail']}")


if __name__ == "__main__":
    main()
