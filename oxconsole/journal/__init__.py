"""What a run leaves on disk: per-request records, the JSONL journal and the manifest `--resume` checks.

Below the engine and the metrics, above the workload: the engine writes records here, `report`
and `--resume` read them back, and nothing here knows how requests are sent.
"""
