"""Keys that change what goes on the wire: an endpoint's extra headers, a model's extra body fields.

Why this module exists: `headers`, `headers_env` and `extra_body` are tables of the user's own
names and values, checked entry by entry (header names, one-line values, variable names, the
body fields the engine owns), and those rules read best apart from the section parsers.
"""

from __future__ import annotations

import re
from typing import Any

from oxconsole.workload.problems import join_key, show
from oxconsole.workload.values import Table

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def request_headers(t: Table, key: str, what: str) -> dict[str, str]:
    """A table of header name -> string (`headers_env`: -> an environment variable's name)."""
    if not t.has(key):
        return {}
    v = t.data[key]
    if not isinstance(v, dict):
        t.fail(key, 'a table of header names to strings (such as { "X-Org" = "..." })')
        return {}
    out: dict[str, str] = {}
    for name, value in v.items():
        path = join_key(t.p(key), name)
        if not _HEADER_NAME.fullmatch(name):
            t.errs.add(path, "a header name (letters, digits and -)", show(name))
        elif not isinstance(value, str) or (key == "headers_env" and not ENV_NAME.fullmatch(value)):
            t.errs.bad(path, what, value)
        elif any(c in value for c in "\r\n\x00"):
            t.errs.add(path, "a value on one line", "a value with a line break (not shown)")
        else:
            out[name] = value
    return out


_BUILT = ("model", "messages", "stream", "stream_options")


def extra_body(t: Table) -> dict[str, Any]:
    """`extra_body`: a table of fields merged into the request body (not the ones the engine owns)."""
    if not t.has("extra_body"):
        return {}
    v = t.data["extra_body"]
    if not isinstance(v, dict):
        t.fail("extra_body", "a table of request body fields (such as { top_k = 20 })")
        return {}
    for k in v:
        if k in _BUILT:
            t.errs.add(
                join_key(t.p("extra_body"), k), f"a field other than {', '.join(_BUILT)}", "one of them"
            )
    return {k: x for k, x in v.items() if k not in _BUILT}
