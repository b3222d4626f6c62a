"""What packing did to a run: HTTP requests sent for its tasks, and tasks re-sent alone.

Why this module exists: with `[packing]` the journal holds one record per task, so `requests`
counts tasks; the summary's `packing` block counts HTTP requests, rebuilt from the records alone
(live, from a journal, after `--resume`) in O(1) per record.
"""

from __future__ import annotations

from typing import Any

from oxconsole.base.units import fmt_money
from oxconsole.journal.records import RequestRecord

__all__ = ["PackCounts", "live_packing", "packing_block", "packing_lines"]


class PackCounts:
    """Counts over records: tasks sent in packs, the packs' share of requests, tasks re-sent alone."""

    __slots__ = ("largest", "pack_share", "packed", "repacked")

    def __init__(self) -> None:
        self.packed = 0
        """Records of tasks that went in a pack."""
        self.pack_share = 0.0
        """Sum of 1/pack_size over them: the packs sent (each of a pack's tasks is a share of it)."""
        self.repacked = 0
        """Tasks sent again alone after their pack's answer did not split."""
        self.largest = 0
        """The largest pack_size seen (the run's size, when a journal is all there is)."""

    def count(self, rec: RequestRecord) -> None:
        """One record that carries a pack id."""
        self.packed += 1
        self.pack_share += 1.0 / rec.pack_size
        if rec.repacked:
            self.repacked += 1
        if rec.pack_size > self.largest:
            self.largest = rec.pack_size

    def requests_sent(self, total: int) -> int:
        """HTTP requests for `total` records: one per task sent alone, one per pack, and one per
        task re-sent alone (retries are attempts, not requests)."""
        return total - self.packed + round(self.pack_share) + self.repacked


def packing_block(packs: PackCounts, total: int, size: int | None) -> dict[str, Any]:
    """`{"packing": {...}}` for the summary when packing is on (`size` > 1, or packs in the
    records when the size is not known), else nothing."""
    if size is None:
        size = packs.largest
    if size <= 1 and not packs.packed:
        return {}
    return {
        "packing": {
            "size": size,
            "requests_sent": packs.requests_sent(total),
            "repacked": packs.repacked,
        }
    }


def live_packing(packs: PackCounts, total: int, size: int) -> dict[str, float] | None:
    """The snapshot's `packing` figures (None when packing is off): the summary's block and the
    tasks it counts, for the console's tasks/s, requests/s and cost per task."""
    block = packing_block(packs, total, size).get("packing")
    return None if block is None else {**block, "tasks": total}


def packing_lines(summary: dict[str, Any]) -> list[str]:
    """The summary table's line for packing (none when it was off): HTTP requests behind the
    tasks, their rate, tasks re-sent alone, cost per task."""
    pk = summary.get("packing")
    if not isinstance(pk, dict):
        return []
    tasks = (summary.get("requests") or {}).get("total") or 0
    duration = summary.get("duration_s") or 0.0
    sent = pk.get("requests_sent", 0)
    rate = f"{sent / duration:,.2f}/s" if duration else "-"
    cost = (summary.get("cost") or {}).get("total") or 0.0
    per_task = fmt_money(cost / tasks) if tasks else "-"
    return [
        f"packing   size {pk.get('size')} · {sent:,} requests ({rate}) · "
        f"{pk.get('repacked', 0):,} repacked · {per_task} per task"
    ]
