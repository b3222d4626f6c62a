"""A journal that cannot be written says so once, keeps what it wrote, and never raises in a callback."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import orjson
import pytest

from oxconsole.journal.journal import Journal

LINE = orjson.dumps({"id": "p1", "status": "ok"}, option=orjson.OPT_APPEND_NEWLINE)

needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")


@needs_dev_full
def test_a_full_disk_is_reported_once_and_nothing_counts_as_written() -> None:
    seen: list[str] = []
    j = Journal(Path("/dev/full"), on_failure=seen.append)
    for _ in range(3):
        j.write_lines(LINE, 1)  # no loop running: each is written (and fails) at once
    j.close()
    assert seen == [j.failure]
    assert j.failure is not None and j.failure.startswith("/dev/full: ")
    assert "No space left on device" in j.failure
    assert j.records == 3 and j.written == 0


@needs_dev_full
async def test_on_the_loop_the_failure_reaches_the_callback_not_the_loop() -> None:
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    seen: list[str] = []
    j = Journal(Path("/dev/full"), on_failure=seen.append)
    for _ in range(5):
        j.write_lines(LINE, 1)
    await asyncio.sleep(0)  # the end-of-iteration flush
    await asyncio.sleep(0)
    j.write_lines(LINE, 1)  # after the failure: not even tried
    await j.sync_async()
    j.close()
    assert not errors, errors  # before: "Exception in callback Journal.flush" on every iteration
    assert len(seen) == 1 and j.written == 0 and j.records == 6


def test_written_counts_lines_that_reached_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    j = Journal(path)
    j.write_lines(LINE * 4, 4)
    j.close()
    assert j.written == 4 and j.failure is None
    assert path.read_bytes() == LINE * 4


def test_fsync_failure_is_a_failure_too(tmp_path: Path) -> None:
    # /dev/null takes writes but refuses fsync (EINVAL): before, a traceback
    seen: list[str] = []
    j = Journal(Path(os.devnull), on_failure=seen.append)
    j.write_lines(LINE, 1)
    j.close()
    assert seen and "Invalid argument" in seen[0]


def test_the_journal_is_private(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    Journal(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds response text
