"""`GET URL/models`: the model a run without `--model` sends to.

Why this module exists: `oxconsole run --url U` should need nothing more when the server can say
what it serves (vLLM, SGLang, llama.cpp and hosted APIs all answer `/models`). It is asked once,
before anything is sent, with the standard library only (no engine, no SDK: the command line stays
fast), and what it answers is read within bounds: the answer of a server is hostile until checked.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request

from oxconsole.base.exits import BadInput

__all__ = ["MAX_BODY", "first_model"]

MAX_BODY = 4 << 20
"""Bytes of a `/models` answer read at most (a list of thousands of models is well below)."""
MAX_NAME = 256
TIMEOUT_S = 10.0


def first_model(url: str, api_key_env: str | None, timeout: float = TIMEOUT_S) -> str:
    """The first model `GET URL/models` lists; BadInput (exit 2) saying why when there is none."""
    target = url.rstrip("/") + "/models"
    req = urllib.request.Request(target, headers=_headers(api_key_env))
    try:
        with _opener(target).open(req, timeout=timeout) as resp:
            body = resp.read(MAX_BODY + 1)
    except urllib.error.HTTPError as e:
        raise BadInput(f"--url: GET {target} answered HTTP {e.code}; {_http_hint(e.code, url)}") from None
    except urllib.error.URLError as e:
        raise BadInput(f"--url: GET {target}: {_reason(e.reason, target)}; {_RUNNING}") from None
    except (TimeoutError, OSError) as e:
        raise BadInput(f"--url: GET {target}: {_reason(e, target)}; {_RUNNING}") from None
    if len(body) > MAX_BODY:
        raise BadInput(f"--url: GET {target}: expected a list of models, got more than {MAX_BODY} bytes")
    return _pick(body, target)


_RUNNING = "is the server running? (or give --model NAME)"


def _headers(api_key_env: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "oxconsole"}
    if api_key_env:
        key = os.environ.get(api_key_env, "").strip()
        if not key:
            raise BadInput(
                f"--api-key-env: environment variable {api_key_env} is not set; expected it to hold "
                f"the API key (export {api_key_env}=...)"
            )
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _opener(target: str) -> urllib.request.OpenerDirector:
    """No proxy for a server on this machine (a proxy set for the outside cannot reach it)."""
    host = urllib.parse.urlsplit(target).hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    if local:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _reason(reason: object, target: str) -> str:
    parts = urllib.parse.urlsplit(target)
    where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    if isinstance(reason, ConnectionRefusedError):
        return f"connection refused at {where}"
    if isinstance(reason, TimeoutError):
        return f"no answer from {where} within {TIMEOUT_S:g} s"
    text = getattr(reason, "strerror", None) or str(reason)
    return f"cannot connect to {where} ({text})"


def _http_hint(code: int, url: str) -> str:
    if code in (401, 403):
        return "expected the list of models: is the key right (--api-key-env VAR)? (or give --model NAME)"
    if code == 404 and not url.rstrip("/").endswith("/v1"):
        return "expected the list of models: the base URL usually ends in /v1 (or give --model NAME)"
    return "expected the list of models (or give --model NAME)"


def _pick(body: bytes, target: str) -> str:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise BadInput(f"--url: GET {target}: expected JSON (a list of models), got something else") from None
    data = doc.get("data") if isinstance(doc, dict) else doc if isinstance(doc, list) else None
    if not isinstance(data, list):
        raise BadInput(f'--url: GET {target}: expected {{"data": [{{"id": ...}}]}}, got no "data" list')
    for item in data:
        name = item.get("id") if isinstance(item, dict) else None
        if isinstance(name, str) and 0 < len(name) <= MAX_NAME and name.isprintable():
            return name
    raise BadInput(f"--url: GET {target} lists no models; expected at least one (or give --model NAME)")
