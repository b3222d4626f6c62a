"""Stopped runs are not complete: exit 130 whenever a run stops before every request was sent.

A run stopped by Ctrl-C or SIGTERM (headless), by `q` in the console or by a `Stop` command over
the control socket says how many requests it did not send (`requests.not_sent`, the totals line)
and prints the command that sends them; it exits 130. A run that sent everything exits 0 (or 1),
with `not_sent` 0, also when a stop only cut its drain (what was cancelled is `error`
`cancelled`: exit 1); a run that reaches its `run.duration` has ended normally. Real processes
and the embedded simulator, with one and with two worker processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.commands import Stop
from oxconsole.engine.outcome import RunOutcome
from oxconsole.engine.runner import Engine
from oxconsole.workload import check_prompts
from tests.support import oxconsole_here, q_in_a_terminal, until, wait_records
from tests.support.workloads import load_workload, write_workload


def write(
    folder: Path,
    *,
    count: int,
    requests: int = 0,
    duration: str = "0s",
    ttft: str = "40ms",
    workers: int = 1,
) -> Path:
    """folder/w.toml: `count` prompts at 8 in flight (cycled for `requests` or `duration`), each
    answered whole `ttft` after admission; the journal out/results.jsonl."""
    run = {"concurrency": 8, "requests": requests, "duration": duration, "grace": "5s", "workers": workers}
    sets = {
        "name": "exits",
        "run": run,
        "output.results": "out/results.jsonl",
        "prompts.synthetic": {"count": count, "input_tokens": 5, "output_tokens": 4},
        "sim.models.m.ttft": ttft,
    }
    return write_workload("sim_exact", folder, sets, file="w.toml")


def oxc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command line in this process (`oxconsole_here`): the exit code `cli.main` returns is the
    process's (`python -m oxconsole` exits with it). Runs that take a signal are processes."""
    return oxconsole_here(*args, cwd=cwd)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def resume_line(stderr: str) -> tuple[int, str]:
    """The count and the command of the end's `N requests not sent; continue with: CMD` line."""
    [line] = [x for x in stderr.splitlines() if "not sent; continue with:" in x]
    head, _, cmd = line.partition("; continue with: ")
    return int(head.split()[1].replace(",", "")), cmd


