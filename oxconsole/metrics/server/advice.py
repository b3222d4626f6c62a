"""The one warning a run gives when a server's metrics cannot be read: what answered, what it needs.

Why this module exists: most servers serve no metrics until told to (`llama-server --metrics`,
SGLang `--enable-metrics`), some serve them elsewhere (Triton on port 8002, trtllm-serve at
`/prometheus/metrics`), and some answer text with no engine's figures (vLLM started with
`--disable-log-stats`). A person reading the warning at the start of a run should learn, in one
line, the URL, what it answered and the flag to add, or how to stop asking (`"off"`). The run
itself never waits for any of it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["NO_ENGINE", "advice", "warning"]

NO_ENGINE: Final = "Prometheus text without any engine's metrics"
"""What a server answered when its text carries no engine's names (the reading's engine "unknown")."""

_FLAGS: Final = "llama-server needs --metrics, SGLang --enable-metrics"


def advice(answered: str) -> str:
    """What the engine behind a URL that answered `answered` (a failure's reason, or `NO_ENGINE`)
    probably needs."""
    a = answered.lower()
    if "--metrics" in a or a.startswith("http 501"):
        return "llama-server serves metrics only when started with --metrics"
    if a.startswith("http 404"):
        return (
            f"{_FLAGS}; Triton serves them on port 8002, trtllm-serve at /prometheus/metrics, "
            "a DCGM exporter on port 9400"
        )
    if a.startswith(("http 401", "http 403")):
        return "the metrics URL wants credentials the endpoint's key is not sent with (another origin?)"
    if "refused" in a or "cannot connect" in a:
        return "nothing listens there: Triton serves its metrics on port 8002, a DCGM exporter on 9400"
    if "json" in a:
        return (
            "trtllm-serve serves Prometheus text at /prometheus/metrics "
            "(with enable_iter_perf_stats and return_perf_metrics)"
        )
    if answered == NO_ENGINE:
        return (
            "vLLM started with --disable-log-stats or --api-server-count > 1 shows no engine figures; "
            f"{_FLAGS}"
        )
    return f"point server_metrics at the engine's metrics URL ({_FLAGS})"


def warning(endpoint: str, failures: list[tuple[str, str]], of: int) -> str:
    """The start-of-run warning for `endpoint` whose URLs `failures` ((url, what it answered))
    gave nothing usable, `of` URLs in all."""
    key = f"endpoints.{endpoint}.server_metrics"
    first_url, first = failures[0]
    some = f" ({len(failures)} of {of} URLs; the others are read)" if of > 1 and len(failures) < of else ""
    more = "" if len(failures) == 1 else f"; {len(failures) - 1} more URL(s) likewise"
    lost = "no server figures for this endpoint" if len(failures) == of else "its figures lack these replicas"
    return (
        f"{key}: {first_url} answered {first}{some}{more}: {lost}; {advice(first)} "
        f'(server_metrics = "off" stops asking)'
    )
