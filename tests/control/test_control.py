"""The control socket, the run registry, the engine process, `attach` and `ps`: real sockets, real
processes, the embedded simulator. Each run is a few seconds of exact simulator timing; nothing
here reads the clock tighter than "a frame or two" or "the run's own schedule"."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import types
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.cli import main as cli
from oxconsole.cli.attach import attach_main
from oxconsole.cli.detached import HostProcess, wait_listening
from oxconsole.cli.ps import NO_RUN, ps_main
from oxconsole.control import (
    ControlServer,
    LocalSource,
    RunInfo,
    RunSource,
    SocketSource,
    list_runs,
    runs_dir,
)
from oxconsole.engine.commands import Pause, Resume, SetConcurrency, Stop
from oxconsole.engine.runner import Engine
from oxconsole.workload import load_workload
from tests.support import until, wait_until, workloads


@pytest.fixture
def write_workload(tmp_path: Path) -> Callable[..., Path]:
    """Closed loop, exact timing (tests/workloads/sim_exact.toml): `requests / concurrency * ttft`
    seconds; `name` names the run, its file and its results folder."""

    def write(name: str, requests: int, *, concurrency: int = 4, ttft: str = "200ms") -> Path:
        sets = {
            "name": name,
            "run.concurrency": concurrency,
            "run.requests": requests,
            "prompts.synthetic.count": requests,
            "sim.models.m.ttft": ttft,
            "output.results": str(tmp_path / name / "results.jsonl"),
        }
        return workloads.write_workload("sim_exact", tmp_path, sets, file=f"{name}.toml")

    return write


def engine_factory(path: Path) -> Callable[[], Engine]:
    def make() -> Engine:
        w = load_workload(path)
        return Engine(w, results_path=w.results_path(), total_expected=w.run.requests)

    return make


def info_for(path: Path, name: str) -> RunInfo:
    return RunInfo(name=name, workload_path=str(path), overrides=(), results_path=None)


def mode(p: str | Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


# --- in process -------------------------------------------------------------------------------
@pytest.mark.slow
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
    # frames come at the client's 4 Hz: never faster (one catch-up frame after a stall at most),
    # and some do come (a busy machine sends fewer, never none)
    n0, t0 = client.snapshots_received, time.monotonic()
    await asyncio.sleep(1.5)
    frames, took = client.snapshots_received - n0, time.monotonic() - t0
    assert 2 <= frames <= 4 * took + 2, (frames, took)

    # the server's own figures cross the socket with the rest (the simulator's /metrics, read as vLLM)
    def server_seen() -> bool:
        s = client.latest()
        server = None if s is None else s.gauges.server
        return server is not None and server.get("default", {}).get("engine") == "vllm"

    await until(server_seen, what="the server's figures in the attached snapshot")
    snap = client.latest()
    assert snap is not None and snap.gauges.server is not None
    assert snap.gauges.server["default"]["running"] <= 4, snap.gauges.server

    client.send(SetConcurrency(9))
    await until(lambda: (s := client.latest()) is not None and s.gauges.concurrency == 9)
    engine = local.engine
    assert isinstance(engine, Engine) and engine.shard.slots.limit == 9
    own = local.latest()
    assert own is not None
    assert any(c["what"] == "concurrency" and c["to"] == 9 for c in own.changes), [c for c in own.changes][:5]

    client.send(Stop())
    assert await client.wait_end(10.0)
    assert client.finished and not client.connected
    assert client.exit_code == 130  # stopped before every request was sent
    assert client.final_summary is not None
    assert any(c["what"] == "concurrency" and c["to"] == 9 for c in client.final_summary["changes"]), [
        c for c in client.final_summary["changes"]
    ][:5]
    assert client.final_summary["requests"]["total"] < 80
    outcome = await asyncio.to_thread(local.wait_done, 10.0)
    assert outcome is not None and outcome.exit_code == 130
    assert local.finished
    await client.close()
    await local.close()
    assert not sock.exists() and not sock.with_suffix(".json").exists()


@pytest.mark.slow
async def test_a_client_that_never_reads_does_not_slow_the_engine(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    """A client that asks for 30 frames a second and never reads: frames for it are skipped, the
    run keeps the simulator's exact schedule (40 requests / 4 slots x 200 ms = 2.0 s, never less),
    and the end message does not wait for it."""
    path = write_workload("slow", 40)
    engine = engine_factory(path)()
    task = asyncio.ensure_future(engine.run())
    await asyncio.sleep(0)
    server = ControlServer(engine, info_for(path, "slow"), folder=run_dirs / "srv", max_buffer=4096)
    await server.start()
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(str(server.socket_path))
    raw.sendall(b'{"op":"hello","hz":30}\n')  # ... and never reads a byte
    try:
        outcome = await asyncio.wait_for(task, 20.0)
        t = time.monotonic()
        await server.finish(outcome)
        finish_took = time.monotonic() - t
    finally:
        raw.close()
    assert server.frames_skipped > 0
    # blocked on the stuck client, the run (or the end) would wait for it: 20 s, then a minute
    assert 2.0 <= outcome.summary["duration_s"] < 2.0 * 2 + 1, outcome.summary["duration_s"]
    assert finish_took < 5.0  # END_DRAIN_S (1 s) for the clients that read, then it closes


# --- real processes ---------------------------------------------------------------------------
def ps_json() -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "oxconsole", "ps", "--json"], capture_output=True, check=True, timeout=30
    )
    data = orjson.loads(out.stdout)
    assert isinstance(data, list)
    return data


@pytest.mark.slow
async def test_host_process_ps_attach_pause_resume_stop(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("hosted", 200)  # 10 s if left alone
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole.cli.detached", "--workload", str(path), "--set", "run.grace=1"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        entries: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
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
        # closed loop, no rate limit: nothing is dispatched once Pause is applied, so the first
        # snapshot that says paused has the final count
        s = src.latest()
        assert s is not None
        dispatched = s.gauges.dispatched
        n = src.snapshots_received
        await until(lambda: src.snapshots_received >= n + 3)  # a few frames later
        s = src.latest()
        assert s is not None and s.gauges.dispatched == dispatched
        src.send(Resume())
        await until(lambda: (s := src.latest()) is not None and s.gauges.dispatched > dispatched)
        src.send(Stop())
        assert await src.wait_end(15.0)
        assert src.exit_code == 130  # stopped before every request was sent
        summary = src.final_summary
        assert summary is not None and 0 < summary["requests"]["total"] < 200
        assert [c["what"] for c in summary["changes"]] == ["paused", "paused"]
        await src.close()
        assert await asyncio.to_thread(proc.wait, 15) == 130
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
    assert "run hosted" in log and "ended, exit code 130" in log


@pytest.mark.slow
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
        wait_until(list_runs, timeout=90, what="the run's registry entry")
        assert [(e.name, e.pid) for e in list_runs()] == [("headless", proc.pid)]
        wait_until(lambda: list_runs()[0].state == "running", timeout=30, what="the run to start")
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

    def run_console(
        source: RunSource, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
    ) -> str:
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


@pytest.mark.slow
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
    assert attach_main(["detached"]) == 130  # stopped before every request was sent
    out = capsys.readouterr().out
    assert seen == ["detached", "detached", "detached"]
    assert "requests" in out and "ok" in out  # the summary table
    wait_until(lambda: not list_runs(), what="the run to leave the registry")
    assert (path.parent / "detached" / "summary.json").exists()


@pytest.mark.slow
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


def test_ps_removes_stale_entries_and_never_the_path_one_names(run_dirs: Path, tmp_path: Path) -> None:
    """A dead run's entry and socket go, an orphan socket goes, and an entry whose socket field
    names a path outside its own name removes only itself (never that path)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    d = runs_dir()
    sock = d / f"gone-{dead.pid}.sock"
    sock.write_bytes(b"")
    entry = {"name": "gone", "pid": dead.pid, "socket": str(sock), "started_at": 1.0, "updated_at": 1.0}
    (d / f"gone-{dead.pid}.json").write_bytes(orjson.dumps(entry))
    (d / f"orphan-{dead.pid}.sock").write_bytes(b"")
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    odd = {"name": "odd", "pid": dead.pid, "socket": str(precious), "started_at": 1.0, "updated_at": 1.0}
    (d / f"odd-{dead.pid}.json").write_bytes(orjson.dumps(odd))
    assert list_runs() == []
    assert precious.exists(), "a stale entry's socket path outside its own name was removed"
    assert sorted(os.listdir(d)) == [], f"the stale entry itself stayed: {sorted(os.listdir(d))}"


