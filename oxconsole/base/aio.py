"""The event loop, chosen once: uvloop where it is installed, asyncio's otherwise.

Why this module exists: the command line, the engine process, worker processes and the console
thread all need a loop; one place decides which, so every layer can reach it without reaching up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["new_event_loop", "run_loop"]

T = TypeVar("T")


def run_loop(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` with uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A fresh event loop: uvloop's where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop
