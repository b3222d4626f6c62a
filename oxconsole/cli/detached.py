"""The engine process: one run, headless, behind its control socket; and how a console starts it.

Why this module exists: under the live console the engine runs in a process of its own, started
detached from the terminal (its own session, output to `engine.log` beside the results), so that
rendering never competes with dispatch and closing the console or the terminal does not end the
run. It loads the workload with the very code the command line uses, so its errors read the same,
and writes `summary.json` beside the results before it tells its consoles the run has ended.

    python -m oxconsole.cli.detached --workload PATH [--set K=V ...] [--output P] [--resume]
                             [--summary-json P] [--progress-interval S] [--log P|-]
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from oxconsole.base.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_NOT_SAVED, BadInput, Parser
from oxconsole.cli.headless import print_summary, run_headless, served_lines, summary_writer, tell_where
from oxconsole.cli.prepare import LOG_NAME, SUMMARY_NAME, PreparedRun, check_progress_interval, prepare_run
from oxconsole.reports.hints import end_notes, resume_command
from oxconsole.reports.outputs import beside_journal, summary_stream

if TYPE_CHECKING:
    from oxconsole.control import RunEntry

__all__ = ["HostProcess", "main", "spawn_host", "spawn_sweep_host", "wait_listening"]


def _parser() -> Parser:
    p = Parser(
        prog="python -m oxconsole.cli.detached", description="Run one workload as an attachable engine."
    )
    p.add_argument("--workload", required=True, metavar="WORKLOAD.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", metavar="PATH", help="override [output] results")
    p.add_argument("--resume", action="store_true")
    p.add_argument(
        "--summary-json",
        metavar="PATH",
        help="also write the summary JSON to PATH (- = this process's stdout)",
    )
    p.add_argument("--progress-interval", type=float, default=2.0, metavar="S")
    p.add_argument(
        "--log",
        metavar="PATH",
        help=f"where progress and messages go (default: {LOG_NAME} beside the results, or "
        f"NAME.{LOG_NAME} beside NAME.jsonl; - = stderr)",
    )
    return p


def open_log(log: Path) -> int:
    """The engine log opened for appending, owner-only (0600, like the journal: it may quote
    responses); a log left readable by an older version is made owner-only. A descriptor."""
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) and mode & 0o077:  # never a terminal or a pipe given with --log
        with contextlib.suppress(OSError):  # not ours to change: leave it as it is
            os.fchmod(fd, 0o600)
    return fd


def _redirect_output(log: Path) -> None:
    """Send this process's stdout and stderr (fds 1 and 2) to the log, appended."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = open_log(log)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_progress_interval(ns.progress_interval)
        prep = prepare_run(ns.workload, ns.overrides, ns.output, ns.resume, ns.summary_json)
    except BadInput as e:
        print(f"oxconsole: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    log: Path | None = None
    if ns.log != "-":
        log = Path(ns.log) if ns.log else beside_journal(prep.results_path.resolve(), LOG_NAME)
        if log.resolve() != _fd_path(2):
            _redirect_output(log)
    print(
        f"oxconsole: run {prep.workload.name} (pid {os.getpid()}) started "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; results in {prep.results_path}",
        file=sys.stderr,
        flush=True,
    )
    stream = ns.summary_json if ns.summary_json and summary_stream(ns.summary_json) else None
    files = [beside_journal(prep.results_path.resolve(), SUMMARY_NAME)] + (
        [Path(ns.summary_json)] if ns.summary_json and not stream else []
    )
    before_end, saved = summary_writer(files)

    from oxconsole.workload import WorkloadError

    try:
        outcome = run_headless(prep, ns.progress_interval, before_end=before_end)
    except WorkloadError as e:  # found once the run started (e.g. --resume against a changed workload)
        print(f"oxconsole: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    for warning in outcome.warnings:
        print(f"oxconsole: warning: {warning}", file=sys.stderr)
    print_summary(outcome.summary, stream)
    tell_where(prep.results_path, saved + ([stream] if stream else []), log, prep.kept_aside)
    for line in served_lines(outcome):
        print(f"oxconsole: {line}", file=sys.stderr, flush=True)
    for note in end_notes(
        outcome.summary, lambda: resume_command(str(prep.workload.path), prep.overrides, prep.results_path)
    ):
        print(f"oxconsole: {note}", file=sys.stderr, flush=True)
    code = outcome.exit_code
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
    results: Path
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
    """Start the engine process detached from this terminal. A `summary_json` of `-` or
    /dev/stdout is not passed on: the console writes it (the engine's stdout is its log)."""
    folder = prep.results_path.resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    log = beside_journal(prep.results_path.resolve(), LOG_NAME)
    offset = log.stat().st_size if log.exists() else 0
    args = [
        sys.executable,
        "-m",
        "oxconsole.cli.detached",
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
    if summary_json and summary_stream(summary_json) is None:
        args += ["--summary-json", str(Path(summary_json).resolve())]
    return _detached(args, prep, log, offset)


def spawn_sweep_host(argv: list[str], prep: PreparedRun) -> HostProcess:
    """Start `oxconsole sweep ARGV --headless` detached from this terminal, in this folder, its
    output appended to the engine log beside the journal: the whole sweep behind one control
    socket, for a console to attach to."""
    folder = prep.results_path.resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    log = beside_journal(prep.results_path.resolve(), LOG_NAME)
    offset = log.stat().st_size if log.exists() else 0
    return _detached([sys.executable, "-m", "oxconsole", "sweep", *argv, "--headless"], prep, log, offset)


def _detached(args: list[str], prep: PreparedRun, log: Path, offset: int) -> HostProcess:
    # The journal's lock goes with the run: the engine process adopts the descriptor it inherits.
    fds, env = ((), None) if prep.lock is None else _handover(prep)
    with open(open_log(log), "ab") as f:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=f,
            start_new_session=True,  # no SIGHUP/SIGINT from this terminal
            close_fds=True,
            pass_fds=fds,
            env=env,
        )
    return HostProcess(proc, prep.results_path, log, offset, prep.workload.name)


def _handover(prep: PreparedRun) -> tuple[tuple[int, ...], dict[str, str]]:
    assert prep.lock is not None
    fd, env = prep.lock.handover()
    return (fd,), {**os.environ, **env}


def _tail(log: Path, offset: int = 0, lines: int = 20) -> str:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, min(offset, os.path.getsize(log))))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def wait_listening(
    host: HostProcess,
    *,
    timeout: float = 10.0,
    show_end: Callable[[dict[str, Any], Path], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> RunEntry | int:
    """The run's registry entry once its socket is up; else an exit code, having said why (to
    `say`, default stderr).

    A run over before the console could open is shown by `show_end(summary, results)` (default:
    its summary table)."""
    tell = say if say is not None else _stderr
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
            summary = beside_journal(host.results.resolve(), SUMMARY_NAME)
            if rc in (0, 1, EXIT_NOT_SAVED) and summary.exists() and summary.stat().st_mtime >= started - 1:
                # over before the console could open: show what it did
                data = orjson.loads(summary.read_bytes())
                if show_end is not None:
                    show_end(data, host.results)
                else:
                    print_summary(data, None)
                return rc
            tail = _tail(log, offset)
            tell(
                f"oxconsole: the engine process for {name} exited (code {rc}) before the console "
                f"could attach; the end of {log}:\n{tail}"
            )
            return rc if rc == EXIT_INTERRUPTED else EXIT_BAD_INPUT
        time.sleep(0.05)
    proc.terminate()
    tell(
        f"oxconsole: the engine process for {name} (pid {proc.pid}) did not open its control socket "
        f"within {timeout:g}s; it was stopped. The end of {log}:\n{_tail(log, offset)}"
    )
    return EXIT_BAD_INPUT


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
