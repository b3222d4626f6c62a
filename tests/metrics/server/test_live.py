"""The live gauge: the latest figures kept through a failed round, and "most of the last 10 s"."""

from __future__ import annotations

from oxconsole.metrics.server.live import QUEUE_WINDOW_S, LiveServer, fresh, queue_place
from oxconsole.metrics.server.parse import parse
from oxconsole.metrics.server.scrapes import Part, Scrape, read
from tests.support.expositions import vllm

URL = "http://h:8000/metrics"


def reading(t: float, body: bytes) -> Scrape:
    return Scrape(t, (Part(URL, parse(body)),))


def test_queued_share_is_over_the_window() -> None:
    live = LiveServer([URL])
    waits = [0, 0, 3, 4, 5, 0, 6, 7, 8, 9, 2, 1]  # one round a second
    for t, w in enumerate(waits):
        live.add(float(t), read(reading(float(t), vllm(waiting=w).encode())))
    now = float(len(waits) - 1)
    window = [w for t, w in enumerate(waits) if t >= now - QUEUE_WINDOW_S]
    expected = sum(1 for w in window if w > 0) / len(window)
    assert live.queued_share(now) == expected, (live.queued_share(now), window)
    assert live.queued_share(now + 60.0) is None  # nothing read in the last 10 s


def test_a_failed_round_keeps_the_figures_and_says_why() -> None:
    live = LiveServer([URL])
    live.add(1.0, read(reading(1.0, vllm(running=5, kv=0.95).encode())))
    live.add(2.0, read(reading(2.0, b"")))
    g = live.gauge(3.0)
    assert g["running"] == 5.0 and g["kv_usage"] == 0.95, g
    assert g["age_s"] == 2.0 and g["failed"] == [[URL, "empty answer"]], g
    assert (g["scrapes"], g["failed_scrapes"]) == (2, 1), g
    assert fresh(g)
    assert not fresh(live.gauge(30.0))
    assert not fresh({"url": URL})  # never read


def test_the_client_is_counted_as_the_round_was_read() -> None:
    """Four running when read, with four out: no queue. The run then ends (none out now): the
    round is still set against the four the client had out when it was read, not "4 others"."""
    live = LiveServer([URL])
    live.add(1.0, read(reading(1.0, vllm(running=4).encode())), 4)
    g = live.gauge(1.9)
    assert g["client_in_flight"] == 4 and queue_place(g, 0) == ("none", 0), g
    live.add(2.0, read(reading(2.0, vllm(running=3, waiting=0).encode())), 6)
    assert queue_place(live.gauge(2.1), 0) == ("transit", 3)
    live.add(3.0, read(reading(3.0, vllm(running=5).encode())), 2)
    assert queue_place(live.gauge(3.1), 0) == ("others", 3)
    unknown = LiveServer([URL])
    unknown.add(1.0, read(reading(1.0, vllm(running=4).encode())))
    assert "client_in_flight" not in unknown.gauge(1.5) and queue_place(unknown.gauge(1.5), 0) == ("none", 0)
