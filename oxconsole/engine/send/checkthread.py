"""The answer checks, run off the event loop on one thread, each stopped at a deadline.

Why this module exists: a check is the user's schema and patterns run on a model's answer. With
RE2 and the schema's bounds (`workload/userschema.py`) a check takes microseconds, but some stay
superlinear (a `oneOf` of two branches that both recurse into `items`: 2^depth on a 40-character
answer), and the loop that times requests must never wait for one. Checks run here, one at a
time, in order; one that outlives `deadline_s` is stopped where it is (an exception raised in
this thread at its next bytecode, by `PyThreadState_SetAsyncExc`: the generated validator is
Python code, and the C calls a check makes, orjson and RE2, are linear) and answers `TIMED_OUT`.

One thread, not a pool: the checks hold the GIL, so more threads would not check faster, and the
order of answers is kept. Not a process: a process would add a pickled round trip to every answer
and half a second to start, again after each kill, for a gain only if a C call could run
unbounded, and none does (`bench/bench_checks.py` D measures this thread against checking inline).
While a runaway check runs, the loop gets the GIL back at least every switch interval (5 ms), for
at most the deadline.

The deadline is a timer on the loop (`call_later`), counted from when the check starts on the
thread (one queued behind a slow check is given its whole time). It raises at most once per check
and only while that check runs: a lock orders the raise against the thread's "done", and the
thread meets an exception still pending before it hands the result back, so none reaches the next
check. A check whose caller is cancelled (the run stopped) is skipped if it has not started, and
stopped at once if it has.
"""

from __future__ import annotations

import asyncio
import ctypes
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["TIMED_OUT", "CheckThread", "CheckTimeout", "TimedOut"]


class CheckTimeout(BaseException):
    """Raised inside the check thread when a check outlives its deadline (a BaseException, so no
    `except Exception` in the user's validator swallows it)."""


class TimedOut:
    """The type of `TIMED_OUT`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "TIMED_OUT"


TIMED_OUT: Final = TimedOut()
"""What `CheckThread.run` answers for a check stopped at its deadline."""


class _Job:
    __slots__ = ("args", "dropped", "fn", "fut", "loop", "started")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], fut: asyncio.Future[Any], loop: Any
    ) -> None:
        self.fn = fn
        self.args = args
        self.fut = fut
        self.loop: asyncio.AbstractEventLoop = loop
        self.started = 0.0
        self.dropped = False
        """Nobody waits for it any more: not started if still queued, not answered."""


def _met() -> None:
    """A Python call: an asynchronous exception still pending is raised at its first instruction."""


class CheckThread:
    """`await run(fn, *args)`: fn's result, computed on this object's thread, or TIMED_OUT; fn's
    exception is raised to the caller. The thread starts with the first check."""

    def __init__(self, deadline_s: float, name: str = "oxconsole-checks") -> None:
        self.deadline_s = deadline_s
        self.name = name
        self.timeouts = 0
        """Checks stopped at their deadline."""
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._current: _Job | None = None
        """The check on the thread now (under the lock): the only one an exception may reach."""
        self._thread: threading.Thread | None = None
        self._ident = 0
        self._closed = False

    def _start(self) -> None:
        t = threading.Thread(target=self._work, name=self.name, daemon=True)
        t.start()
        assert t.ident is not None
        self._thread, self._ident = t, t.ident

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the thread: its result, TIMED_OUT past the deadline, or its exception."""
        if self._closed:
            raise RuntimeError("the check thread is closed")
        if self._thread is None:
            self._start()
        loop = asyncio.get_running_loop()
        job = _Job(fn, args, loop.create_future(), loop)
        self._jobs.put(job)
        timer = loop.call_later(self.deadline_s, self._fire, job)
        try:
            return await job.fut
        except asyncio.CancelledError:
            self._drop(job)
            raise
        finally:
            timer.cancel()

    def _fire(self, job: _Job) -> None:
        """The job's deadline, counted from when it started on the thread: past it, the check is
        stopped where it is; a job still queued is looked at again a whole deadline later."""
        if job.fut.done():
            return
        with self._lock:
            if self._current is job:
                left = self.deadline_s - (time.monotonic() - job.started)
                if left <= 0:
                    self._raise_in_thread()
                    return
            else:
                left = self.deadline_s
        job.loop.call_later(left, self._fire, job)

    def _drop(self, job: _Job) -> None:
        with self._lock:
            job.dropped = True
            if self._current is job:
                self._raise_in_thread()

    def _raise_in_thread(self) -> None:
        """Stop the running check (the caller holds the lock and saw it running)."""
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(self._ident), ctypes.py_object(CheckTimeout)
        )

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            outcome: tuple[bool, Any] = (True, TIMED_OUT)
            try:
                with self._lock:
                    if job.dropped:
                        continue
                    job.started = time.monotonic()
                    self._current = job
                outcome = (True, job.fn(*job.args))
            except CheckTimeout:
                outcome = (True, TIMED_OUT)
            except BaseException as e:
                outcome = (False, e)
            finally:
                # The thread leaves the check: no exception may be raised in it from here on, and
                # one raised before (a stop that came as the check ended) is met here, not in the
                # next check. Nothing between the handlers above and this loop checks for one.
                while True:
                    try:
                        with self._lock:
                            self._current = None
                        _met()
                        break
                    except CheckTimeout:
                        outcome = (True, TIMED_OUT)
            if job.dropped:
                continue
            try:
                job.loop.call_soon_threadsafe(_settle, job.fut, outcome, self)
            except RuntimeError:  # the loop closed while the check ran: nobody waits for it
                pass

    def close(self) -> None:
        """No more checks: the queued ones are dropped, the running one stopped, the thread ends."""
        self._closed = True
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.dropped = True
        with self._lock:
            cur = self._current
            if cur is not None:
                cur.dropped = True
                self._raise_in_thread()
        if self._thread is not None:
            self._jobs.put(None)


def _settle(fut: asyncio.Future[Any], outcome: tuple[bool, Any], owner: CheckThread) -> None:
    if fut.done():
        return
    ok, value = outcome
    if value is TIMED_OUT:
        owner.timeouts += 1
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)
