"""How long to wait before an endpoint's next scrape.

Why this module exists: scraping must never slow a run, whatever the server answers. The
configured interval (`server_metrics_interval`, 1 s by default) holds while a scrape is cheap;
a scrape that cost more CPU than the budget allows stretches the wait (an 8 MiB exposition
costs ~170 ms to parse here, so it is read every 8.5 s instead of every second), and a URL that
keeps failing is asked less and less often, up to the contract's longest interval.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CPU_BUDGET", "MAX_INTERVAL_S", "next_interval"]

CPU_BUDGET: Final = 0.02
"""The share of one core scraping may take (the issue's bound: 2% at 1 Hz). A 200-series
exposition costs ~0.6 ms of CPU to parse and read (bench/scrape.py): 0.06% of a core at 1 Hz."""

MAX_INTERVAL_S: Final = 60.0
"""The contract's longest `server_metrics_interval`."""


def next_interval(configured_s: float, cost_s: float, failures: int = 0) -> float:
    """The wait before the next scrape: `configured_s`, long enough that a scrape costing `cost_s`
    of CPU stays within `CPU_BUDGET`, doubled for each consecutive failure (`failures`), never
    more than `MAX_INTERVAL_S` (nor less than `configured_s`)."""
    wait = max(configured_s, cost_s / CPU_BUDGET)
    if failures > 0:
        wait *= 2.0 ** min(failures, 16)
    return max(configured_s, min(wait, MAX_INTERVAL_S))
