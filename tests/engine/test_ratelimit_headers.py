"""The `x-ratelimit-*` headers read within bounds (hostile values ignored, never raised), on a
loopback server of our own that sends odd ones, and `Headroom`'s pacing arithmetic as plain logic:
pending attempts taken off the remaining figure so a burst cannot overshoot, the reset waited for,
the old window's answers ignored, a shard's share kept."""

from __future__ import annotations

import math
import time

import pytest
from aiohttp import web
from multidict import CIMultiDict

from oxconsole.engine.headroom import Headroom
from oxconsole.engine.send.client import EndpointClient
from oxconsole.engine.send.rlheaders import parse_count, parse_reset
from oxconsole.metrics.ratelimit import merge, summary
from tests.support.http import chat_server, ok_answer

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1.5s", 1.5), ("2", 2.0), ("0.25", 0.25),
     ("1h2m3s", 3723.0), ("500us", 0.0005), (" 3s ", 3.0), ("0s", 0.0)],
)  # fmt: skip
def test_resets_in_the_providers_forms(value: str, seconds: float) -> None:
    got = parse_reset(value)
    assert got is not None and math.isclose(got, seconds), (value, got)


@pytest.mark.parametrize(
    "value",
    ["", "-1s", "inf", "nan", "1e400", "abc", "1x", "s", "1s2", "25h", "9" * 40, "1ss", "1.s", "1..5s", None],
)
def test_nonsense_resets_are_ignored(value: str | None) -> None:
    assert parse_reset(value) is None, value


def test_counts_are_plain_digits_within_bounds() -> None:
    good = {"0": 0, "600": 600, " 42 ": 42, "150000": 150000}
    assert {v: parse_count(v) for v in good} == good
    for bad in ("-1", "1.5", "1e3", "１２", "12abc", "", "9" * 40, "9" * 17, None):
        assert parse_count(bad) is None, bad


def odd_headers() -> dict[str, str]:
    return {
        "x-ratelimit-limit-requests": "9" * 100,  # too long: ignored
        "x-ratelimit-remaining-requests": "-5",  # not digits: ignored
        "x-ratelimit-reset-requests": "forever",
        "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "750",
        "x-ratelimit-reset-tokens": "1e308",  # over a day: the reset is unknown
    }


async def test_odd_headers_from_a_server_are_read_within_bounds() -> None:
    """A loopback server sending hostile values beside sound ones: the sound ones are kept, the
    rest ignored, the answer itself unharmed; on a 429 too."""
    status = [200]

    async def handler(request: web.Request) -> web.StreamResponse:
        if status[0] == 429:
            return web.json_response({"error": {"message": "slow"}}, status=429, headers=odd_headers() | {
                "x-ratelimit-remaining-tokens": "5"})  # fmt: skip
        resp = ok_answer()
        resp.headers.update(odd_headers())
        return resp

    async with chat_server(handler) as base:
        c = EndpointClient("e", base + "/v1", None, max_connections=2, timeout=5.0)
        c.headroom = room = Headroom("e")
        try:
            res = await c.attempt(BODY, stream=False, timeout=5.0, save_text=False)
            status[0] = 429
            bad = await c.attempt(BODY, stream=False, timeout=5.0, save_text=False)
        finally:
            await c.close()
    assert res.ok and bad.error == "http_429", (res, bad)
    st = room.state()
    assert st is not None
    want = {"limit_requests": None, "remaining_requests": None, "remaining_requests_min": None,
            "limit_tokens": 1000, "remaining_tokens": 5, "remaining_tokens_min": 5, "reset_tokens_s": None,
            "reset_requests_s": None}  # fmt: skip
    assert {k: st[k] for k in want} == want, st
    assert room.pending == 0, room.pending


async def test_a_server_without_the_headers_leaves_nothing() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return ok_answer()

    async with chat_server(handler) as base:
        c = EndpointClient("e", base + "/v1", None, max_connections=2, timeout=5.0)
        c.headroom = room = Headroom("e")
        try:
            assert (await c.attempt(BODY, stream=False, timeout=5.0, save_text=False)).ok
        finally:
            await c.close()
    assert room.state() is None and room.pending == 0


