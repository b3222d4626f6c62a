"""Before a run's clock starts, each endpoint has the connections its first wave needs open, and
the first wave's prompts are read (`readahead.py`): the
first requests' TTFT holds no TCP (or TLS) handshake, as no later request on a kept-alive
connection does (docs/performance.md, "Long prompts").

A raw asyncio server on loopback counts the connections it accepts and when; it answers every
request on a connection (kept alive) with one non-streamed chat completion.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from oxconsole.engine.endpoints import CONNECT_AHEAD_MAX, connections_ahead, first_wave
from oxconsole.engine.readahead import ReadAhead
from oxconsole.engine.router import Router
from oxconsole.engine.send.client import EndpointClient, Refused
from oxconsole.workload import Prompt
from tests import support
from tests.support.http import needs_openssl, read_request, self_signed
from tests.support.workloads import load_workload

ANSWER = orjson.dumps(
    {"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
)
REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(ANSWER),
    ANSWER,
)


@dataclass
class Counted:
    url: str
    accepted: list[float] = field(default_factory=list)
    """time.time() of each connection's accept."""
    requests: int = 0


@asynccontextmanager
async def counting_server(tls: ssl.SSLContext | None = None) -> AsyncIterator[Counted]:
    """Yields its `Counted` (https when `tls` is given: accepts then count handshakes done)."""
    counted = Counted("")
    tasks: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counted.accepted.append(time.time())
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            while True:
                await read_request(reader)
                counted.requests += 1
                writer.write(REPLY)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    scheme = "https" if tls else "http"
    counted.url = f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        yield counted
    finally:
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.close()
        await server.wait_closed()


def test_a_run_opens_its_first_waves_connections_before_its_clock(tmp_path: Path) -> None:
    async def go() -> tuple[Counted, list[dict[str, object]]]:
        async with counting_server() as server:
            w = load_workload(
                "sim_short",
                tmp_path,
                {
                    "endpoints.default.base_url": server.url,
                    "endpoints.default.server_metrics": "off",  # its connections are not the run's
                    "run.stream": False,
                    "run.concurrency": 6,
                    "prompts.synthetic.count": 30,
                    "sim": None,
                },
            )
            out = await support.run(w)
            assert out.ok == 30, out
            return server, support.journal(w)

    server, records = asyncio.run(go())
    first_due = min(float(r["t_scheduled"]) for r in records)  # type: ignore[arg-type]
    late = [round(t - first_due, 4) for t in server.accepted if t >= first_due]
    # Six connections, all accepted before the first request was due; none opened during the run.
    assert len(server.accepted) == 6, (len(server.accepted), server.requests)
    assert not late, f"connections accepted after the clock started (s after the first due time): {late}"
    assert server.requests == 31  # and the run's GET /models, before its clock


def test_a_client_holds_at_most_its_pool_tops_it_up_and_says_a_refused_port() -> None:
    async def go() -> tuple[int, int, int, int, str]:
        async with counting_server() as server:
            c = EndpointClient("e", server.url, None, max_connections=3, timeout=5.0)
            await c.warm(5.0, ["/chat/completions"])
            try:
                first = await c.connect(10, 2.0)  # the pool holds 3
                again = await c.connect(3, 2.0)  # already open: none opened
                accepted = len(server.accepted)
                body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                res = await c.attempt(body, stream=False, timeout=5.0, save_text=False)
                assert res.ok, res
                after = len(server.accepted)
            finally:
                await c.close()
        refused = EndpointClient(
            "e", f"http://127.0.0.1:{support.free_port()}/v1", None, max_connections=4, timeout=5.0
        )
        await refused.warm(5.0, ["/chat/completions"])
        try:
            with pytest.raises(Refused) as info:  # nothing can be sent there: bad input (the engine's)
                await refused.connect(4, 2.0)
        finally:
            await refused.close()
        return first, again, accepted, after, str(info.value)

    first, again, accepted, after, why = asyncio.run(go())
    assert (first, again, accepted, after) == (3, 3, 3, 3), (first, again, accepted, after)
    assert why.startswith("connection refused at 127.0.0.1:"), why


