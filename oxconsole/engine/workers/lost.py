"""What a run says of a shard it lost (a worker process killed, a Ray actor gone).

Why this module exists: a shard that dies takes with it the requests it had in flight and the
rest of its share of the prompts; the run goes on with the others. The coordinator must say what
was lost, in numbers, where the user reads the end of the run, and that `--resume` sends it (the
end of the run gives the command: `runprep.end_notes`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["lost_share"]


def lost_share(who: str, share: int | None, finished: int, gauges: dict[str, Any] | None) -> str:
    """The warning for a lost shard: `who` (which one, and how it ended), how many of its `share`
    of requests came back (`finished`), how many were in flight at its last word (`gauges`)."""
    in_flight = int((gauges or {}).get("in_flight", 0))
    if share is None:
        what = f"{finished:,} of its requests came back, the {in_flight:,} in flight at its last report"
        what += " and the rest of its share were not"
    else:
        what = (
            f"{max(0, share - finished):,} of its {share:,} requests were lost ({finished:,} came back; "
            f"{in_flight:,} were in flight at its last report, the rest never sent)"
        )
    return f"{who}: {what}; they are not in the journal and --resume sends them"
