"""What a run says of a shard it lost (a worker process killed, a Ray actor gone).

Why this module exists: a shard that dies takes with it the requests it had in flight and the
rest of its share of the prompts; the run goes on with the others. The coordinator must say what
was lost, in numbers, where the user reads the end of the run, and that `--resume` sends it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lost_share"]


def lost_share(who: str, share: int | None, finished: int, gauges: dict[str, Any] | None) -> str:
    """The warning for a lost shard: `who` (which one, and how it ended), how many of its `share`
    of requests came back (`finished`), how many were in flight at its last word (`gauges`)."""
    in_flight = int((gauges or {}).get("in_flight", 0))
    if share is None:
        lost = f"{finished:,} of its requests came back, {in_flight:,} in flight were lost"
    else:
        left = max(0, share - finished)
        lost = (
            f"{left:,} of its {share:,} requests were not sent or not saved "
            f"({finished:,} came back, {in_flight:,} were in flight)"
        )
    return f"{who}: {lost}; its requests in flight are not in the journal: --resume sends them"
