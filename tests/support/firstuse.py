"""What the first-use tests (tests/cli/test_first_use.py, tests/ui/test_first_use_console.py) share:
the hint a base_url without /v1 earns, a record with an error class and detail, and the workload
of a run against such a base_url."""

from __future__ import annotations

from pathlib import Path

from oxconsole.journal.records import RequestRecord
from tests.support.workloads import Sets, write_workload

HINT = "missing /v1?"
"""What an HTTP 404 from a base_url without /v1 adds to its detail."""


def rec(i: int, cls: str | None = None, detail: str | None = None, **kw: object) -> RequestRecord:
    """Request `i` of model "m", sent at t = 1000 + i: ok in 50 ms, or failed with error class
    `cls` and `detail`."""
    return RequestRecord(
        id=f"r{i}",
        model="m",
        endpoint="default",
        status="error" if cls else "ok",
        attempts=1,
        t_scheduled=1000.0 + i,
        t_sent=1000.0 + i,
        queue_ms=1.0,
        latency_ms=None if cls else 50.0,
        error=cls,
        error_detail=detail,
        **kw,  # type: ignore[arg-type]
    )


def no_v1(tmp_path: Path, results: Path, base_url: str, sets: Sets | None = None) -> Path:
    """tmp_path/w.toml: 12 requests of one model at `base_url` (a server's address without its
    /v1, to fail fast), journaled to `results`; then `sets`."""
    return write_workload(
        "sim_instant",
        tmp_path,
        {
            "name": "no-v1",
            "output.results": str(results),
            "endpoints.default.base_url": base_url,
            "models.0.max_tokens": 8,
            "prompts": {"synthetic": {"count": 12, "input_tokens": 8, "output_tokens": 4}},
            "sim": None,
            **(sets or {}),
        },
        file="w.toml",
    )
