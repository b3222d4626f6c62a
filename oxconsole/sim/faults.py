"""Which requests fail and how: rate limits, throttles, 500s, resets and stalls on arrival; aborted
or malformed streams.

Why this module exists: every fault is drawn from the model's seeded RNG in one fixed order (stall,
throttle, error, reset on arrival, then abort, malformed), so a run's faults are reproducible and
counted in one place.
"""

from __future__ import annotations

import asyncio
import math

from aiohttp import web

from oxconsole.base.units import fmt_seconds_header
from oxconsole.sim.encoded import error_body, json_response
from oxconsole.sim.state import ModelState


async def arrival_faults(
    request: web.Request, ms: ModelState, loop: asyncio.AbstractEventLoop
) -> web.StreamResponse | None:
    """Rate limit, stall, throttle, 500 and reset; None when the request goes on to be served."""
    prof = ms.profile
    stats = ms.stats
    if prof.rate_limit > 0.0:
        wait = ms.take_rate_token(loop.time())
        if wait > 0.0:
            return too_many(ms, max(wait, 0.001), "rate limit reached (simulated)")
    stall = ms.chance(prof.stall_rate)
    throttle = ms.chance(prof.throttle_rate)
    error = not throttle and ms.chance(prof.error_rate)
    reset = not (throttle or error) and ms.chance(prof.reset_rate)
    if stall:
        stats.stall += 1
        stats.faults += 1
        await asyncio.sleep(prof.stall)  # before any header, and without holding a capacity slot
    if throttle:
        return too_many(ms, prof.retry_after, "too many requests (simulated throttle)")
    if error:
        stats.http_500 += 1
        stats.faults += 1
        return json_response(500, error_body("simulated server error", "server_error", None))
    if reset:
        stats.reset += 1
        stats.faults += 1
        if request.transport is not None:
            request.transport.close()
        # Whatever is returned cannot be written: aiohttp sees the closed transport and drops it.
        return web.Response(status=500)
    return None


def too_many(ms: ModelState, retry_after: float, message: str, type_: str = "requests") -> web.Response:
    """A 429 with Retry-After (and retry-after-ms), counted as a fault."""
    ms.stats.http_429 += 1
    ms.stats.faults += 1
    headers = {
        "Retry-After": fmt_seconds_header(retry_after),
        "retry-after-ms": str(max(0, math.ceil(retry_after * 1000))),
    }
    return json_response(429, error_body(message, type_, "rate_limit_exceeded"), headers)


def stream_faults(ms: ModelState) -> tuple[bool, bool]:
    """(abort, malformed) for one answer, counted; at most one of them. Call only when the profile
    has stream faults (`ms.stream_faults`): each draw takes a number from the model's RNG."""
    prof = ms.profile
    stats = ms.stats
    abort = ms.chance(prof.abort_rate)
    malformed = not abort and ms.chance(prof.malformed_rate)
    if abort:
        stats.abort += 1
        stats.faults += 1
    elif malformed:
        stats.malformed += 1
        stats.faults += 1
    return abort, malformed
