"""The keys that say where a server's own metrics are: `[endpoints.X] server_metrics`,
`server_metrics_interval` and `[telemetry] dcgm`.

Why this module exists: the server's side is read from URLs the user may write wrong in several
ways (a word that is neither "auto" nor "off", a URL without a scheme, an empty list, an interval
the contract does not allow), and every mistake must be named in TOML words before anything is
sent; these rules are shared by the endpoints' table and the telemetry table.
"""

from __future__ import annotations

import re
from typing import Any, Final

from oxconsole.workload.problems import Problems, join_key
from oxconsole.workload.schema import TelemetryConfig, toml_keys
from oxconsole.workload.values import Table, fmt_duration, parse_duration

__all__ = [
    "INTERVAL_MAX_S",
    "INTERVAL_MIN_S",
    "MAX_URLS",
    "parse_telemetry",
    "server_metrics",
    "server_metrics_interval",
]

INTERVAL_MIN_S: Final = 0.25
INTERVAL_MAX_S: Final = 60.0
"""The contract's bounds of `server_metrics_interval`."""
MAX_URLS: Final = 64
"""The most URLs one key lists (replicas behind an endpoint, DCGM exporters): each is scraped every
interval, so a longer list is more likely a mistake than a deployment."""

_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?")
_WORDS: Final = ("auto", "off")
_TELEMETRY: Final = toml_keys(TelemetryConfig)


def _urls(t: Table, key: str, value: Any, words: tuple[str, ...]) -> tuple[str, ...] | None:
    """A URL or a non-empty list of them; None (the error recorded) otherwise."""
    said = " | ".join(f'"{w}"' for w in words)
    expected = (f"{said}, " if said else "") + 'an http(s):// URL or a list of them ("http://h:8000/metrics")'
    if isinstance(value, str):
        if _URL.fullmatch(value):
            return (value,)
        t.fail(key, expected)
        return None
    if not isinstance(value, list) or not value:
        t.fail(key, expected)
        return None
    if len(value) > MAX_URLS:
        t.fail(key, f"at most {MAX_URLS} URLs")
        return None
    out: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, str) and _URL.fullmatch(item):
            out.append(item)
        else:
            t.errs.bad(join_key(t.p(key), i), 'an http(s):// URL ("http://h:8000/metrics")', item)
    return tuple(dict.fromkeys(out)) if len(out) == len(value) else None


def server_metrics(t: Table) -> str | tuple[str, ...]:
    """`server_metrics`: "auto" (the default), "off", a URL or a list of URLs (replicas)."""
    if not t.has("server_metrics"):
        return "auto"
    v = t.data["server_metrics"]
    if v in _WORDS and isinstance(v, str):
        return v
    urls = _urls(t, "server_metrics", v, _WORDS)
    return "auto" if urls is None else urls


def server_metrics_interval(t: Table) -> float:
    """`server_metrics_interval`: a duration from 0.25 s to 60 s (default 1 s)."""
    if not t.has("server_metrics_interval"):
        return 1.0
    s = parse_duration(t.data["server_metrics_interval"])
    if s is None or not INTERVAL_MIN_S <= s <= INTERVAL_MAX_S:
        lo, hi = fmt_duration(INTERVAL_MIN_S), fmt_duration(INTERVAL_MAX_S)
        t.fail("server_metrics_interval", f'a duration from {lo} to {hi} (such as "1s")')
        return 1.0
    return s


def parse_telemetry(errs: Problems, data: Any) -> TelemetryConfig:
    """`[telemetry]`: `dcgm`, a DCGM exporter's URL or a list of them (none by default)."""
    if data is None:
        return TelemetryConfig()
    t = Table(errs, data, "telemetry", _TELEMETRY, "[telemetry]")
    if t.broken or not t.has("dcgm"):
        return TelemetryConfig()
    urls = _urls(t, "dcgm", t.data["dcgm"], ())
    return TelemetryConfig(dcgm=urls or ())
