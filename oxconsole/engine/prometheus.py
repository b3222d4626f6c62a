"""`/metrics` for Prometheus while a run lasts, served from the engine's published snapshots.

Why this module exists: k6 and Locust users watch a load test in Grafana; `[output] prometheus =
"HOST:PORT"` (or `--prometheus`) serves the contract's metric names with `prometheus_client` (a
dependency: a run asked for metrics never goes on without them). Nothing is done per request: the
engine hands over its immutable snapshot each time it publishes one (every 250 ms), and the latency
histograms by model are copied from the collector on the engine's loop at that same publish
(a few buckets per model: well under a millisecond). The pair is kept as one value, so a scrape
reads counters, gauges and histograms of one moment (a histogram's count equals
`oxconsole_requests_total{status="ok"}` of its model). Before the first publish a scrape sees
zeros and the workload's own limits. The server binds to loopback unless an address is given (a
warning on 0.0.0.0, in any spelling) and is shut down, its port released, when the run ends. Labels
are model names and statuses: never a key, a header, or any text of a prompt or a response.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from oxconsole.base.figures import COST, EXPORTED, REQUESTS, TOKENS_OUT
from oxconsole.workload import Workload
from oxconsole.workload.values import every_interface

if TYPE_CHECKING:
    from oxconsole.metrics import Collector, LogHistogram, Snapshot

__all__ = ["BUCKETS_S", "MetricsEndpoint", "metrics_endpoint"]

BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Histogram bounds (seconds): ITL in the first few, TTFT and latency in the rest."""


_SHIFT = 4
"""LogHistogram keeps counts per group of 2**4 buckets (`sb`) beside each bucket's (`b`)."""

Hist = tuple[list[float], float, int]
"""Cumulative counts per bound of BUCKETS_S (then +Inf), the sum in seconds, the count."""


def metrics_endpoint(w: Workload, warnings: list[str]) -> MetricsEndpoint | None:
    """The endpoint `[output] prometheus` asks for, started; None when not asked or when it cannot
    start (then a warning says why: the run goes on without it)."""
    addr = w.output.prometheus_address()
    if addr is None:
        return None
    host, port = addr
    if every_interface(host):
        warnings.append(
            f"/metrics is served on every interface ({host}:{port}): anyone who can reach it sees it"
        )
    try:
        models = tuple(m.name for m in w.models)
        ep = MetricsEndpoint(host, port, models=models, concurrency=w.run.concurrency, rate=w.run.rate)
    except ImportError:
        warnings.append("[output] prometheus needs prometheus_client: pip install prometheus_client")
        return None
    except OSError as e:
        warnings.append(f"cannot serve /metrics on {host}:{port}: {e.strerror or e}")
        return None
    return ep


class MetricsEndpoint:
    """A `/metrics` HTTP server on its own thread; `publish` on the engine's loop, `close` at the end."""

    def __init__(
        self, host: str, port: int, *, models: tuple[str, ...] = (), concurrency: int = 0, rate: float = 0.0
    ) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # a Collector: anything with collect()
        self._now = Moment.before_start(models, concurrency, rate)
        """The newest publish with the histograms of the same moment: replaced whole, read whole."""
        self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self.server.server_address[1])

    def publish(self, snap: Snapshot, collector: Collector) -> None:
        """The engine published a snapshot (on its loop): keep it with the histograms copied now,
        before any other request is recorded, as one value."""
        hists = {
            model: {f.prometheus: to_buckets(st.hist(f.key)) for f in EXPORTED}
            for model, st in collector.models_stats().items()
        }
        g = snap.gauges
        rows = tuple((m.name, m.counts.ok, m.counts.error, m.output_tokens, m.cost) for m in snap.models)
        self._now = Moment(rows, (g.in_flight, g.concurrency, g.rate), hists)

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def collect(self) -> Iterator[Any]:
        """What a scrape sees (the server's thread): one moment, read once, immutable."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        now = self._now
        reqs, toks, cost = (
            CounterMetricFamily(f"oxconsole_{f.prometheus}", f.name, labels=labels)
            for f, labels in ((REQUESTS, ["model", "status"]), (TOKENS_OUT, ["model"]), (COST, ["model"]))
        )
        for name, ok, error, out, spent in now.models:
            reqs.add_metric([name, "ok"], ok)
            reqs.add_metric([name, "error"], error)
            toks.add_metric([name], out)
            cost.add_metric([name], spent)
        yield from (reqs, toks, cost)
        in_flight, concurrency, rate = now.gauges
        yield GaugeMetricFamily("oxconsole_in_flight", "requests in flight", value=in_flight)
        yield GaugeMetricFamily("oxconsole_concurrency_limit", "the concurrency limit", value=concurrency)
        yield GaugeMetricFamily("oxconsole_rate_limit", "requests/s limit (0 = none)", value=rate)
        bounds = [*(str(b) for b in BUCKETS_S), "+Inf"]
        for f in EXPORTED:
            h = HistogramMetricFamily(f"oxconsole_{f.prometheus}", f.name, labels=["model"])
            for model, per in now.hists.items():
                cum, total, _n = per[f.prometheus]
                h.add_metric([model], list(zip(bounds, cum, strict=True)), sum_value=total)
            yield h


@dataclass(frozen=True)
class Moment:
    """What one scrape shows: per model (name, ok, error, output tokens, cost), the gauges
    (in flight, concurrency limit, rate limit) and the histograms, all of one publish."""

    models: tuple[tuple[str, int, int, int, float], ...]
    gauges: tuple[float, float, float]
    hists: dict[str, dict[str, Hist]]

    @classmethod
    def before_start(cls, models: tuple[str, ...], concurrency: float, rate: float) -> Moment:
        """Nothing sent yet: zeros, and the workload's own limits."""
        empty: Hist = ([0.0] * (len(BUCKETS_S) + 1), 0.0, 0)
        return cls(
            tuple((m, 0, 0, 0, 0.0) for m in models),
            (0.0, concurrency, rate),
            {m: {f.prometheus: empty for f in EXPORTED} for m in models},
        )


def to_buckets(h: LogHistogram) -> Hist:
    """A histogram in ms as cumulative counts at BUCKETS_S (seconds). Bucket ``i`` of `LogHistogram`
    holds values in (gamma^(i-1), gamma^i], so all of it is <= a bound b when i <= log_gamma(b).
    Read from its groups of 16 buckets (whole groups below a bound, then the bound's own group):
    about a third of the time of walking every bucket (0.6 ms against 2 ms for 3,000 buckets)."""
    groups = sorted(h.sb.items())
    keys = [g for g, _ in groups]
    below = list(accumulate((c for _, c in groups), initial=h.zero))  # below[j]: zero + groups[:j]
    cum: list[float] = []
    ln_g = math.log(h.gamma)
    for b in BUCKETS_S:
        k = math.floor(math.log(b * 1000.0) / ln_g)  # the last bucket wholly <= b
        g = k >> _SHIFT
        j = bisect_left(keys, g)
        n = below[j]
        if j < len(keys) and keys[j] == g:
            n += sum(h.b.get(i, 0) for i in range(g << _SHIFT, k + 1))
        cum.append(float(n))
    cum.append(float(h.count))
    return cum, h.total / 1000.0, h.count
