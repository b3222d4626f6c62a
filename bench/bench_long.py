"""Long prompts: client CPU per request and TTFT p99 for 250,000-token prompts against 100-token ones.

The simulator (its own process, jitter 0) answers every request whole 100 ms after admission
(`ttft = 100ms`, `tokens_per_s = 0`, capacity far above the concurrency), so every request's true
TTFT is exactly 100 ms however long its prompt. oxconsole sends N requests at 16 in flight
(`oxconsole W.toml --headless`, a child process; its CPU is measured inside it, imports excluded).
Cases:

* `short`: synthetic prompts of 100 tokens;
* `synthetic`: synthetic prompts of 250,000 tokens (~1 MB each);
* `file`: a prompts file of 20 distinct 250,000-token prompts, repeated to N requests;
* `floor`: not oxconsole but a bare aiohttp client (uvloop, in this process) sending the synthetic
  case's bodies, encoded before it starts, at the same concurrency: what the way there and back
  cost on this machine with no engine at all, the floor oxconsole's error is to be read against.

Printed per case: requests/s, client CPU ms per request, TTFT p50 / p99 and p99 minus the nominal
100 ms, and the simulator's own share (a fresh simulator a case): the time it took to read and
parse each body before admitting it (`/sim/stats` `read_ms`) and how late its first writes left.

The exact figure a request is measured against is the simulator's own TTFT for it, from its
handler's start (the request's headers in) to its first token's write, from its trace
(`OXCONSOLE_SIM_TRACE`; requests matched by prompt text, repeats in order). A 1 MB body takes the
simulator time to receive and parse, more when 16 arrive at once (the run's first wave), and a real
server's TTFT includes its own reading too; what is the client's is the rest: the way there (our
attempt's start to the server's handler) and back (its write to our stamp). Then each long case's CPU
per request minus the short case's (target: at most 5 ms) and its TTFT's error p99 against the exact
figure (target: within 20 ms).

    python bench/bench_long.py [--requests 200] [--concurrency 16] [--tokens 250000] [--cases ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TTFT_MS = 100.0

WRAP = (
    "import resource,sys,time,json\n"
    "def cpu():\n r=resource.getrusage(resource.RUSAGE_SELF);return r.ru_utime+r.ru_stime\n"
    "import openai,oxconsole.engine.runner;from oxconsole.cli.main import main;c0=cpu()\n"
    "t=time.perf_counter();rc=main(sys.argv[1:]);w=time.perf_counter()-t\n"
    "print(json.dumps({'rc':rc,'wall_s':w,'cpu_s':cpu()-c0}),file=sys.stderr)"
)


def start_sim() -> tuple[subprocess.Popen[str], str]:
    """A simulator process that traces every request (its handler start and first write)."""
    profile = {"ttft": TTFT_MS / 1000, "tokens_per_s": 0, "output_tokens": 16, "capacity": 4096}
    profiles = {"m": profile | {"jitter": 0}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.sim", "--port", "0", "--profiles-json", json.dumps(profiles)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OXCONSOLE_SIM_TRACE": "1"},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"simulator did not start: {url!r}")
    return proc, url


def sim_get(url: str, path: str = "/sim/stats") -> Any:
    with urllib.request.urlopen(url.removesuffix("/v1") + path, timeout=30) as r:
        return json.loads(r.read())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def errors(wl: Path, journal: Path, trace: list[list[Any]], first_wave: int) -> dict[str, list[float]]:
    """Per request, in ms: the client's TTFT minus the simulator's own (`error`), and its parts,
    the way there and back. Matched by prompt text (the trace's key), repeats in send order."""
    sys.path.insert(0, str(ROOT))
    from oxconsole.sim.routes import trace_key
    from oxconsole.workload import iter_prompts, load_workload

    key_of = {p.id: trace_key(p.messages[-1]["content"]) for p in iter_prompts(load_workload(wl))}
    served: dict[str, list[list[Any]]] = {}
    for t in sorted(trace, key=lambda t: t[1]):
        served.setdefault(t[0], []).append(t)
    sent: dict[str, list[dict[str, Any]]] = {}
    with journal.open() as f:
        for line in f:
            d = json.loads(line)
            if d["status"] == "ok" and d.get("ttft_ms") is not None:
                sent.setdefault(key_of[d["id"]], []).append(d)
    pairs = []
    for key, recs in sent.items():
        in_order = sorted(recs, key=lambda d: d["t_sent"])
        for d, (_, t_in, _admit, t_first, _end) in zip(in_order, served.get(key, []), strict=False):
            pairs.append((d["t_sent"], d["ttft_ms"], t_in, t_first))
    return split(pairs, first_wave)


def split(pairs: list[tuple[float, float, float, float]], first_wave: int) -> dict[str, list[float]]:
    """(t_sent, ttft_ms, the simulator's handler start, its first write) per request -> the error
    and its parts in ms; `after`: the error of the requests sent after the first `first_wave` (the
    run's first wave, every connection opened and every body sent at once)."""
    out: dict[str, list[float]] = {"error": [], "there": [], "back": [], "after": []}
    sends = sorted(p[0] for p in pairs)
    out["wave"] = [(sends[min(first_wave, len(sends)) - 1] - sends[0]) * 1000.0] if sends else []
    for rank, (t_sent, ttft, t_in, t_first) in enumerate(sorted(pairs)):
        error = ttft - (t_first - t_in) * 1000.0
        out["error"].append(error)
        out["there"].append((t_in - t_sent) * 1000.0)
        out["back"].append((t_sent - t_first) * 1000.0 + ttft)
        if rank >= first_wave:
            out["after"].append(error)
    return out


def prompts_file(tmp: Path, tokens: int) -> Path:
    """20 distinct prompts of `tokens` tokens (4 characters a token), one JSON line each."""
    sys.path.insert(0, str(ROOT))
    from oxconsole.workload.prompts.synthtext import synthetic_text

    path = tmp / "long.jsonl"
    with path.open("w") as f:
        for i in range(20):
            f.write(json.dumps({"id": f"long-{i}", "prompt": synthetic_text(11, i, tokens)}) + "\n")
    return path


def workload(tmp: Path, url: str, args: argparse.Namespace, case: str) -> Path:
    n = args.requests
    if case == "file":
        prompts = f'file = "{prompts_file(tmp, args.tokens)}"\nrepeat = {-(-n // 20)}'
    else:
        tokens = 100 if case == "short" else args.tokens
        prompts = f"synthetic = {{ count = {n}, input_tokens = {tokens}, output_tokens = 16 }}"
    wl = tmp / f"{case}.toml"
    wl.write_text(
        f"""
name = "long-{case}"
[run]
concurrency = {args.concurrency}
requests = {n}
timeout = "60s"
[output]
results = "{tmp / (case + ".jsonl")}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "m"
max_tokens = 16
[prompts]
{prompts}
"""
    )
    return wl


def run_case(tmp: Path, url: str, args: argparse.Namespace, case: str) -> dict[str, Any]:
    wl = workload(tmp, url, args, case)
    summary = tmp / f"{case}.summary.json"
    cmd = [sys.executable, "-c", WRAP, str(wl), "--headless", "--summary-json", str(summary)]
    cmd += ["--progress-interval", "1000"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    try:
        meta = json.loads(p.stderr.strip().splitlines()[-1])
        s = json.loads(summary.read_text())
    except (IndexError, ValueError, OSError):
        raise SystemExit(f"{case}: the run failed:\n{p.stderr[-3000:]}") from None
    parts = errors(wl, tmp / f"{case}.jsonl", sim_get(url, "/sim/trace"), args.concurrency)
    (tmp / f"{case}.jsonl").unlink(missing_ok=True)
    return {
        "matched": len(parts["error"]),
        **{f"{k}_{q}": pct(v, q) if v else math.nan for k, v in parts.items() for q in (50, 99)},
        "ok": s["requests"]["ok"],
        "req_s": s["throughput"]["requests_per_s"],
        "cpu_ms_per_req": meta["cpu_s"] * 1000 / args.requests,
        "ttft_p50": s["ttft_ms"]["p50"],
        "ttft_p99": s["ttft_ms"]["p99"],
    }


def run_floor(url: str, args: argparse.Namespace) -> dict[str, Any]:
    """The `floor` case: N pre-encoded synthetic bodies by a bare aiohttp client, 16 in flight;
    its TTFT is the first chunk with content in it, as oxconsole's, and its connections are open
    before the first send, as oxconsole's."""
    import aiohttp
    import orjson
    import uvloop
    import yarl

    sys.path.insert(0, str(ROOT))
    from oxconsole.sim.routes import trace_key
    from oxconsole.workload.prompts.synthtext import synthetic_text

    texts = [synthetic_text(11, i, args.tokens) for i in range(args.requests)]

    def body(text: str) -> bytes:
        msgs = [{"role": "user", "content": text}]
        return orjson.dumps({"model": "m", "messages": msgs, "max_tokens": 16, "stream": True})

    bodies = [body(t) for t in texts]
    recs: list[dict[str, Any]] = []

    async def one(session: aiohttp.ClientSession, gate: asyncio.Semaphore, i: int) -> None:
        async with gate:
            t_sent, t0 = time.time(), time.perf_counter()
            async with session.post(url + "/chat/completions", data=bodies[i]) as r:
                ttft = math.nan
                async for line in r.content:  # the first token: a chunk with content
                    if math.isnan(ttft) and b'"content":"' in line and b'"content":""' not in line:
                        ttft = (time.perf_counter() - t0) * 1000.0
            recs.append({"key": trace_key(texts[i]), "t_sent": t_sent, "ttft_ms": ttft})

    async def go() -> None:
        gate = asyncio.Semaphore(args.concurrency)
        async with aiohttp.ClientSession() as session:
            # Its connections opened first, as oxconsole opens a run's before its clock.
            assert session.connector is not None
            req = aiohttp.ClientRequest("POST", yarl.URL(url), loop=asyncio.get_running_loop())
            timeout = aiohttp.ClientTimeout(sock_connect=5)
            conns = [session.connector.connect(req, [], timeout) for _ in range(args.concurrency)]
            for conn in await asyncio.gather(*conns):
                conn.release()
            await asyncio.gather(*(one(session, gate, i) for i in range(args.requests)))

    c0, w0 = time.process_time(), time.perf_counter()
    uvloop.run(go())
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    served = {t[0]: t for t in sim_get(url, "/sim/trace")}
    pairs = []
    for d in recs:
        _, t_in, _admit, t_first, _end = served[d["key"]]
        pairs.append((d["t_sent"], d["ttft_ms"], t_in, t_first))
    parts = split(pairs, args.concurrency)
    ttfts = [d["ttft_ms"] for d in recs]
    return {
        "ok": len(recs),
        "req_s": len(recs) / wall,
        "cpu_ms_per_req": cpu * 1000 / args.requests,
        "ttft_p50": pct(ttfts, 50),
        "ttft_p99": pct(ttfts, 99),
        "matched": len(parts["error"]),
        **{f"{k}_{q}": pct(v, q) for k, v in parts.items() for q in (50, 99)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=250_000)
    ap.add_argument("--cases", default="short,synthetic,file,floor")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as td:
        for case in cases:
            proc, url = start_sim()  # one a case: its own figures of reading the bodies
            try:
                if case == "floor":
                    out[case] = r = run_floor(url, args)
                else:
                    out[case] = r = run_case(Path(td), url, args, case)
                st = sim_get(url)
                r["read_p50"], r["read_p99"] = st["read_ms"]["p50"], st["read_ms"]["p99"]
                r["late_p99"] = st["lateness_ms"]["first"]["p99"]
            finally:
                proc.terminate()
                proc.wait(5)
            print(
                f"{case:10s} {r['req_s']:7.1f} req/s  {r['cpu_ms_per_req']:7.2f} ms CPU/req  "
                f"TTFT p50 {r['ttft_p50']:7.1f} p99 {r['ttft_p99']:7.1f} ms  "
                f"ok={r['ok']}/{args.requests}",
                file=sys.stderr,
            )
    print(
        f"\nlong prompts: {args.tokens}-token prompts vs 100-token ones, {args.requests} requests at "
        f"{args.concurrency} in flight, true TTFT {TTFT_MS:.0f} ms, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores"
    )
    print(
        f"{'case':<11}{'req/s':>8}{'CPU ms/req':>12}{'TTFT p50':>10}{'TTFT p99':>10}{'p99-100':>9}"
        f"{'error p50/p99':>15}{'after p99':>11}{'there p99':>11}{'back p99':>10}{'sim read p50/p99':>18}"
        f"{'sim late p99':>14}{'wave':>7}"
    )
    for case, r in out.items():
        print(
            f"{case:<11}{r['req_s']:>8.1f}{r['cpu_ms_per_req']:>12.2f}{r['ttft_p50']:>10.1f}"
            f"{r['ttft_p99']:>10.1f}{r['ttft_p99'] - TTFT_MS:>9.1f}"
            f"{r['error_50']:>8.1f} /{r['error_99']:>5.1f}{r['after_99']:>11.1f}{r['there_99']:>11.1f}"
            f"{r['back_99']:>10.1f}"
            f"{r['read_p50']:>11.1f} /{r['read_p99']:>5.1f}{r['late_p99']:>14.1f}{r['wave_50']:>7.1f}"
        )
    print(
        "(error: our TTFT minus the simulator's own for the same request, from its handler's start to"
        " its first write; after: the error of the requests after the first wave (the first"
        " `concurrency` sent); there: our attempt's start to its handler; back: its write to our stamp."
        " sim read: its time from a request's headers to its body read and parsed, before admission;"
        " its ttft starts after it. sim late: its first writes against their schedule. wave: from the"
        " first send to the first wave's last, ms.)"
    )
    if "short" in out:
        for case in (c for c in out if c not in ("short", "floor")):
            extra = out[case]["cpu_ms_per_req"] - out["short"]["cpu_ms_per_req"]
            err, after = out[case]["error_99"], out[case]["after_99"]
            floor = f", a bare aiohttp client's {out['floor']['error_99']:+.1f}" if "floor" in out else ""
            print(
                f"{case}: {extra:+.2f} ms CPU a request over 100-token prompts (target <= 5), "
                f"TTFT error p99 {err:+.1f} ms against the simulator's own figure (target <= 20{floor}; "
                f"after the first wave {after:+.1f}; {out[case]['matched']} requests matched)"
            )


if __name__ == "__main__":
    main()
