"""Reasoning, cached prompts and tool calls in the figures: TTFOT percentiles, reasoning and cached
token counts, the cache hit rate, whole run, per model and per phase, and their live view.

Why this module exists: the summary, `oxconsole report` (a journal replayed), the snapshot and the
console must say the same of them; the counting is one `ReasoningStats` inside each `RunStats`
(`count`, O(1) a record), and the blocks it adds to a summary are made here. A run whose records
carry none of these keys adds nothing: the summary keeps its shape for models that do not reason
(`ttfot_ms` comes with every streamed answer, as it equals `ttft_ms` there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oxconsole.base.figures import CACHE_HIT_RATE, TTFOT, TTFT, has_reasoning, percent
from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.histogram import LogHistogram

__all__ = [
    "ReasoningLive",
    "ReasoningStats",
    "has_reasoning",
    "output_share",
    "reasoning_entry",
    "summary_lines",
]


class ReasoningStats:
    """Counts over records that carry `ttfot_ms`, `reasoning_tokens`, `cached_tokens` or
    `tool_calls`; `seen` is False until one does."""

    __slots__ = ("cached", "cached_seen", "ok_cached", "reasoning", "reasoning_seen", "tool_calls", "ttfot")

    def __init__(self) -> None:
        self.ttfot = LogHistogram()
        """TTFOT of ok requests, as the other timing histograms."""
        self.reasoning = 0
        self.reasoning_seen = 0
        """Records that carried `reasoning_tokens`."""
        self.cached = 0
        self.cached_seen = 0
        """Records that carried `cached_tokens` (the server reports its cache)."""
        self.ok_cached = 0
        """Cached tokens of ok requests: what a price plan bills at the cached price."""
        self.tool_calls = 0

    def count(self, rec: RequestRecord) -> None:
        ok = rec.status == "ok"
        if rec.ttfot_ms is not None and ok:
            self.ttfot.record(rec.ttfot_ms)
        r = rec.reasoning_tokens
        if r is not None:
            self.reasoning += r
            self.reasoning_seen += 1
        c = rec.cached_tokens
        if c is not None:
            self.cached += c
            self.cached_seen += 1
            if ok:
                self.ok_cached += c
        if rec.tool_calls:
            self.tool_calls += rec.tool_calls


def hit_rate(cached: int, input_tokens: int) -> float:
    """Cached over input tokens, as the summary keeps it."""
    return round(cached / input_tokens, 4) if input_tokens else 0.0


def reasoning_entry(st: ReasoningStats, input_tokens: int) -> dict[str, Any]:
    """What a summary block (whole run, a model, a phase) gains: `ttfot_ms` when any answer was
    timed, `tokens_extra` (to merge into its `tokens`: `reasoning`, `cached`, each when reported),
    `cache_hit_rate` when the server reported its cache, `tool_calls` when any came."""
    out: dict[str, Any] = {}
    if st.ttfot.n:
        out[TTFOT.key] = dict(st.ttfot.summary())
    if st.cached_seen:
        out[CACHE_HIT_RATE.key] = hit_rate(st.cached, input_tokens)
    if st.tool_calls:
        out["tool_calls"] = st.tool_calls
    return out


def token_counts(st: ReasoningStats) -> dict[str, int]:
    """`tokens.reasoning` and `tokens.cached`, each when some record carried it."""
    out: dict[str, int] = {}
    if st.reasoning_seen:
        out["reasoning"] = st.reasoning
    if st.cached_seen:
        out["cached"] = st.cached
    return out


def into(block: dict[str, Any], st: ReasoningStats, input_tokens: int) -> dict[str, Any]:
    """`block` with the reasoning figures added: `ttfot_ms` after `ttft_ms`, the token counts in
    its `tokens` (when it has one)."""
    extra = reasoning_entry(st, input_tokens)
    counts = token_counts(st)
    if not extra and not counts:
        return block
    out: dict[str, Any] = {}
    for k, v in block.items():
        out[k] = v
        if k == TTFT.key and TTFOT.key in extra:
            out[TTFOT.key] = extra.pop(TTFOT.key)
        if k == "tokens" and isinstance(v, dict):
            out[k] = {**v, **counts}
    if counts and "tokens" not in out:
        out["tokens"] = counts
    out.update(extra)
    return out


@dataclass(frozen=True, slots=True)
class ReasoningLive:
    """The console's view: the run's TTFOT, how much of its output was reasoning, the cache's
    hit rate (each None when not known)."""

    ttfot_p50: float | None
    ttfot_p99: float | None
    reasoning_share: float | None
    """Reasoning tokens over output tokens."""
    cache_hit_rate: float | None
    tool_calls: int = 0

    @classmethod
    def of(cls, st: ReasoningStats, input_tokens: int, output_tokens: int) -> ReasoningLive | None:
        """None when no record carried reasoning, cached tokens or tool calls (a plain run shows
        no line)."""
        if not (st.reasoning_seen or st.cached_seen or st.tool_calls):
            return None
        t = st.ttfot.summary() if st.ttfot.n else {}
        share = round(st.reasoning / output_tokens, 4) if st.reasoning_seen and output_tokens else None
        rate = hit_rate(st.cached, input_tokens) if st.cached_seen else None
        return cls(t.get("p50"), t.get("p99"), share, rate, st.tool_calls)

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> ReasoningLive | None:
        """A finished run's figures as its summary keeps them (None when it has none)."""
        tokens = summary.get("tokens")
        if not isinstance(tokens, Mapping) or not has_reasoning(summary):
            return None
        t = TTFOT.of(summary) or {}
        out = tokens.get("output") or 0
        r = tokens.get("reasoning")
        d = {
            "ttfot_p50": t.get("p50") if isinstance(t, Mapping) else None,
            "ttfot_p99": t.get("p99") if isinstance(t, Mapping) else None,
            "reasoning_share": round(r / out, 4) if isinstance(r, int) and out else None,
            "cache_hit_rate": CACHE_HIT_RATE.of(summary),
            "tool_calls": summary.get("tool_calls"),
        }
        return cls.from_dict(d)

    @classmethod
    def from_dict(cls, d: Any) -> ReasoningLive | None:
        if not isinstance(d, Mapping):
            return None

        def num(k: str) -> float | None:
            v = d.get(k)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        calls = d.get("tool_calls")
        return cls(
            num("ttfot_p50"),
            num("ttfot_p99"),
            num("reasoning_share"),
            num("cache_hit_rate"),
            calls if type(calls) is int else 0,
        )


def output_share(s: Mapping[str, Any]) -> float | None:
    """Reasoning over output tokens in a summary block; None when not counted."""
    tokens = s.get("tokens") or {}
    r, out = tokens.get("reasoning"), tokens.get("output")
    return r / out if isinstance(r, int) and isinstance(out, int) and out else None


def summary_lines(s: Mapping[str, Any]) -> list[str]:
    """The text summary's line under the tokens (none without reasoning or a cache):
    `reasoning 1,200 (60.0% of output)  cached 9,000 (hit 71.5%)  tool calls 3`."""
    if not has_reasoning(s):
        return []
    tokens = s.get("tokens") or {}
    parts = []
    if "reasoning" in tokens:
        parts.append(f"reasoning {tokens['reasoning']:,} ({percent(output_share(s))} of output)")
    if "cached" in tokens:
        parts.append(f"cached {tokens['cached']:,} (hit {percent(CACHE_HIT_RATE.value(s))})")
    if s.get("tool_calls"):
        parts.append(f"tool calls {s['tool_calls']:,}")
    return ["          " + "  ".join(parts)]
