"""`run.concurrency = "auto"` and `run.concurrency_max`: reading them, and what auto needs around it.

Why this module exists: adaptive concurrency changes what `run.concurrency` may hold (an integer or
"auto") and needs other sections to agree (an `[slo]` to meet, one engine process); both checks
live here so that `sections._parse_run` and `build_workload` each keep a one-line hook.
"""

from __future__ import annotations

from typing import Any

from oxconsole.workload import bounds as b
from oxconsole.workload.problems import Problems
from oxconsole.workload.values import Table

AUTO_START = 4
"""The limit an auto run starts from (then doubles each good round): the smallest round the
controller judges in one latency (`engine/drivers/autosearch.py` MIN_ROUND)."""
AUTO_MAX = 1024
"""`run.concurrency_max` when absent (the contract's default)."""


def parse_concurrency(t: Table, default: int) -> tuple[int, bool, int]:
    """`run.concurrency` and `run.concurrency_max` as (starting limit, auto, max). With "auto" the
    starting limit is `AUTO_START` (at most the max); otherwise the integer, as before."""
    cmax = t.int_(
        "concurrency_max", AUTO_MAX, 1, b.MAX_CONCURRENCY, " (the most requests in flight auto may set)"
    )
    v = t.data.get("concurrency")
    if isinstance(v, str) and v == "auto":
        return min(AUTO_START, cmax), True, cmax
    # A fixed concurrency may have a max too: the console's `a` turns auto on mid-run.
    return t.int_("concurrency", default, 1, b.MAX_CONCURRENCY, " (requests in flight)"), False, cmax


def check_auto(errs: Problems, raw: dict[str, Any], auto: bool, workers: int | str) -> None:
    """What "auto" needs from the rest of the document: an `[slo]` table (the limit it looks for is
    the highest meeting it), and one engine process (`run.workers = 1`)."""
    if not auto:
        return
    if raw.get("slo") is None:
        errs.add(
            "run.concurrency",
            '"auto" together with an [slo] table (auto holds the highest concurrency meeting [slo])',
            '"auto" and no [slo]',
        )
    if workers != 1:
        shown = f'"{workers}"' if isinstance(workers, str) else str(workers)
        errs.add(
            "run.workers",
            '1 with run.concurrency = "auto" (one engine judges every request; workers > 1 cannot run auto)',
            shown,
        )
