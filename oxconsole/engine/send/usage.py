"""The token counts a server's `usage` reports, believed only within bounds.

Why this module exists: a request's cost and the summary's token sums are priced from `usage`,
and a server hands back whatever numbers it likes: a negative `completion_tokens` priced a request
at -3,000 and a huge one made a summary of 4.6e13. Every count a server sends (prompt, completion
and total tokens, cached and reasoning tokens; chat, text completions, embeddings and the Responses
API alike) is read here, and an answer with one count out of bounds keeps none of them: its record
counts tokens as when there is no usage (`tokens_source = "estimate"`), and the run says once which
count it did not believe (docs/reliability.md, "Hostile servers: limits").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from oxconsole.engine.send.attempt import AttemptResult
from oxconsole.workload.bounds import MAX_TOKENS

USAGE_MAX: Final = 2 * MAX_TOKENS
"""The most tokens any one count may say (20 million): twice the largest `max_tokens` a workload may
ask for (`MAX_TOKENS`, itself beyond the longest context window on offer, 10 million tokens), so
no true count of one request comes near it; priced at the highest price a workload accepts it
keeps every sum finite and a request's cost bounded."""

OUTPUT_FACTOR: Final = 2
OUTPUT_SLACK: Final = 1024
"""A request that set its own cap (`max_tokens`, `max_completion_tokens`, `max_output_tokens`)
cannot have been answered with more than `OUTPUT_FACTOR * n * cap + OUTPUT_SLACK` output tokens:
twice the cap covers servers that count a stop token or some reasoning outside it, the slack a
small cap. More is a count that cannot be true of this request."""

_CAPS: Final = ("max_tokens", "max_completion_tokens", "max_output_tokens")
_SHOWN: Final = 40
"""Characters of a doubtful value quoted in the warning."""


def count(u: Mapping[str, Any], key: str, res: AttemptResult) -> int | None:
    """`u[key]` when it is a count within `USAGE_MAX`; None when it is absent or null. Anything
    else (negative, huge, not an integer) is doubted: noted on `res` (the first one), None."""
    v = u.get(key)
    if v is None:
        return None
    if type(v) is int and 0 <= v <= USAGE_MAX:
        return v
    if res.usage_doubt is None:
        res.usage_doubt = f"{key} = {_show(v)}"
    return None


def output_cap(body: Mapping[str, Any]) -> int | None:
    """The most output tokens an answer to `body` can truly have, when the body caps its output."""
    cap: int | None = next((body[k] for k in _CAPS if type(body.get(k)) is int), None)
    if cap is None or cap < 0:
        return None
    n = body.get("n")
    choices: int = n if type(n) is int and n > 1 else 1
    return OUTPUT_FACTOR * choices * cap + OUTPUT_SLACK


def bound_usage(res: AttemptResult, body: Mapping[str, Any]) -> None:
    """After an answer was read: its output counts checked against the request's own cap (cached
    and reasoning tokens are kept within the input and output when recorded); when any count is
    doubted, every count of its usage is dropped (the record estimates them) and
    `res.usage_doubt` says which."""
    if res.usage_doubt is None:
        cap = output_cap(body)
        if cap is not None:
            for key, v in (("output tokens", res.output_tokens), ("reasoning tokens", res.reasoning_tokens)):
                if v is not None and v > cap:
                    res.usage_doubt = f"{key} = {v:,}, over {cap:,} for a request capped at {_cap(body)}"
                    break
    if res.usage_doubt is not None:
        res.input_tokens = res.output_tokens = res.cached_tokens = res.reasoning_tokens = None


def doubt_warning(endpoint: str, doubt: str) -> str:
    """The run's one warning for an endpoint whose usage was not believed."""
    return (
        f"endpoint {endpoint}: a usage count from the server was not believed ({doubt}; counts are "
        f"believed between 0 and {USAGE_MAX:,} tokens, and within the request's own cap): those "
        'requests\' tokens and cost are estimated (tokens_source = "estimate")'
    )


def _cap(body: Mapping[str, Any]) -> str:
    key = next(k for k in _CAPS if type(body.get(k)) is int)
    n = body.get("n")
    return f"{key} = {body[key]:,}" + (f", n = {n}" if type(n) is int and n > 1 else "")


def _show(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else str(v)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
