"""What packing did to a run: HTTP requests sent for its tasks, and tasks re-sent alone.

Why this module exists: with `[packing]` the journal holds one record per task, so `requests`
counts tasks; the summary's `packing` block counts HTTP requests, rebuilt from the records alone
(live, from a journal, after `--resume`) in O(1) per record.
"""

from __future__ import annotations

from typing import Any

from oxconsole.journal.records import RequestRecord

__all__ = ["PackCounts", "packing_block"]


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
