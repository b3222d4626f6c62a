"""Tasks per second with `[packing] size = 8` against `size = 1`, same concurrency, same simulator.

Each run is `oxconsole W.toml --headless` in its own process, against the embedded simulator
(`base_url = "sim"`), on a prompts file of distinct tasks. A task's answer is short (the
classification and extraction work packing is for), so what a request costs is mostly its time to
first token: the per-request overhead packing amortises. Printed per profile: tasks/s, HTTP
requests/s, p50 latency per request, cost per task under request-based pricing, and the ratio
size 8 / size 1 (the target is >= 5x). Every record is checked to hold its own task's answer
(the simulator's section for a task starts by echoing that task's words).

    python bench/bench_packing.py [--tasks 4000] [--concurrency 32] [--sizes 1,8]

Profiles: "ttft-bound" (ttft 300 ms, 1000 tokens/s, 8 tokens a task) and "decode-heavy" (ttft
300 ms, 100 tokens/s, 8 tokens a task), where a pack's longer answer eats part of the gain.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROFILES = {
    "ttft-bound": {"ttft": "300ms", "tokens_per_s": 1000.0},
    "decode-heavy": {"ttft": "300ms", "tokens_per_s": 100.0},
}

WL = """
name = "bench-packing"
[run]
concurrency = {concurrency}
seed = 1
[output]
results = "{results}"
[endpoints.default]
base_url = "sim"
max_connections = 1000
[[models]]
name = "m"
max_tokens = 8
price_per_request = 0.001
[prompts]
file = "{prompts}"
[packing]
size = {size}
[sim.models.m]
ttft = "{ttft}"
tokens_per_s = {tokens_per_s}
output_tokens = 8
capacity = 4096
jitter = 0
"""


def task_text(i: int) -> str:
    return f"classify item{i} colour{i % 7} shape{i % 11} please"


def one_run(folder: Path, tasks: int, concurrency: int, size: int, profile: dict[str, Any]) -> dict[str, Any]:
    prompts = folder / "prompts.jsonl"
    if not prompts.exists():
        prompts.write_text(
            "".join(json.dumps({"id": f"t{i}", "prompt": task_text(i)}) + "\n" for i in range(tasks))
        )
    results = folder / f"r{size}.jsonl"
    results.unlink(missing_ok=True)
    wl = folder / f"w{size}.toml"
    wl.write_text(WL.format(concurrency=concurrency, results=results, prompts=prompts, size=size, **profile))
    summary = folder / f"s{size}.json"
    cmd = [sys.executable, "-m", "oxconsole", str(wl), "--headless", "--summary-json", str(summary)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
    s = json.loads(summary.read_text())
    recs = [json.loads(x) for x in results.read_text().splitlines() if x.strip()]
    own = sum(1 for r in recs if r["status"] == "ok" and r.get("text", "").startswith(_echo(r["id"], size)))
    sent = s.get("packing", {}).get("requests_sent", s["requests"]["total"])
    dur = s["duration_s"]
    return {
        "size": size,
        "tasks": s["requests"]["ok"],
        "own_answers": own,
        "tasks_per_s": s["requests"]["ok"] / dur,
        "requests_per_s": sent / dur,
        "p50_latency_ms": s["latency_ms"]["p50"],
        "cost_per_task": s["cost"]["total"] / max(1, s["requests"]["total"]),
    }


def _echo(tid: str, size: int) -> str:
    """What the start of a task's own answer is: the echo of its words in a pack, any text alone."""
    return "Re: " + task_text(int(tid[1:])).split()[0] if size > 1 else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--profiles", default=",".join(PROFILES))
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"{args.tasks} tasks, concurrency {args.concurrency}")
    print(
        f"{'profile':<14}{'size':>5}{'tasks/s':>10}{'req/s':>9}{'p50 ms':>9}{'$/task':>10}{'own':>7}{'x':>7}"
    )
    for name in args.profiles.split(","):
        base = None
        with tempfile.TemporaryDirectory(prefix="bench-packing-") as tmp:
            for size in sizes:
                r = one_run(Path(tmp), args.tasks, args.concurrency, size, PROFILES[name])
                base = base or r["tasks_per_s"]
                own = "all" if r["own_answers"] == args.tasks else f"{r['own_answers']}"
                print(
                    f"{name:<14}{size:>5}{r['tasks_per_s']:>10.1f}{r['requests_per_s']:>9.1f}"
                    f"{r['p50_latency_ms']:>9.0f}{r['cost_per_task']:>10.6f}{own:>7}"
                    f"{r['tasks_per_s'] / base:>6.2f}x"
                )


if __name__ == "__main__":
    main()
