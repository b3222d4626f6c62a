"""Hostile servers, whole runs: the engine's peak memory and the run's wall time for each fault, and
how long a SIGTERM takes to stop a run stuck in endless stream lines.

Each case is a raw-bytes server on loopback (a thread of this process) that answers every request
with one fault at full size: the sizes of the probe that found them (a 4 GB error body, a gzip body
inflating to 512 MB, a 1 GB non-streamed answer, a 50 MB stream line), not the small bounds the
tests use. `oxconsole --headless` runs 4 requests at 4 in flight against it, one attempt each, a
30 s timeout; its peak RSS is the child's `ru_maxrss`. The first case, a server answering well, is
the baseline. The figures go in docs/reliability.md ("Hostile servers: whole runs").

    python bench/bench_hostile.py [--cases ok,error4g,gzip512m,answer1g,line50m,sigterm]
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30
CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
FINISH = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
OK_STREAM = CHUNK * 4 + FINISH + b"data: [DONE]\n\n"
SSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
Answer = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> bool:
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = conn.recv(65536)
        if not got:
            return False
        buf += got
    head, _, body = buf.partition(b"\r\n\r\n")
    length = next(
        (int(x.split(b":", 1)[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")), 0
    )
    while len(body) < length:
        got = conn.recv(65536)
        if not got:
            return False
        body += got
    return True


def _send_many(conn: socket.socket, piece: bytes, total: int) -> None:
    sent = 0
    while sent < total:
        conn.sendall(piece)
        sent += len(piece)


def ok(conn: socket.socket) -> None:
    conn.sendall(SSE + b"transfer-encoding: identity\r\nconnection: close\r\n\r\n" + OK_STREAM)


def error4g(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n")
    conn.sendall(b"content-length: %d\r\nconnection: close\r\n\r\n" % (4 * GIB))
    _send_many(conn, b'{"error":"' + b"x" * (MIB - 10), 4 * GIB)


_BOMB: list[bytes] = []


def gzip512m(conn: socket.socket) -> None:
    if not _BOMB:
        _BOMB.append(gzip.compress(b"\0" * (512 * MIB), compresslevel=9))
    bomb = _BOMB[0]
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n")
    conn.sendall(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(bomb) + bomb)


def answer1g(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n")
    _send_many(conn, b'{"choices":[{"message":{"content":"' + b"x" * (MIB - 40), GIB)


def line50m(conn: socket.socket) -> None:
    conn.sendall(SSE + b"connection: close\r\n\r\n" + b'data: {"x":"')
    _send_many(conn, b"x" * 65536, 50 * MIB)
    conn.sendall(b'"}\n\n' + OK_STREAM)


def endless_lines(conn: socket.socket) -> None:
    conn.sendall(SSE + b"connection: close\r\n\r\n")
    while True:  # a well-formed stream that never ends: the stream bound is 15 minutes away
        conn.sendall(CHUNK * 10)
        time.sleep(0.01)


CASES: dict[str, tuple[Answer, bool, str]] = {
    "ok": (ok, True, "a server answering well (baseline)"),
    "error4g": (error4g, False, "HTTP 500 with a 4 GB body"),
    "gzip512m": (gzip512m, False, "gzip body inflating to 512 MB"),
    "answer1g": (answer1g, False, "1 GB non-streamed answer"),
    "line50m": (line50m, True, "one 50 MB stream line"),
    "sigterm": (endless_lines, True, "endless stream lines, SIGTERM 2 s into the first request"),
}


def serve(answer: Answer) -> tuple[socket.socket, int]:
    srv = socket.create_server(("127.0.0.1", 0))
    srv.listen(64)

    def one(conn: socket.socket) -> None:
        try:
            if _read_request(conn):
                print("request", flush=True)  # for the SIGTERM case: a request is in flight
                answer(conn)
        except OSError:
            pass  # the client went away: what a bounded read does
        finally:
            conn.close()

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return srv, srv.getsockname()[1]


def workload(folder: Path, port: int, stream: bool) -> Path:
    p = folder / "hostile.toml"
    p.write_text(
        f"""[run]
concurrency = 4
requests = 4
timeout = "30s"
grace = "2s"
stream = {"true" if stream else "false"}

[retry]
max_attempts = 1

[endpoints.h]
base_url = "http://127.0.0.1:{port}/v1"

[[models]]
name = "m"
endpoint = "h"

[prompts]
synthetic = {{ count = 4, input_tokens = 10, output_tokens = 4 }}

[output]
results = "{folder / "out"}"
"""
    )
    return p


def serve_main(name: str) -> None:
    """`--serve CASE`: the server alone, in its own process (so the run's peak RSS is its own):
    prints its port, serves until stdin closes."""
    if name == "gzip512m":
        _BOMB.append(gzip.compress(b"\0" * (512 * MIB), compresslevel=9))
    _, port = serve(CASES[name][0])
    print(port, flush=True)
    sys.stdin.read()


def run_case(name: str) -> dict[str, object]:
    _, stream, what = CASES[name]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    with tempfile.TemporaryDirectory() as tmp:
        path = workload(Path(tmp), port, stream)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "oxconsole", str(path), "--headless"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        stop_s = None
        if name == "sigterm":
            server.stdout.readline()  # the first request arrived
            time.sleep(2.0)
            t_term = time.monotonic()
            proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        if name == "sigterm":
            stop_s = time.monotonic() - t_term
        assert proc.stdout is not None and proc.stderr is not None
        out = proc.stdout.read().decode(errors="replace")
        err = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
    server.kill()
    server.wait()
    if os.waitstatus_to_exitcode(status) == 2:
        sys.exit(f"bad workload for {name}: {err[-500:]}")
    kinds = ("http_", "bad_response", "timeout", "connection")
    errors = sorted({w.rstrip(":") for w in out.split() if w.startswith(kinds)})
    return {
        "case": name,
        "what": what,
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "stop_s": None if stop_s is None else round(stop_s, 2),
        "classes": ",".join(errors),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve_main(args.serve)
        return
    resource.setrlimit(resource.RLIMIT_AS, (8 * GIB, 8 * GIB))  # a regression must not take the machine
    print(f"{'case':<10} {'exit':>4} {'wall s':>7} {'peak RSS MB':>12} {'stop s':>7}  classes / what")
    for name in args.cases.split(","):
        r = run_case(name)
        stop = "-" if r["stop_s"] is None else f"{r['stop_s']:.2f}"
        print(
            f"{r['case']:<10} {r['exit']:>4} {r['wall_s']:>7.2f} {r['peak_rss_mb']:>12.1f} {stop:>7}  "
            f"{r['classes'] or '-'} / {r['what']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
