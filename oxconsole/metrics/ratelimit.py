"""The run's provider rate limits, from its shards' figures: the live gauge and the summary's `ratelimit`.

Why this module exists: each shard (`engine/headroom.py`) sees the `x-ratelimit-*` headers of its
own answers; the run has one figure per endpoint. Shards' states are merged here: the limits and
the latest remaining figures from the shard that heard most recently, the lowest remaining of
all, the waits and their seconds summed. The same merge serves the snapshot (a worker's gauges) and
the summary (each shard's end), so a run with workers or Ray shows what a run in one process does.

The summary's `ratelimit` (absent when no endpoint sent such headers), per endpoint:
`{"limit_requests", "limit_tokens", "remaining_requests_min", "remaining_tokens_min", "waits",
"wait_s"}`; a limit never stated is null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["LATEST", "SUMMARY_KEYS", "merge", "summary"]

SUMMARY_KEYS = (
    "limit_requests",
    "limit_tokens",
    "remaining_requests_min",
    "remaining_tokens_min",
    "waits",
    "wait_s",
)
"""Each endpoint's figures in the summary's `ratelimit`, in order."""

LATEST = (
    "limit_requests",
    "limit_tokens",
    "remaining_requests",
    "remaining_tokens",
    "reset_requests_s",
    "reset_tokens_s",
)
"""Figures taken from the shard that heard last (the others are merged across shards)."""

State = Mapping[str, Mapping[str, Any]]


def merge(states: Iterable[State | None]) -> dict[str, dict[str, Any]]:
    """Endpoint -> its figures over every shard's state (each `Headroom.state` by endpoint)."""
    out: dict[str, dict[str, Any]] = {}
    for state in states:
        for name, s in (state or {}).items():
            cur = out.get(name)
            if cur is None:
                out[name] = dict(s)
                continue
            if float(s.get("seen_at") or 0.0) > float(cur.get("seen_at") or 0.0):
                for k in (*LATEST, "seen_at"):
                    cur[k] = s.get(k)
            for k in ("remaining_requests_min", "remaining_tokens_min"):
                vals = [v for v in (cur.get(k), s.get(k)) if v is not None]
                cur[k] = min(vals) if vals else None
            cur["waits"] = int(cur.get("waits") or 0) + int(s.get("waits") or 0)
            cur["wait_s"] = round(float(cur.get("wait_s") or 0.0) + float(s.get("wait_s") or 0.0), 3)
            cur["waiting"] = int(cur.get("waiting") or 0) + int(s.get("waiting") or 0)
    return out


def summary(states: Iterable[State | None]) -> dict[str, dict[str, Any]] | None:
    """The summary's `ratelimit`: per endpoint, `SUMMARY_KEYS`; None when no shard heard any."""
    merged = merge(states)
    if not merged:
        return None
    return {name: {k: s.get(k) for k in SUMMARY_KEYS} for name, s in sorted(merged.items())}


def ratelimit_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary table's lines for `ratelimit` (none without it): per endpoint, each limit with
    the lowest remaining seen, and the waits for a reset."""
    rl = summary.get("ratelimit")
    if not isinstance(rl, Mapping):
        return []
    out = ["rate limits (the provider's x-ratelimit-* headers)"]
    for name, s in rl.items():
        if not isinstance(s, Mapping):
            continue
        parts = []
        for kind in ("requests", "tokens"):
            limit, low = s.get(f"limit_{kind}"), s.get(f"remaining_{kind}_min")
            if limit is not None or low is not None:
                parts.append(f"{kind} {_n(limit)}, lowest left {_n(low)}")
        waits = int(s.get("waits") or 0)
        if waits:
            parts.append(
                f"{waits:,} wait{'s' if waits != 1 else ''} for a reset, {float(s.get('wait_s') or 0):.1f} s"
            )
        out.append(f"  {name}: " + " · ".join(parts))
    return out


def _n(v: Any) -> str:
    return "-" if v is None else f"{int(v):,}"
