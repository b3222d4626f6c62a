"""The control socket, the run registry, the engine process, `attach` and `ps`: real sockets, real
processes, the embedded simulator. Each run is a few seconds of exact simulator timing."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole import cli
from oxconsole.control import (
    NO_RUN,
    ControlServer,
    RunInfo,
    SocketSource,
    attach_main,
    list_runs,
    ps_main,
    runs_dir,
)
from oxconsole.engine.commands import Pause, Resume, SetConcurrency, Stop
from oxconsole.engine.runner import Engine
from oxconsole.source import LocalSource, RunSource
from oxconsole.workload import load_workload

REPO = Path(__file__).resolve().parents[1]


def workload_text(
    name: str, requests: int, results: Path, *, concurrency: int = 4, ttft: str = "200ms"
) -> str:
    """Closed loop, exact timing: `requests / concurrency * ttft` seconds."""
    return textwrap.dedent(
        f"""
        name = "{name}"
        [run]
        concurrency = {concurrency}
        requests = {requests}
        grace = "2s"
        [output]
        results = "{results}"
        [endpoints.default]
        base_url = "sim"
        [[models]]
        name = "m"
        [prompts]
        synthetic = {{ count = {requests}, input_tokens = 10, output_tokens = 4 }}
        [sim.models."m"]
        ttft = "{ttft}"
        tokens_per_s = 0
        output_tokens = 4
        jitter = 0
        """
    )


@pytest.fixture
def run_dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Private runtime and state folders (short paths: a socket path has ~100 bytes)."""
    base = Path(tempfile.mkdtemp(prefix="oxc", dir="/tmp"))
    rt = base / "rt"
    rt.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def write_workload(tmp_path: Path) -> Callable[..., Path]:
    def write(name: str, requests: int, **kw: Any) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(workload_text(name, requests, tmp_path / name / "results.jsonl", **kw))
        return path

    return write


def engine_factory(path: Path) -> Callable[[], Engine]:
    def make() -> Engine:
        w = load_workload(path)
        return Engine(w, results_path=w.results_path(), total_expected=w.run.requests)

    return make


def info_for(path: Path, name: str) -> RunInfo:
    return RunInfo(name=name, workload_path=str(path), overrides=(), results_path=None)


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for a condition")
        await asyncio.sleep(0.02)