# --- headless -------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.slow
def test_ctrl_c_midway_exits_130_and_says_how_to_send_the_rest(tmp_path: Path, workers: int) -> None:
    write(tmp_path, count=400, workers=workers)
    journal = tmp_path / "out" / "run.jsonl"
    flags = ["--set", "run.concurrency=8", "--output", "out/run.jsonl"]
    p = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "w.toml", "--headless", *flags, "--summary-json", "s.json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        wait_records(journal, 40, p)
        # as Ctrl-C in a terminal: to every process of the group (worker processes included)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "ended unexpectedly" not in err, err
    recs = lines(journal)
    assert len(recs) >= 40, len(recs)  # all flushed by the exit
    if workers == 1:  # in flight finished within the grace time
        assert [r for r in recs if r["status"] != "ok"] == []
    s = json.loads((tmp_path / "s.json").read_text())
    not_sent = s["requests"]["not_sent"]
    assert not_sent > 0 and not_sent == 400 - len(recs) and s["requests"]["total"] == len(recs)
    assert f"{not_sent:,} not sent" in out  # the totals line
    n, cmd = resume_line(err)
    assert n == not_sent
    assert cmd == "oxconsole w.toml --resume --set run.concurrency=8 --output out/run.jsonl"
    # ... and the command it prints sends the rest
    args = shlex.split(cmd)[1:]
    r = oxc(*args, "--summary-json", "s2.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "s2.json").read_text())["requests"]["not_sent"] == 0
    assert "not sent" not in r.stdout + r.stderr
    ok = [x["id"] for x in lines(journal) if x["status"] == "ok"]
    assert len(ok) == len(set(ok)) == 400


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_complete_run_exits_0_with_nothing_not_sent(tmp_path: Path, workers: int) -> None:
    write(tmp_path, count=30, ttft="10ms", workers=workers)
    r = oxc("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "s.json").read_text())["requests"]["not_sent"] == 0
    assert "not sent" not in r.stdout + r.stderr and "--resume" not in r.stderr


@pytest.mark.slow
def test_a_run_that_reaches_its_duration_has_ended_not_stopped(tmp_path: Path) -> None:
    # prompts cycled until run.duration: its end is the duration
    write(tmp_path, count=5, duration="1s", ttft="20ms")
    r = oxc("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["requests"]["total"] > 5 and s["requests"]["not_sent"] == 0
    assert "not sent" not in r.stdout + r.stderr
    # a request count the duration cuts short: not 130 either, but what was not sent is said
    write(tmp_path, count=5, requests=100_000, duration="1s", ttft="20ms")
    r = oxc("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["requests"]["not_sent"] == 100_000 - s["requests"]["total"] > 0
    assert resume_line(r.stderr)[0] == s["requests"]["not_sent"]


# --- in process: a stop that only cuts the drain ------------------------------------------------
async def test_a_stop_that_cancels_requests_after_everything_was_sent_is_130(tmp_path: Path) -> None:
    sets = {
        "run": {"concurrency": 6},
        "prompts.synthetic": {"count": 6, "input_tokens": 5, "output_tokens": 5},
        "sim.models.m": {"ttft": "5s"},
    }
    w = load_workload("sim_exact", tmp_path, sets)
    e = Engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)

    async def stop_when_all_sent() -> None:
        while e.shard.in_flight < 6 or not e.dispatch_complete:
            await asyncio.sleep(0.005)
        e.apply(Stop(cancel=True))

    stopper = asyncio.create_task(stop_when_all_sent())
    out = await asyncio.wait_for(e.run(), 30)
    await stopper
    assert out.summary["requests"] == {
        "total": 6,
        "ok": 0,
        "error": 0,
        "cancelled": 6,
        "retried": 0,
        "fallbacks": 0,
        "sessions": 1,
        "not_sent": 0,
    }
    assert out.summary["errors"] == {}  # a cancellation is the stop's, not an error
    assert out.exit_code == 130  # every request was sent, but 6 did not finish: --resume sends them


def test_exit_code_precedence() -> None:
    def code(**kw: Any) -> int:
        base: dict[str, Any] = {"summary": {}, "ok": 1, "error": 0, "interrupted": False}
        return RunOutcome(**(base | kw)).exit_code

    assert code() == 0
    assert code(error=1) == 1 and code(crashed=True) == 1
    assert code(interrupted=True, not_sent=3, error=1) == 130
    assert code(interrupted=True, not_sent=None) == 130  # unknown: a cycling run stopped early
    assert code(interrupted=True, not_sent=0, error=2) == 1  # the stop only cut the drain
    assert code(interrupted=False, not_sent=0, cancelled=2, error=1) == 130  # it cancelled some
    assert code(journal_failure="r.jsonl: No space left on device", interrupted=True, not_sent=9) == 4


# --- the console and the control socket: the engine in a process of its own ----------------------
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.slow
async def test_stop_over_the_socket_exits_130(run_dirs: Path, tmp_path: Path, workers: int) -> None:
    from oxconsole.control import SocketSource, list_runs

    write(tmp_path, count=600, workers=workers)
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.cli.detached", "--workload", "w.toml", "--log", "-"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        await until(lambda: bool(list_runs()), 20)
        [entry] = list_runs()
        src = SocketSource.from_entry(entry, hz=10.0)
        await src.start()
        await until(lambda: (s := src.latest()) is not None and s.counts.total >= 30, 20)
        src.send(Stop())
        assert await src.wait_end(20.0)
        await src.close()
        assert src.exit_code == 130
        out, err = await asyncio.to_thread(proc.communicate, timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    summary = src.final_summary
    assert summary is not None
    recs = lines(tmp_path / "out" / "results.jsonl")
    assert summary["requests"]["not_sent"] == 600 - len(recs) > 0
    assert f"{600 - len(recs)} not sent" in out  # the table, in the engine process's output
    assert resume_line(err) == (summary["requests"]["not_sent"], "oxconsole w.toml --resume")


def pilot_console(
    source: Any, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
) -> str:
    """The real console app, driven by Textual's Pilot instead of a terminal: `q` once some
    requests are done, then wait for the app to leave (the run drained)."""
    from oxconsole.ui.app import ConsoleApp

    async def go() -> str:
        app = ConsoleApp(source, theme_dirs=[], cursor_blink=False, refresh=refresh)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(lambda: (s := source.latest()) is not None and s.counts.total >= 30, 20)
            await pilot.press("q")
            await until(lambda: app.return_value is not None, 20)
        return str(app.return_value)

    return asyncio.run(go())


@pytest.mark.slow
def test_q_in_the_console_exits_130(
    run_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oxconsole.cli import console
    from oxconsole.cli import main as cli

    count = 6000  # 30 s of work: q comes long before its end, however loaded the machine
    write(tmp_path, count=count)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(console, "load_console", lambda: (pilot_console, ""))
    # before: `210 total 210 ok`, exit 0, as if the run were complete
    assert cli.main(["w.toml", "--set", "run.grace=2s"]) == 130
    cap = capsys.readouterr()
    recs = lines(tmp_path / "out" / "results.jsonl")
    not_sent = count - len(recs)
    assert not_sent > 0 and f"{len(recs):,} total" in cap.out and f"{not_sent:,} not sent" in cap.out
    assert resume_line(cap.err) == (not_sent, "oxconsole w.toml --resume --set run.grace=2s")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["requests"]["not_sent"] == not_sent


@pytest.mark.slow
def test_q_in_a_real_terminal_exits_130(run_dirs: Path, tmp_path: Path) -> None:
    """The same as a user does it: `oxconsole w.toml` in a terminal (a pty), `q` once it shows."""
    write(tmp_path, count=2000, ttft="100ms")  # 25 s if left alone
    journal = tmp_path / "out" / "results.jsonl"
    rc, after = q_in_a_terminal(["w.toml"], cwd=tmp_path, journal=journal, size=(30, 100))
    assert rc == 130, after
    not_sent = 2000 - len(lines(journal))
    assert not_sent > 0 and f"{not_sent:,} not sent" in after
    assert f"{not_sent:,} requests not sent; continue with: oxconsole w.toml --resume" in after
