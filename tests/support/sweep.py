"""The sweep tests' workload (tests/sweep, and the console's and report's sweep tests): a
simulator whose capacity and time to answer the test chooses, so the knee is where the test
puts it; and the journal it leaves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.workloads import Sets, write_workload


def write(folder: Path, *, capacity: int = 4, ttft: str = "50ms", sets: Sets | None = None) -> Path:
    """The sweeps' workload as folder/w.toml: 50 prompts at 4 in flight, each answered whole
    `ttft` after admission, `capacity` at once; then `sets`."""
    sweep: Sets = {
        "name": "sw",
        "run": {"concurrency": 4, "timeout": "20s", "grace": "5s"},
        "output.results": "out/results.jsonl",
        "prompts.synthetic": {"count": 50, "input_tokens": 5, "output_tokens": 8},
        "sim.models.m": {
            "ttft": ttft,
            "tokens_per_s": 0,
            "output_tokens": 8,
            "capacity": capacity,
            "jitter": 0,
        },
    }
    return write_workload("sim_short", folder, {**sweep, **(sets or {})}, file="w.toml")


def records(folder: Path) -> list[dict[str, Any]]:
    """The journal of a sweep written by `write` (folder/out/results.jsonl), in file order."""
    text = (folder / "out" / "results.jsonl").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]
