"""No 8-character piece of a key survives in an error detail, in any form a server echoes it.

The forms listed in `secret_forms` are checked piece by piece; forms it does not list (the key
URL-encoded twice, every character JSON-escaped, cut by a line break, upper-cased) are checked on
what they still show of the key itself. End to end, a server on loopback echoes the key and a
`headers_env` value in each form, and the journal keeps none of them.
"""

from __future__ import annotations

import base64
import html
import json
import urllib.parse
from pathlib import Path

import pytest
from aiohttp import web

from oxconsole.base.redaction import DETAIL_MAX, PIECE, scrub, secret_forms, shown_override
from oxconsole.engine.send.client import EndpointClient
from tests.support.http import chat_server

KEY = "+Zq9/SECRETKEY77=="
"""The issue's key: `+`, `/` and `=` are what URL- and base64-encoding change."""
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def windows(form: str) -> set[str]:
    f = form.casefold()
    return {f[i : i + PIECE] for i in range(len(f) - PIECE + 1)} or {f}


def leaked(text: str, forms: list[str]) -> set[str]:
    t = text.casefold()
    return {w for form in forms for w in windows(form) if w in t}


def b64_in_basic(user: str) -> str:
    return base64.b64encode(f"{user}:{KEY}".encode()).decode()


LISTED = {
    "raw": KEY,
    "quote safe=''": urllib.parse.quote(KEY, safe=""),
    "quote keeping /": urllib.parse.quote(KEY),
    "quote_plus": urllib.parse.quote_plus(KEY),
    "json": json.dumps(KEY)[1:-1].replace("/", "\\/"),
    "html": html.escape(KEY),
    "hex": KEY.encode().hex(),
}

ECHOES = {
    **{name: f"invalid credential {form} given" for name, form in LISTED.items()},
    "lower-case percent escapes": "key=" + urllib.parse.quote(KEY, safe="").lower(),
    "basic auth, 3 alignments": " ".join(f"Basic {b64_in_basic(u)}" for u in ("a", "ab", "abc")),
    "url-safe base64": base64.urlsafe_b64encode(b"x:" + KEY.encode()).decode(),
    "cut by the length limit": "x" * (DETAIL_MAX - 12) + " " + KEY + " tail",
    "deep in a long body": "y" * 5000 + KEY,
}

BEYOND = {
    "URL-encoded twice": urllib.parse.quote(urllib.parse.quote(KEY, safe=""), safe=""),
    "every character \\u-escaped": "".join(f"\\u{ord(c):04x}" if not c.isalnum() else c for c in KEY),
    "upper-cased": KEY.upper(),
    "split by a line break": KEY[:9] + "\n" + KEY[9:],
    "inside a query string": f"https://h/v1?api_key={urllib.parse.quote(KEY)}&x=1",
}


@pytest.mark.parametrize("text", ECHOES.values(), ids=ECHOES.keys())
def test_no_piece_of_any_listed_form_survives(text: str) -> None:
    out = scrub(text, (KEY,))
    assert not leaked(out, secret_forms(KEY)), (text[:120], out)
    assert len(out) <= DETAIL_MAX, len(out)


@pytest.mark.parametrize("text", BEYOND.values(), ids=BEYOND.keys())
def test_forms_nobody_listed_show_no_piece_of_the_key(text: str) -> None:
    out = scrub(text, (KEY,))
    assert not leaked(out, [KEY, KEY.strip("+=")]), (text, out)


def test_text_without_the_key_is_left_alone() -> None:
    text = "HTTP 401: the model m does not exist / try again = later + soon"
    assert scrub(text, (KEY,)) == text


def test_a_short_secret_is_taken_out_whole() -> None:
    assert scrub("token abc123 refused", ("abc123",)) == "token *** refused"


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        ('endpoints.default.headers.X-Api-Key="k-123"', "endpoints.default.headers.X-Api-Key=***"),
        ('endpoints.e.headers={Authorization="Bearer x"}', "endpoints.e.headers=***"),
        ('endpoints.e.headers_env={X-Org="ORG_ID"}', 'endpoints.e.headers_env={X-Org="ORG_ID"}'),
        ("run.concurrency=4", "run.concurrency=4"),
    ],
)
def test_a_hint_hides_header_values_given_with_set(override: str, shown: str) -> None:
    assert shown_override(override) == shown


@pytest.mark.parametrize("echo", [*ECHOES.values(), *BEYOND.values()], ids=[*ECHOES, *BEYOND])
async def test_a_server_echoing_the_key_leaks_none_of_it(echo: str, tmp_path: Path) -> None:
    org = "ORG/SECRET+VALUE=="  # a header value from the environment: a secret too

    async def handler(request: web.Request) -> web.Response:
        told = request.headers.get("X-Org", "")
        message = echo + " org " + urllib.parse.quote(told)
        return web.json_response({"error": {"message": message}}, status=401)

    async with chat_server(handler) as base:
        c = EndpointClient(
            "e", base + "/v1", KEY, max_connections=2, timeout=5.0, headers={"X-Org": org}, secrets=(org,)
        )
        try:
            res = await c.attempt(BODY, stream=True, timeout=5.0, save_text=False)
        finally:
            await c.close()
    assert res.error == "http_401" and res.detail, res
    assert not leaked(res.detail, [KEY, org]), res.detail


def test_the_resume_hint_does_not_repeat_a_header_value() -> None:
    from oxconsole.reports.hints import resume_command

    sets = ['endpoints.default.headers.X-Api-Key="k-secret-123"', "run.rate=2"]
    hint = resume_command("w.toml", sets, None)
    assert "k-secret-123" not in hint, hint
    assert "run.rate=2" in hint and "X-Api-Key=***" in hint, hint
