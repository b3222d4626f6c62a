"""The wire between a run's coordinator (`pool.py` for it, the parent) and its workers (`worker.py`).

Why this module exists: the two ends are written in different modules and run in different
processes; what one sends and the other expects is stated once, here, with a name for each key.

Each worker has one duplex `multiprocessing` pipe (with `run.cluster = "ray"`, a `Channel` over Ray
carrying the same messages: `raychannel.py`); every message is one `send_bytes`. A message is
either journal lines (its first byte is JOURNAL_TAG) or one JSON object (orjson).

Parent -> worker, JSON objects with a "cmd" key:
    {"cmd": GO, "at": unix time}     start dispatching: sent once every worker said READY, so that
                                     the run's clock does not count process start-up; `at` is the
                                     coordinator's start, every worker's clock starts there (its
                                     schedule and trace rows due from the same moment), unless the
                                     worker's own wall clock puts it over GO_SKEW_S away (another
                                     machine's clock): then at GO
    {"cmd": STOP, "cancel": bool}    stop (cancel: end requests in flight at once, no grace)
    {"cmd": STAGE, "mark": [k, warmup]}  [[stages]]: requests sent from now on are in stage k
    command_to_dict(cmd)             a live command, already this worker's share
                                     (`shares.shard_commands`): SetConcurrency with its part of
                                     `split(concurrency, n)`, SetRate with rate / n, SetTpm with
                                     tpm / n, weights, switches and pause as they are; applied as it
                                     is (`LocalShard.act`). Commands that arrive before the worker's
                                     shard runs are held and applied then.
    The pipe closing (EOF) means the parent is gone: the worker cancels its run.

Worker -> parent:
    JOURNAL_TAG + lines              finished records as journal lines (newline-terminated JSON,
                                     encoded once in the worker); the parent writes them as they are
    {READY: true}                    imported and set up: waiting for GO
    {RECORDS: [...], GAUGES: {...} | None, ATTEMPTS: [...]}   every FLUSH_S while running:
        RECORDS   the same records for the parent's collector, as `record_tuple`s, text dropped
        GAUGES    the worker's `Gauges` as a dict (None before its engine runs)
        ATTEMPTS  present when attempts failed and went again since the last message:
                  [model, error class, count, last detail] each. The parent counts them live at
                  once; they come no later than the record that carries them (it is flushed after
                  them, or in the same message, where ATTEMPTS is merged first), so the collector
                  moves them from live to final without counting any twice.
    {END: {...}}                     the last message: "ok", "error", "warnings", "cooldowns",
                                     "loop_lag_ms" and "gc" of the worker's run, and "complete":
                                     its dispatch reached the end (every prompt of its share
                                     started, or run.duration ran out), not a stop; or, from a worker
                                     whose set-up found bad input (an endpoint that refused its
                                     connections), "bad_input": the message, and nothing sent
    The pipe closing without END means the worker died: the parent reports it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from oxconsole.journal.records import RequestRecord
from oxconsole.metrics.snapshot import Gauges

GO = "_go"
GO_SKEW_S = 1.0
"""The most a worker takes GO's `at` to be behind its own wall clock; beyond (or ahead of it), the
clocks of two machines disagree and the worker starts its own clock at GO."""
STOP = "stop"
STAGE = "_stage"
READY = "ready"
RECORDS = "r"
GAUGES = "g"
ATTEMPTS = "a"
END = "end"

JOURNAL_TAG = b"\x00"
"""First byte of a worker message that carries encoded journal lines (others are JSON objects)."""

FLUSH_S = 0.02
"""How often a worker sends its finished records and gauges to the parent."""


class Channel(Protocol):
    """What a worker and its parent talk through: a `multiprocessing` pipe end, or a Ray actor's
    mailboxes (`raychannel.py`)."""

    def send_bytes(self, data: bytes) -> None: ...

    def recv_bytes(self) -> bytes: ...

    def close(self) -> None: ...


_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))


def record_tuple(rec: RequestRecord) -> tuple[Any, ...]:
    """A record's fields in declaration order: compact on the wire, `RequestRecord(*t)` rebuilds it."""
    return tuple(getattr(rec, f) for f in _FIELDS)


def gauges_to_dict(g: Gauges) -> dict[str, Any]:
    return dataclasses.asdict(g)
