"""The engine process: one run, headless, behind its control socket; and how a console starts it.

Why this module exists: under the live console the engine runs in a process of its own, started
detached from the terminal (its own session, output to `engine.log` beside the results), so that
rendering never competes with dispatch and closing the console or the terminal does not end the
run. It loads the workload with the very code the command line uses, so its errors read the same,
and writes `summary.json` beside the results before it tells its consoles the run has ended.

    python -m oxconsole.host --workload PATH [--set K=V ...] [--output P] [--resume]
                             [--summary-json P] [--progress-interval S] [--log P|-]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from oxconsole.headless import report_outcome, run_headless
from oxconsole.runprep import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NOT_SAVED,
    LOG_NAME,
    SUMMARY_NAME,
    BadInput,
    Parser,
    PreparedRun,
    check_progress_interval,
    prepare_run,
    write_json,
)

if TYPE_CHECKING:
    from oxconsole.control import RunEntry
    from oxconsole.engine.runner import RunOutcome

__all__ = ["HostProcess", "main", "spawn_host", "wait_listening"]


def _parser() -> Parser:
    p = Parser(prog="python -m oxconsole.host", description="Run one workload as an attachable engine.")
    p.add_argument("--workload", required=True, metavar="WORKLOAD.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", metavar="PATH", help="override [output] results")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--summary-json", metavar="PATH", help="also write the summary JSON to PATH")
    p.add_argument("--progress-interval", type=float, default=2.0, metavar="S")
    p.add_argument(
        "--log",
        metavar="PATH",
        help=f"where progress and messages go (default: {LOG_NAME} beside the results; - = stderr)",
    )
    return p


def _redirect_output(log: Path) -> None:
    """Send this process's stdout and stderr (fds 1 and 2) to the log, appended."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_progress_interval(ns.progress_interval)
        prep = prepare_run(ns.workload, ns.overrides, ns.output, ns.resume)
    except BadInput as e:
        print(f"oxconsole: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    folder = prep.results_path.resolve().parent
    if ns.log != "-":
        log = Path(ns.log) if ns.log else folder / LOG_NAME
        if log.resolve() != _fd_path(2):
            _redirect_output(log)
    print(
        f"oxconsole: run {prep.workload.name} (pid {os.getpid()}) started "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; results in {prep.results_path}",
        file=sys.stderr,
        flush=True,
    )

    def before_end(outcome: RunOutcome) -> None:
        try:
            write_json(folder / SUMMARY_NAME, outcome.summary)
            if ns.summary_json:
                write_json(Path(ns.summary_json), outcome.summary)
        except OSError as e:
            print(f"oxconsole: could not write the summary: {e}", file=sys.stderr, flush=True)

    from oxconsole.workload import WorkloadError

    try:
        outcome = run_headless(prep, ns.progress_interval, before_end=before_end)
    except WorkloadError as e:  # found once the run started (e.g. --resume against a changed workload)
        print(f"oxconsole: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    code = report_outcome(outcome, None, prep)
    print(f"oxconsole: run {prep.workload.name} ended, exit code {code}", file=sys.stderr, flush=True)
    return code


def _fd_path(fd: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}")).resolve()
    except OSError:
        return None


# --- the console's side: start the engine process and wait until it listens ---------------------
@dataclass
class HostProcess:
    proc: subprocess.Popen[bytes]
    log: Path
    log_offset: int
    """Size of the log before this process started: what it wrote comes after."""
    name: str


def spawn_host(
    prep: PreparedRun,
    *,
    resume: bool,
    summary_json: str | None,
    progress_interval: float,
) -> HostProcess:
    """Start the engine process detached from this terminal."""
    folder = prep.results_path.resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / LOG_NAME
    offset = log.stat().st_size if log.exists() else 0
    args = [
        sys.executable,
        "-m",
        "oxconsole.host",
        "--workload",
        str(Path(prep.workload.path).resolve()),
        "--output",
        str(prep.results_path.resolve()),
        "--progress-interval",
        repr(progress_interval),
    ]
    for o in prep.overrides:
        args += ["--set", o]
    if resume:
        args.append("--resume")
    if summary_json:
        args += ["--summary-json", str(Path(summary_json).resolve())]
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=f,
            start_new_session=True,  # no SIGHUP/SIGINT from this terminal
            close_fds=True,
        )
    return HostProcess(proc, log, offset, prep.workload.name)


def _tail(log: Path, offset: int = 0, lines: int = 20) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, min(offset, os.path.getsize(log))))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def wait_listening(host: HostProcess, *, timeout: float = 10.0) -> RunEntry | int:
    """The run's registry entry once its socket is up; else an exit code, having said why."""
    from oxconsole.control import list_runs

    proc, name, log, offset = host.proc, host.name, host.log, host.log_offset
    started = time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in list_runs(clean=False):
            if e.pid == proc.pid:
                return e
        rc = proc.poll()
        if rc is not None:
            summary = log.parent / SUMMARY_NAME
            if rc in (0, 1, EXIT_NOT_SAVED) and summary.exists() and summary.stat().st_mtime >= started - 1:
                # over before the console could open: show what it did
                from oxconsole.report import render_summary

                print(render_summary(orjson.loads(summary.read_bytes())))
                return rc
            tail = _tail(log, offset)
            print(
                f"oxconsole: the engine process for {name} exited (code {rc}) before the console "
                f"could attach; the end of {log}:\n{tail}",
                file=sys.stderr,
            )
            return rc if rc == EXIT_INTERRUPTED else EXIT_BAD_INPUT
        time.sleep(0.05)
    proc.terminate()
    print(
        f"oxconsole: the engine process for {name} (pid {proc.pid}) did not open its control socket "
        f"within {timeout:g}s; it was stopped. The end of {log}:\n{_tail(log, offset)}",
        file=sys.stderr,
    )
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
