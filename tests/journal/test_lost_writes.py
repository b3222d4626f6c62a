"""Nothing a server sends breaks a journal write, and a write that is lost is exit 4, never 0.

Servers of our own on loopback (a thread with the standard library's HTTP server, so the command
line runs in this process or as a child): an error body holding an unpaired surrogate escape, a
`usage` of 2^62 tokens; and a run whose results folder is deleted while it writes.
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from oxconsole.journal.journal import Journal
from oxconsole.journal.records import RECORD_TOKENS_MAX, RequestRecord
from tests.support import oxconsole_here, read_jsonl, wait_until
from tests.support.workloads import write_workload

Answer = Callable[[], tuple[int, bytes]]


@contextmanager
def server(answer: Answer) -> Iterator[str]:
    """A loopback server answering every POST with `answer()` (status, JSON body); its base URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body = answer()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.shutdown()
        srv.server_close()


def workload(tmp_path: Path, url: str, count: int = 20) -> Path:
    """tests/workloads/server.toml as tmp_path/w.toml: `count` requests at `url`, not streamed,
    journaled in tmp_path/out/."""
    sets = {
        "name": "hostile",
        "run": {"concurrency": 4, "stream": False},
        "output.results": "out/results.jsonl",
        "endpoints.default.base_url": url,
        "prompts": {"synthetic": {"count": count, "input_tokens": 8, "output_tokens": 4}},
    }
    return write_workload("server", tmp_path, sets, file="w.toml")


@pytest.mark.slow  # 15-35 s: runs of 500s put the model in cool-down (engine/send/health.py: 5 s, doubling)
def test_a_lone_surrogate_in_an_error_body_is_journaled(tmp_path: Path, run_dirs: Path) -> None:
    body = b'{"error": {"message": "broken \\ud800 text \\udfff end", "type": "server_error"}}'
    with server(lambda: (500, body)) as url:
        r = oxconsole_here(str(workload(tmp_path, url)), "--headless", cwd=tmp_path)
    recs = read_jsonl(tmp_path / "out" / "results.jsonl")
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(recs) == 20, (len(recs), r.stderr[-2000:])
    details = {rec["error_detail"] for rec in recs}
    assert details == {"HTTP 500: broken \ufffd text \ufffd end"}, details
    assert "not sent" not in r.stdout + r.stderr, r.stdout


def test_impossible_usage_counts_are_estimated_and_summarised(tmp_path: Path, run_dirs: Path) -> None:
    huge = 2**62
    usage = {"prompt_tokens": huge, "completion_tokens": huge, "total_tokens": 2 * huge}
    body = json.dumps({"choices": [{"message": {"content": "ok"}}], "usage": usage}).encode()
    with server(lambda: (200, body)) as url:
        path = str(workload(tmp_path, url))
        r = oxconsole_here(path, "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    summary = json.loads((tmp_path / "s.json").read_text())
    # not believed (engine/send/usage.py): estimated, far below the journal's own clamp
    assert 0 < summary["tokens"]["input"] < 20 * 100, summary["tokens"]
    recs = read_jsonl(tmp_path / "out" / "results.jsonl")
    assert {rec["tokens_source"] for rec in recs} == {"estimate"}, recs[:2]
    assert all(0 < rec["output_tokens"] < RECORD_TOKENS_MAX for rec in recs), recs[:2]


def test_a_record_that_cannot_be_encoded_is_a_failure_not_a_traceback(tmp_path: Path) -> None:
    seen: list[str] = []
    j = Journal(tmp_path / "r.jsonl", on_failure=seen.append)
    j.write_dict({"id": "a", "odd": object()})
    j.write_dict({"id": "b"})
    j.close()
    said = f"{tmp_path / 'r.jsonl'}: a record could not be written as JSON"
    assert len(seen) == 1 and seen[0].startswith(said), seen
    assert (j.records, j.written) == (2, 0), (j.records, j.written)


def test_the_record_boundary_makes_server_text_encodable() -> None:
    rec = RequestRecord(
        "p\ud800", "m", "e", "error", 1, 1.7e9, 1.7e9, 0.0, None,
        error="http_500", error_detail="x\udc80y", text="t\ud83d", attempt_errors={"http_\ud800": 1},
        input_tokens=-5, output_tokens=2**63,
    )  # fmt: skip
    line = orjson.dumps(rec.to_json_dict())  # raised "str is not valid UTF-8" before
    back = orjson.loads(line)
    assert back["error_detail"] == "x\ufffdy" and back["text"] == "t\ufffd", back
    assert (back["input_tokens"], back["output_tokens"]) == (0, RECORD_TOKENS_MAX), back


def test_a_deleted_results_folder_is_exit_4(tmp_path: Path, run_dirs: Path) -> None:
    body = json.dumps({"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 1}}).encode()
    with server(lambda: (200, body)) as url:
        path = workload(tmp_path, url, count=100000)
        p = subprocess.Popen(
            [sys.executable, "-m", "oxconsole", str(path), "--headless", "--set", "run.rate=200"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            journal = tmp_path / "out" / "results.jsonl"
            wait_until(lambda: journal.exists() and journal.stat().st_size > 0, 60, "the first records")
            shutil.rmtree(tmp_path / "out")
            _, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 4, (p.returncode, err[-2000:])
    assert "out/results.jsonl: the journal was deleted or moved" in err, err[-2000:]
    assert "--resume" not in err, err[-2000:]  # nothing left to resume: the hint runs it again
    assert "Traceback" not in err, err[-2000:]
