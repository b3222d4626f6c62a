"""Keys never leave in error details: whole, URL-encoded, JSON-escaped, or cut in half by the limit."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from aiohttp import web

from oxconsole.engine.send.client import DETAIL_MAX, EndpointClient, scrub
from tests.support.http import chat_server

# A key with the characters that defeated the credential pattern: + / =
KEY = "oxk+SECRET/99=zz8Q"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def pieces(secret: str, n: int = 5) -> set[str]:
    """Every n-character piece of the secret and of its encoded forms."""
    forms = {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
    }
    return {f[i : i + n] for f in forms for i in range(len(f) - n + 1)}


def leaks(text: str, secret: str = KEY) -> set[str]:
    return {p for p in pieces(secret) if p in text}


ECHOES = {
    "plain": f"invalid key {KEY} given",
    "url-encoded": f"GET /v1?key={urllib.parse.quote(KEY, safe='')} refused",
    "plus-encoded": f"form key={urllib.parse.quote_plus(KEY)}",
    "json-escaped": json.dumps({"error": f"key {KEY} unknown"}, ensure_ascii=True).replace("/", "\\/"),
    "cut by the limit": "x" * (DETAIL_MAX - 8) + f" {KEY} tail",
    "bearer": f"Authorization: Bearer {KEY}",
}


@pytest.mark.parametrize("text", ECHOES.values(), ids=ECHOES.keys())
def test_scrub_leaves_no_piece_of_the_key(text: str) -> None:
    out = scrub(text, (KEY,))
    assert not leaks(out), out
    assert len(out) <= DETAIL_MAX


def test_scrub_cuts_after_replacing() -> None:
    out = scrub("y" * 300, ())
    assert len(out) == DETAIL_MAX and out.endswith("…")


@pytest.mark.parametrize("echo", ECHOES.values(), ids=ECHOES.keys())
async def test_a_server_echoing_the_key_in_any_form_leaks_none_of_it(echo: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": echo, "type": "invalid_request_error"}}, status=401)

    async with chat_server(handler) as base:
        c = EndpointClient("e", base + "/v1", KEY, max_connections=2, timeout=5.0)
        try:
            res = await c.attempt(BODY, stream=True, timeout=5.0, save_text=False)
        finally:
            await c.close()
    assert res.error == "http_401" and res.detail, res
    assert not leaks(res.detail), res.detail