def test_host_reports_bad_input_like_the_cli(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[run]\nconcurrency = "fifty"\n')
    r = subprocess.run(
        [sys.executable, "-m", "oxconsole.cli.detached", "--workload", str(bad), "--log", "-"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "run.concurrency" in r.stderr and "Traceback" not in r.stderr


# --- several runs: ps lists them, attach picks one or says why not ------------------------------
@pytest.fixture
async def three_runs(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> AsyncIterator[list[ControlServer]]:
    """Three registered runs, two of them named "twin": real control servers on this loop, each
    with its own live pid (this process, and two idle children standing in for engine processes)."""
    stand_ins = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    path = write_workload("twin", 10)
    servers = []
    for name, pid in (("twin", os.getpid()), ("twin", stand_ins[0].pid), ("solo", stand_ins[1].pid)):
        info = RunInfo(name=name, workload_path=str(path), overrides=(), results_path=None, pid=pid)
        server = ControlServer(engine_factory(path)(), info)
        await server.start()
        servers.append(server)
    try:
        yield servers
    finally:
        for server in servers:
            await server.close()
        for p in stand_ins:
            p.kill()
            p.wait()


async def test_ps_lists_every_run(
    three_runs: list[ControlServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert ps_main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "PID", "STATE", "PROGRESS", "REQ/S", "ERR", "ELAPSED"]
    rows = sorted((line.split()[0], int(line.split()[1])) for line in lines[1:])
    assert rows == sorted((s.info.name, s.info.pid) for s in three_runs)
    assert ps_main(["--json"]) == 0
    entries = orjson.loads(capsys.readouterr().out)
    assert sorted(e["name"] for e in entries) == ["solo", "twin", "twin"]
    assert all(mode(e["socket"]) == 0o600 for e in entries), [e for e in entries if mode(e["socket"]) != 384][
        :5
    ]


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """Stand in for the console: record which run it was opened on, and detach."""
    seen: list[tuple[str, int | None]] = []

    def run_console(
        source: RunSource, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
    ) -> str:
        seen.append((source.name, getattr(source, "pid", None)))
        return "detach"

    mod = types.ModuleType("oxconsole.ui.app")
    mod.run_console = run_console  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "oxconsole.ui.app", mod)
    return seen


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "several runs are going; name one"),
        (["nope"], "no run named 'nope' is going"),
        (["twin"], "several runs are named 'twin'; name one as NAME-PID"),
    ],
    ids=["no-name", "unknown", "ambiguous"],
)
async def test_attach_says_which_runs_when_it_cannot_choose(
    three_runs: list[ControlServer],
    opened: list[tuple[str, int | None]],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    says: str,
) -> None:
    assert attach_main(argv) == 2
    assert opened == []
    err = capsys.readouterr().err
    assert says in err
    listed = {int(line.split()[1]) for line in err.splitlines() if line.split()[:1] in (["twin"], ["solo"])}
    named = argv[0] if argv and argv[0] == "twin" else None
    assert listed == {s.info.pid for s in three_runs if named in (None, s.info.name)}


async def test_attach_by_name_or_name_pid(
    three_runs: list[ControlServer],
    opened: list[tuple[str, int | None]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    twin = three_runs[1].info
    assert attach_main(["solo"]) == 0
    assert attach_main([f"twin-{twin.pid}"]) == 0
    assert opened == [("solo", three_runs[2].info.pid), ("twin", twin.pid)]
    out = capsys.readouterr().out
    # two runs share the name: the way back names the one left
    assert f"re-attach with: oxconsole attach twin-{twin.pid}" in out
    assert "re-attach with: oxconsole attach solo\n" in out


# --- the console's side of starting an engine process: when it never listens ------------------
def _host(tmp_path: Path, argv: list[str]) -> HostProcess:
    log = tmp_path / "engine.log"
    log.write_text("an earlier run's last line\n")
    offset = log.stat().st_size
    with open(log, "ab") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=f)
    return HostProcess(proc, tmp_path / "results.jsonl", log, offset, "w")


@pytest.mark.parametrize(("code", "returned"), [(3, 2), (130, 130)])
def test_wait_listening_when_the_engine_exits_first(
    run_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], code: int, returned: int
) -> None:
    host = _host(tmp_path, ["sh", "-c", f"echo 'workload: no such model'; exit {code}"])
    assert wait_listening(host, timeout=30) == returned
    err = capsys.readouterr().err
    assert f"the engine process for w exited (code {code}) before the console could attach" in err
    assert "workload: no such model" in err and "an earlier run" not in err  # this run's lines only


def test_wait_listening_when_the_run_ended_before_the_console(
    run_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = {"name": "w", "requests": {"total": 3, "ok": 3, "error": 0, "retried": 0}}
    (tmp_path / "summary.json").write_bytes(orjson.dumps(summary))
    host = _host(tmp_path, ["true"])
    assert wait_listening(host, timeout=30) == 0
    cap = capsys.readouterr()
    assert "requests" in cap.out and cap.err == ""  # its summary, as if the console had closed


def test_wait_listening_gives_up_and_stops_the_engine(
    run_dirs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    host = _host(tmp_path, ["sleep", "60"])
    assert wait_listening(host, timeout=0.3) == 2
    assert host.proc.wait(10) == -signal.SIGTERM
    assert "did not open its control socket within 0.3s; it was stopped" in capsys.readouterr().err


async def test_a_client_cannot_claim_a_stage_or_the_controller_made_its_change(
    run_dirs: Path, write_workload: Callable[..., Path]
) -> None:
    path = write_workload("claims", 400)
    engine = engine_factory(path)()
    task = asyncio.ensure_future(engine.run())
    await asyncio.sleep(0)
    server = ControlServer(engine, info_for(path, "claims"), folder=run_dirs / "srv")
    await server.start()
    reader, writer = await asyncio.open_unix_connection(str(server.socket_path))

    async def reply_to(msg: dict[str, Any]) -> dict[str, Any]:
        writer.write(orjson.dumps(msg) + b"\n")
        while True:  # snapshots stream in between: the first non-snapshot answers the command
            got = orjson.loads(await asyncio.wait_for(reader.readline(), 10.0))
            if got.get("op") not in ("snapshot", "hello"):
                return dict(got)

    try:
        writer.write(b'{"op":"hello","hz":1}\n')
        for by in ("stage", "auto", "nobody"):
            got = await reply_to({"op": "cmd", "cmd": "set_concurrency", "value": 7, "by": by})
            assert got["op"] == "error" and "by" in got["message"], (by, got)
        assert engine.shard.slots.limit == 4, engine.shard.slots.limit
        writer.write(orjson.dumps({"op": "cmd", "cmd": "set_concurrency", "value": 5, "by": "key"}) + b"\n")
        await until(lambda: engine.shard.slots.limit == 5)
    finally:
        engine.apply(Stop(), "key")
        outcome = await asyncio.wait_for(task, 20.0)
        await server.finish(outcome)
        writer.close()
    changes = [(c["to"], c["by"]) for c in outcome.summary["changes"] if c["what"] == "concurrency"]
    assert changes == [(5, "key")], changes