@needs_openssl
def test_over_https_handshakes_are_done_ahead_and_a_refused_certificate_opens_none(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def go() -> tuple[int, int, int, int, bool]:
        async with counting_server(tls) as server:
            c = EndpointClient("e", server.url, None, max_connections=8, timeout=5.0, insecure=True)
            await c.warm(5.0, ["/chat/completions"])
            try:
                opened = await c.connect(2, 5.0)
                # The server counts a connection once its side of the handshake is done, which
                # (TLS 1.3) can be a moment after the client's.
                await support.until(lambda: len(server.accepted) >= 2, 5.0, "2 handshakes ahead")
                ahead = len(server.accepted)
                results = await asyncio.gather(
                    *(c.attempt(body, stream=False, timeout=5.0, save_text=False) for _ in range(2))
                )
                assert all(r.ok for r in results), results
                after = len(server.accepted)
            finally:
                await c.close()
            verifying = EndpointClient("e", server.url, None, max_connections=4, timeout=5.0)
            await verifying.warm(5.0, ["/chat/completions"])
            try:
                refused = await verifying.connect(4, 5.0)  # self-signed: the handshake fails
                res = await verifying.attempt(body, stream=False, timeout=5.0, save_text=False)
            finally:
                await verifying.close()
            return opened, ahead, after, refused, res.ok

    opened, ahead, after, refused, verified_ok = asyncio.run(go())
    assert (opened, ahead, after) == (2, 2, 2), (opened, ahead, after)
    assert refused == 0 and not verified_ok, (refused, verified_ok)


def test_connections_ahead_follow_the_traffic_the_rate_and_the_cap(tmp_path: Path) -> None:
    sets = {"endpoints.other.base_url": "sim", "models.1.endpoint": "other"}
    w = load_workload("two_models", tmp_path, sets)  # small (weight 3) on default, large (1) on other
    shares = Router(w.models, w.routing).shares()
    assert shares == {"small": 0.75, "large": 0.25}, shares
    assert connections_ahead(w, shares, first_wave(16, 0.0)) == {"default": 12, "other": 4}
    # A rate of 2 a second starts no more than 2 at once (each endpoint's share rounded up).
    assert connections_ahead(w, shares, first_wave(16, 2.0)) == {"default": 2, "other": 1}
    big = connections_ahead(w, shares, first_wave(10_000, 0.0))
    assert big == {"default": CONNECT_AHEAD_MAX * 3 // 4, "other": CONNECT_AHEAD_MAX // 4}, big

    router = Router(w.models, w.routing)
    router.set_cascade(["large", "small"])
    assert router.shares() == {"large": 1.0}
    assert connections_ahead(w, router.shares(), first_wave(16, 0.0)) == {"other": 16}
    router.set_weight("small", 0)
    router.set_cascade([])
    assert router.shares() == {"large": 1.0}


def test_read_ahead_holds_the_first_wave_then_serves_every_prompt_in_order() -> None:
    taken: list[str] = []

    def source(n: int, fail_at: int | None = None) -> Iterator[Prompt]:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"line {i}: bad")
            taken.append(f"p{i}")
            yield Prompt(f"p{i}", [{"role": "user", "content": "x"}], input_chars=1000)

    ahead = ReadAhead(source(10))
    assert ahead.fill(4) == 4
    assert taken == ["p0", "p1", "p2", "p3"]  # read before anything asks for them
    assert [p.id for p in ahead] == [f"p{i}" for i in range(10)]

    taken.clear()
    bounded = ReadAhead(source(10))
    assert bounded.fill(8, chars=2500) == 3  # stops once 2,500 characters are read
    assert len(taken) == 3

    failing = ReadAhead(source(10, fail_at=2))
    assert failing.fill(5) == 2  # the error waits for the prompts before it
    got: list[str] = []
    with pytest.raises(ValueError, match="line 2: bad"):
        for p in failing:
            got.append(p.id)
    assert got == ["p0", "p1"]