def mode(p: str | Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


# --- in process -------------------------------------------------------------------------------
async def test_snapshots_and_commands_over_the_socket(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("inproc", 80)  # 4 s if left alone
    local = LocalSource(engine_factory(path), serve=info_for(path, "inproc"))
    await local.start()
    assert isinstance(local, RunSource)
    assert local.server_socket is not None
    sock = local.server_socket
    folder = runs_dir()
    assert mode(folder) == 0o700
    assert mode(sock) == 0o600
    assert mode(sock.with_suffix(".json")) == 0o600

    client = SocketSource(sock, hz=4.0)
    assert isinstance(client, RunSource)
    await client.start()
    assert client.connected and client.name == "inproc" and client.pid == os.getpid()
    await until(lambda: client.latest() is not None)
    n0, t0 = client.snapshots_received, time.monotonic()
    await asyncio.sleep(1.5)
    rate = (client.snapshots_received - n0) / (time.monotonic() - t0)
    assert 2.5 <= rate <= 5.5, rate

    client.send(SetConcurrency(9))
    await until(lambda: (s := client.latest()) is not None and s.gauges.concurrency == 9)
    engine = local.engine
    assert engine is not None and engine.slots.limit == 9
    own = local.latest()
    assert own is not None
    assert any(c["what"] == "concurrency" and c["to"] == 9 for c in own.changes)

    client.send(Stop())
    assert await client.wait_end(10.0)
    assert client.finished and not client.connected
    assert client.exit_code == 0
    assert client.final_summary is not None
    assert any(c["what"] == "concurrency" and c["to"] == 9 for c in client.final_summary["changes"])
    assert client.final_summary["requests"]["total"] < 80
    outcome = await asyncio.to_thread(local.wait_done, 10.0)
    assert outcome is not None and outcome.exit_code == 0
    assert local.finished
    await client.close()
    await local.close()
    assert not sock.exists() and not sock.with_suffix(".json").exists()


async def test_a_client_that_never_reads_does_not_slow_the_engine(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("slow", 60)  # 3.0 s of exact timing

    async def run(stuck: bool) -> tuple[float, int]:
        engine = engine_factory(path)()
        task = asyncio.ensure_future(engine.run())
        await asyncio.sleep(0)
        server = ControlServer(engine, info_for(path, "slow"), folder=run_dirs / "srv", max_buffer=4096)
        await server.start()
        raw: socket.socket | None = None
        if stuck:
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.connect(str(server.socket_path))
            raw.sendall(b'{"op":"hello","hz":30}\n')  # ... and never reads a byte
        try:
            outcome = await asyncio.wait_for(task, 20.0)
            t = time.monotonic()
            await server.finish(outcome)
            assert time.monotonic() - t < 2.0  # the end message does not wait for a stuck client
        finally:
            if raw is not None:
                raw.close()
        return float(outcome.summary["duration_s"]), server.frames_skipped

    base, _ = await run(stuck=False)
    slowed, skipped = await run(stuck=True)
    assert skipped > 0
    assert slowed < base * 1.1 + 0.3, (base, slowed)


# --- real processes ---------------------------------------------------------------------------
def ps_json() -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "oxconsole", "ps", "--json"], capture_output=True, check=True, timeout=30
    )
    data = orjson.loads(out.stdout)
    assert isinstance(data, list)
    return data


async def test_host_process_ps_attach_pause_resume_stop(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("hosted", 200)  # 10 s if left alone
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.host", "--workload", str(path), "--set", "run.grace=1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        entries: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not entries and time.monotonic() < deadline:
            entries = await asyncio.to_thread(ps_json)
        assert [(e["name"], e["pid"]) for e in entries] == [("hosted", proc.pid)]
        e = entries[0]
        assert e["workload_path"] == str(path.resolve()) and e["overrides"] == ["run.grace=1"]
        assert mode(e["socket"]) == 0o600 and mode(Path(e["socket"]).parent) == 0o700

        [entry] = list_runs()
        src = SocketSource.from_entry(entry, hz=10.0)
        await src.start()
        await until(lambda: (s := src.latest()) is not None and s.gauges.state == "running", 10)
        src.send(Pause())
        await until(lambda: (s := src.latest()) is not None and s.gauges.state == "paused")
        await asyncio.sleep(0.5)  # a dispatch already waiting for a slot may still go out
        s = src.latest()
        assert s is not None
        dispatched = s.gauges.dispatched
        await asyncio.sleep(0.5)
        s = src.latest()
        assert s is not None and s.gauges.dispatched == dispatched
        src.send(Resume())
        await until(lambda: (s := src.latest()) is not None and s.gauges.dispatched > dispatched)
        src.send(Stop())
        assert await src.wait_end(15.0)
        assert src.exit_code == 0
        summary = src.final_summary
        assert summary is not None and 0 < summary["requests"]["total"] < 200
        assert [c["what"] for c in summary["changes"]] == ["paused", "paused"]
        await src.close()
        assert await asyncio.to_thread(proc.wait, 15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    proc.stderr.close()
    assert not Path(e["socket"]).exists()
    assert list_runs() == []
    folder = path.parent / "hosted"
    assert orjson.loads((folder / "summary.json").read_bytes())["requests"] == summary["requests"]
    log = (folder / "engine.log").read_text()
    assert "run hosted" in log and "ended, exit code 0" in log


def test_a_headless_run_is_listed_and_stops_on_sigterm(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("headless", 200)
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", str(path), "--headless"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while not (runs := list_runs()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(e.name, e.pid) for e in runs] == [("headless", proc.pid)]
        while list_runs()[0].state != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert b"requests" in out
    assert list_runs() == []


def fake_console(monkeypatch: pytest.MonkeyPatch, action: str, seen: list[str]) -> None:
    """Stand in for `oxconsole.ui.app.run_console`: wait for a snapshot, then quit or detach."""

    def run_console(source: RunSource, *, theme: str | None = None, refresh: float = 4.0) -> str:
        async def go() -> None:
            await source.start()
            await until(lambda: source.latest() is not None, 10)
            seen.append(source.name)
            if action == "quit":
                source.send(Stop())
            await source.close()

        asyncio.run(go())
        if action == "crash":
            raise RuntimeError("console bug")
        return action

    mod = types.ModuleType("oxconsole.ui.app")
    mod.run_console = run_console  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "oxconsole.ui.app", mod)


def test_console_detaches_and_attach_brings_it_back(
    run_dirs: Path,
    write_workload: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_workload("detached", 200)
    seen: list[str] = []
    fake_console(monkeypatch, "detach", seen)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main([str(path), "--set", "run.grace=1"]) == 0
    out = capsys.readouterr().out
    [entry] = list_runs()
    assert seen == ["detached"]
    assert f"run detached goes on (pid {entry.pid}); re-attach with: oxconsole attach detached" in out

    fake_console(monkeypatch, "crash", seen)
    assert attach_main([]) == 1  # a console that fails leaves the run going, and says so
    cap = capsys.readouterr()
    assert "RuntimeError: console bug" in cap.err and "run detached goes on" in cap.err

    fake_console(monkeypatch, "quit", seen)
    assert attach_main(["detached"]) == 0
    out = capsys.readouterr().out
    assert seen == ["detached", "detached", "detached"]
    assert "requests" in out and "ok" in out  # the summary table
    deadline = time.monotonic() + 10
    while list_runs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list_runs() == []
    assert (path.parent / "detached" / "summary.json").exists()


def test_console_falls_back_to_headless_without_a_ui(
    run_dirs: Path,
    write_workload: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_workload("fallback", 8, concurrency=8, ttft="10ms")
    monkeypatch.setitem(sys.modules, "oxconsole.ui.app", None)  # import fails
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert cli.main([str(path)]) == 0
    cap = capsys.readouterr()
    assert "running headless" in cap.err
    assert "8 ok" in cap.out


# --- attach / ps without runs, registry hygiene -------------------------------------------------
def test_attach_and_ps_with_no_run(run_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert attach_main([]) == 2
    assert NO_RUN in capsys.readouterr().err
    assert ps_main([]) == 0
    assert NO_RUN in capsys.readouterr().out
    assert ps_main(["--json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == []


def test_ps_removes_stale_entries(run_dirs: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    d = runs_dir()
    sock = d / f"gone-{dead.pid}.sock"
    sock.write_bytes(b"")
    entry = {"name": "gone", "pid": dead.pid, "socket": str(sock), "started_at": 1.0, "updated_at": 1.0}
    (d / f"gone-{dead.pid}.json").write_bytes(orjson.dumps(entry))
    (d / f"orphan-{dead.pid}.sock").write_bytes(b"")
    assert list_runs() == []
    assert sorted(os.listdir(d)) == []


def test_host_reports_bad_input_like_the_cli(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nconcurrency = "fifty"\n')
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole.host", "--workload", str(bad), "--log", "-"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "run.concurrency" in r.stderr and "Traceback" not in r.stderr
