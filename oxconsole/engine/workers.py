"""The old home of the worker pool, kept so that `from oxconsole.engine.workers import ...` works.

Why this module exists: code written before the pool was split into `pool.py` (the parent) and
`worker.py` (the worker process) imports from here; new code imports from `pool.py`.
"""

from __future__ import annotations

from oxconsole.engine.pool import WorkerPool as WorkerPool
from oxconsole.engine.pool import make_engine as make_engine
from oxconsole.engine.pool import split as split
from oxconsole.engine.pool import worker_count as worker_count
from oxconsole.engine.wire import FLUSH_S as FLUSH_S
from oxconsole.engine.wire import JOURNAL_TAG as JOURNAL_TAG
from oxconsole.engine.wire import record_tuple as record_tuple