async def test_an_attempt_with_no_answer_is_not_left_pending() -> None:
    c = EndpointClient("e", "http://127.0.0.1:9/v1", None, max_connections=2, timeout=2.0)
    c.headroom = room = Headroom("e")
    try:
        res = await c.attempt(BODY, stream=False, timeout=2.0, save_text=False)
    finally:
        await c.close()
    assert res.error == "connection" and room.pending == 0, (res.error, room.pending)


# --- pacing as plain logic ---------------------------------------------------------------------
def heard(room: Headroom, seq: int, left: int, limit: int = 10, reset: str = "1s") -> None:
    room.seen(
        CIMultiDict(
            {
                "x-ratelimit-limit-requests": str(limit),
                "x-ratelimit-remaining-requests": str(left),
                "x-ratelimit-reset-requests": reset,
            }
        ),
        seq,
    )


def test_a_burst_counts_what_is_pending() -> None:
    """Remaining 5 of 10 heard: 5 more may go at once (pending), not 5 each time an answer is heard."""
    room = Headroom("e")
    seq = room.sending()
    heard(room, seq, 5)
    now = time.monotonic()
    admitted = 0
    while room.admit(0, now) == 0.0 and admitted < 100:
        room.sending()
        admitted += 1
    assert admitted == 5, admitted
    wait = room.admit(0, now)
    assert 0.9 < wait <= 1.0, wait  # until the reset heard


def test_the_reset_starts_a_new_window_and_old_answers_are_ignored() -> None:
    room = Headroom("e")
    first = room.sending()
    heard(room, first, 0, reset="0.05s")  # spent
    now = time.monotonic()
    assert room.admit(0, now) > 0
    later = now + 0.1
    sent: list[int] = []
    while room.admit(0, later) == 0.0 and len(sent) < 100:
        sent.append(room.sending())
    assert len(sent) == 10, len(sent)  # the whole limit again
    heard(room, first, 0, reset="0.01s")  # a late answer of the old window: ignored
    for i, s in enumerate(sent[:3]):
        heard(room, s, 7 - i, reset="1s")
    assert room.limits["requests"].left == 5, room.limits["requests"].left


def test_a_shard_keeps_to_its_share() -> None:
    room = Headroom("e", share=0.5)
    seq = room.sending()
    heard(room, seq, 9)
    now = time.monotonic()
    n = 0
    while room.admit(0, now) == 0.0 and n < 100:
        room.sending()
        n += 1
    assert n == 4, n  # half of the 9 left: four (each pending once admitted)


def test_with_no_reset_one_request_probes() -> None:
    room = Headroom("e")
    seq = room.sending()
    room.seen(CIMultiDict({"x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "0"}), seq)
    now = time.monotonic()
    assert room.admit(0, now) == 0.0  # nothing pending: one goes to learn
    room.sending()
    assert room.admit(0, now) == math.inf  # one pending: wait for its answer


def test_tokens_are_paced_by_the_estimate() -> None:
    room = Headroom("e")
    seq = room.sending()
    room.seen(
        CIMultiDict(
            {
                "x-ratelimit-limit-tokens": "1000",
                "x-ratelimit-remaining-tokens": "400",
                "x-ratelimit-reset-tokens": "2s",
            }
        ),
        seq,
    )
    now = time.monotonic()
    n = 0
    while room.admit(100, now) == 0.0 and n < 100:
        room.sending()
        n += 1
    assert n == 4, n  # 400 left, 100 each: four, each pending once admitted


def test_shards_merge_into_one_figure_per_endpoint() -> None:
    base = {"limit_requests": 10, "remaining_requests": 4, "remaining_requests_min": 2, "limit_tokens": None}
    a = {"e": base | {"remaining_tokens": None, "remaining_tokens_min": None, "waits": 1, "wait_s": 0.5,
                      "seen_at": 5.0}}  # fmt: skip
    b = {"e": a["e"] | {"remaining_requests": 1, "remaining_requests_min": 1, "waits": 2, "wait_s": 1.25,
                        "seen_at": 6.0, "limit_requests": 12}}  # fmt: skip
    m = merge([a, None, b])["e"]
    assert (m["limit_requests"], m["remaining_requests"], m["remaining_requests_min"]) == (12, 1, 1), m
    assert (m["waits"], m["wait_s"]) == (3, 1.75), m
    s = summary([a, b])
    assert s is not None and list(s["e"]) == ["limit_requests", "limit_tokens", "remaining_requests_min",
                                               "remaining_tokens_min", "waits", "wait_s"], s  # fmt: skip
    assert summary([None, {}]) is None
