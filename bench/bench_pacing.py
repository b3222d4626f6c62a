"""Pacing benchmark: does open-loop arrival send at the rate asked for, and are Poisson gaps exponential?

One zero-latency simulator on loopback (pinned to core 0 where `taskset` exists) and oxconsole
`--headless` pinned to core 1, as in `bench_client.py`. For each target rate, a `constant` arrival
run of a few seconds; the journal's `t_scheduled` (when each request was due) and `t_sent` (when
it left the client) give the rate the schedule asked for and the rate actually sent (least-squares
slope of send time against request number, and first-to-last span), against the contract's 1%.
Then a `poisson` run: the gaps between due times and between send times are tested against the
exponential distribution of the target rate with a Kolmogorov-Smirnov test (scipy when installed,
else the statistic computed here and its asymptotic p-value).

    python bench/bench_pacing.py [--rates 10,100,500,1000,2000] [--seconds 3] [--poisson-rate 200]
                                 [--server nginx] [--workers 2]

`--server nginx` answers with nginx (a recorded 16-chunk stream, see `bench_workers.py`) instead
of the simulator, and leaves oxconsole unpinned, so `--workers 2` (`run.workers`) has both cores:
what the high rates need once one core is not enough.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_client import ROOT, pin, start_server  # noqa: E402


def run(
    url: str, arrival: str, rate: float, n: int, tmp: Path, workers: int = 1, pinned: bool = True
) -> list[dict[str, float]]:
    results = tmp / f"{arrival}-{rate:g}.jsonl"
    wl = tmp / "pacing.toml"
    wl.write_text(
        f"""
name = "pacing"
[run]
arrival = "{arrival}"
rate = {rate}
concurrency = 1000
requests = {n}
timeout = "30s"
workers = {workers}
[output]
results = "{results}"
save_text = false
[endpoints.default]
base_url = "{url}"
[[models]]
name = "bench"
max_tokens = 16
[prompts]
items = ["pace me"]
"""
    )
    cmd = [
        *(pin(1) if pinned else []),
        sys.executable,
        "-m",
        "oxconsole",
        str(wl),
        "--headless",
        "--progress-interval",
        "1000",
    ]
    subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    recs = [orjson.loads(line) for line in results.read_bytes().splitlines() if line.strip()]
    return sorted(recs, key=lambda r: r["t_scheduled"])


def slope_rate(ts: list[float]) -> float:
    """Requests per second from the least-squares slope of time against request number."""
    n = len(ts)
    xm = (n - 1) / 2
    tm = statistics.fmean(ts)
    sxx = sum((i - xm) ** 2 for i in range(n))
    sxt = sum((i - xm) * (t - tm) for i, t in enumerate(ts))
    return sxx / sxt if sxt > 0 else math.inf


def ks_exponential(gaps: list[float], rate: float) -> tuple[float, float, str]:
    """KS statistic and p-value of `gaps` against Exp(rate) (rate given, not fitted)."""
    try:
        from scipy import stats  # type: ignore[import-not-found]
    except ImportError:
        xs = sorted(gaps)
        n = len(xs)
        d = 0.0
        for i, x in enumerate(xs):
            f = 1.0 - math.exp(-rate * x)
            d = max(d, f - i / n, (i + 1) / n - f)
        # Kolmogorov's asymptotic distribution, with Stephens' small-sample correction
        lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
        p = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
        return d, min(1.0, max(0.0, p)), "hand-written KS"
    r = stats.kstest(gaps, "expon", args=(0, 1.0 / rate))
    return float(r.statistic), float(r.pvalue), "scipy.stats.kstest"


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="10,100,500,1000,2000")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each constant-rate run")
    ap.add_argument("--poisson-rate", type=float, default=200.0)
    ap.add_argument("--poisson-requests", type=int, default=2000)
    ap.add_argument("--server", choices=("sim", "nginx"), default="sim")
    ap.add_argument("--workers", type=int, default=1, help="run.workers")
    args = ap.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    rows = []
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        if args.server == "nginx":
            from bench_workers import start_nginx

            proc, url = start_nginx(tmp, 16)
        else:
            proc, url = start_server(16)
        pinned = args.server == "sim"
        try:
            for rate in rates:
                n = max(20, int(rate * args.seconds))
                recs = run(url, "constant", rate, n, tmp, args.workers, pinned)
                ok = sum(r["status"] == "ok" for r in recs)
                sched = [r["t_scheduled"] for r in recs]
                sent = sorted(r["t_sent"] for r in recs)
                lag = [(r["t_sent"] - r["t_scheduled"]) * 1000 for r in recs]
                span = sent[-1] - sent[0]
                rows.append(
                    (
                        rate,
                        len(recs),
                        ok,
                        slope_rate(sched),
                        slope_rate(sent),
                        (len(sent) - 1) / span if span > 0 else math.inf,
                        statistics.median(lag),
                        pct(lag, 99),
                        max(lag),
                    )
                )
                print(f"constant {rate:g}/s: {len(recs)} records", file=sys.stderr)
            precs = run(url, "poisson", args.poisson_rate, args.poisson_requests, tmp, args.workers, pinned)
        finally:
            proc.terminate()
            proc.wait(5)

    print(
        f"pacing benchmark: {'zero-latency simulator' if args.server == 'sim' else 'nginx'}, "
        f"run.workers = {args.workers}, 16-chunk streams, {args.seconds:g} s per rate, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )
    print(
        f"{'target/s':>9}{'records':>9}{'ok':>7}{'scheduled/s':>13}{'sent/s':>10}{'sent/s span':>13}"
        f"{'error':>8}{'lag p50 ms':>12}{'p99 ms':>9}{'max ms':>9}  within 1%"
    )
    for rate, n, ok, sch, sent, span_rate, p50, p99, mx in rows:
        err = sent / rate - 1.0
        print(
            f"{rate:>9g}{n:>9d}{ok:>7d}{sch:>13.2f}{sent:>10.2f}{span_rate:>13.2f}{100 * err:>7.2f}%"
            f"{p50:>12.2f}{p99:>9.2f}{mx:>9.1f}  {'yes' if abs(err) <= 0.01 else 'NO'}"
        )
    due = [r["t_scheduled"] for r in precs]
    sent = sorted(r["t_sent"] for r in precs)
    for label, ts in (("due times (t_scheduled)", due), ("send times (t_sent)", sent)):
        gaps = [b - a for a, b in itertools.pairwise(ts)]
        d, p, how = ks_exponential(gaps, args.poisson_rate)
        mean = statistics.fmean(gaps)
        print(
            f"poisson {args.poisson_rate:g}/s, {len(gaps)} gaps of {label}: mean {1000 * mean:.3f} ms "
            f"(expected {1000 / args.poisson_rate:.3f}), KS D = {d:.4f}, p = {p:.3f} ({how})"
        )


if __name__ == "__main__":
    main()
