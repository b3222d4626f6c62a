"""run.cluster = "ray": the pool's engines as Ray actors on a local Ray instance, on loopback only.

The Ray tests start one local Ray instance for the module (2 CPUs, no dashboard, 127.0.0.1) and shut
it down after; they never run `ray stop` (that would stop every Ray process on the machine).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oxconsole.cli.main import main
from oxconsole.engine.commands import SetConcurrency, Stop
from oxconsole.engine.runner import make_engine
from oxconsole.engine.workers.pool import ProcessShards
from oxconsole.engine.workers.raychannel import GATHER_S, ActorChannel
from tests.support import free_port, journal, until, wait_until
from tests.support.ray import assert_loopback, descendants, on_ray, stopped_once
from tests.support.workloads import load_workload, write_workload


def test_without_ray_the_workload_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oxconsole.workload import WorkloadError, cluster

    monkeypatch.setattr(cluster, "ray_installed", lambda: False)
    with pytest.raises(WorkloadError, match=r"run\.cluster.*pip install 'oxconsole\[ray\]'"):
        load_workload("sim_workers", tmp_path, on_ray(10, "1ms"))


def test_cluster_takes_local_or_ray(tmp_path: Path) -> None:
    from oxconsole.workload import WorkloadError

    with pytest.raises(WorkloadError, match=r'run\.cluster.*"local" \| "ray"'):
        load_workload("sim_workers", tmp_path, {**on_ray(10, "1ms"), "run.cluster": "k8s"})


def test_empty_ray_address_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = write_workload(
        "minimal", tmp_path, {"models.0.name": "a", "prompts": None, "output.results": None}, file="w.toml"
    )
    assert main([str(wl), "--headless", "--ray-address", " "]) == 2
    assert "--ray-address" in capsys.readouterr().err


def test_a_poll_answers_what_the_worker_sent_at_most_every_gather_s() -> None:
    """The actor's end of the channel (no Ray needed): a take returns everything sent since the
    last, no sooner than GATHER_S after it; once closed, at once and saying so."""
    ch = ActorChannel()
    ch.send_bytes(b"a")
    t0 = time.monotonic()
    assert ch.take(1.0) == ([b"a"], False)
    ch.send_bytes(b"b")
    ch.send_bytes(b"c")
    assert ch.take(1.0) == ([b"b", b"c"], False)
    assert time.monotonic() - t0 >= GATHER_S
    ch.close()
    assert ch.take(1.0) == ([], True)


@pytest.mark.usefixtures("ray_local")
@pytest.mark.slow
@pytest.mark.xdist_group("ray")
async def test_two_actors_one_journal_commands_in_shares_loopback_only(
    tmp_path: Path,
) -> None:
    w = load_workload("sim_workers", tmp_path, on_ray(400, "20ms"))
    e = make_engine(w, results_path=w.results_path(), total_expected=400)
    seen: dict[str, Any] = {}

    async def midway() -> None:
        await until(lambda: e.latest is not None and e.latest.counts.total >= 20, timeout=90)
        seen["pids"] = descendants(os.getpid()) | {os.getpid()}
        assert_loopback(seen["pids"])
        e.apply(SetConcurrency(6))
        assert isinstance(e.shards, ProcessShards), e.shards
        workers = e.shards.workers
        await until(lambda: all(wk.gauges and wk.gauges["concurrency"] == 3 for wk in workers), timeout=30)
        seen["shares"] = True

    m = asyncio.create_task(midway())
    out = await e.run()
    await m
    assert out.exit_code == 0 and out.summary["workers"] == 2
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == 400 == len(set(ids))
    assert seen["shares"] and seen["pids"]


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
async def test_killed_actor_is_reported_not_hung(tmp_path: Path, ray_local: Any) -> None:
    w = load_workload("sim_workers", tmp_path, on_ray(2000, "50ms"))
    e = make_engine(w, results_path=w.results_path(), total_expected=2000)

    async def kill_one() -> None:
        await until(lambda: e.latest is not None and e.latest.counts.total >= 20, timeout=90)
        assert isinstance(e.shards, ProcessShards), e.shards
        ray_local.kill(e.shards.workers[0].proc.actor)
        await until(lambda: any("ray actor 0" in x for x in e.warnings), timeout=30)
        e.apply(Stop())

    k = asyncio.create_task(kill_one())
    out = await asyncio.wait_for(e.run(), timeout=120)
    await k
    assert out.exit_code == 130 and out.crashed
    assert out.summary["requests"]["not_sent"] > 0
    lost = [x for x in out.warnings if "ray actor 0" in x]
    assert lost and "--resume" in lost[0]
    ids = [r["id"] for r in journal(w)]
    assert len(ids) == len(set(ids)) and 20 <= len(ids) < 2000


@pytest.mark.usefixtures("ray_local")
@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_command_line_ray_address_runs_on_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--ray-address` implies run.cluster = "ray" (here on the module's Ray, already joined)."""
    w = load_workload("sim_workers", tmp_path, {**on_ray(60, "1ms"), "run.cluster": None})
    assert w.run.cluster == "local"
    monkeypatch.setenv("RAY_ADDRESS", "")  # restored after: main sets it from --ray-address
    summary = tmp_path / "s.json"
    args = [str(w.path), "--headless", "--ray-address", "local", "--summary-json", str(summary)]
    assert main(args) == 0
    assert os.environ["RAY_ADDRESS"] == "local"
    s = json.loads(summary.read_text())
    assert s["workers"] == 2 and s["requests"]["ok"] == 60


def test_the_workloads_files_are_shipped_and_run_from_copies(tmp_path: Path) -> None:
    """`rayfiles`: the prompts file goes into the object store once (here a list), an actor writes
    it to its own folder and reads the same prompts from there; a file above SHIP_MAX stays, said."""
    from oxconsole.engine.workers import rayfiles
    from oxconsole.workload import iter_prompts

    (tmp_path / "p.jsonl").write_text('{"id": "q1", "prompt": "hello"}\n{"id": "q2", "prompt": "again"}\n')
    local_run = {**on_ray(1, "5ms"), "run.cluster": None, "prompts": {"file": "p.jsonl"}, "sim": None}
    w = load_workload("sim_workers", tmp_path, local_run)
    put: list[bytes] = []
    warned: list[str] = []

    def store(data: bytes) -> int:
        put.append(data)
        return len(put) - 1

    files = rayfiles.to_ship(w, store, warned.append)
    assert files == {"file": 0} and put == [(tmp_path / "p.jsonl").read_bytes()] and not warned
    node = tmp_path / "node"
    node.mkdir()
    local = rayfiles.localized(w, {k: put[i] for k, i in files.items()}, node)
    assert local.prompts.file is not None and local.prompts.file.parent == node
    (tmp_path / "p.jsonl").unlink()  # the driver's path is no more: the copy is what is read
    assert [p.id for p in iter_prompts(local)] == ["q1", "q2"]
    (tmp_path / "p.jsonl").write_text("{}\n" * 10)
    small = rayfiles.SHIP_MAX
    try:
        rayfiles.SHIP_MAX = 5
        assert rayfiles.to_ship(w, lambda b: 0, warned.append) == {}
    finally:
        rayfiles.SHIP_MAX = small
    assert "must be readable at that path on every node" in warned[0]


@pytest.mark.usefixtures("ray_local")
@pytest.mark.slow
@pytest.mark.xdist_group("ray")
async def test_actors_run_a_prompts_file_the_driver_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompts file is moved away as soon as the driver has shipped it: the actors can only
    have read their own copies (as on a node that never had the file)."""
    from oxconsole.engine.workers import rayfiles, raypool

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(f'{{"id": "q{i}", "prompt": "p {i}"}}\n' for i in range(60)))
    w = load_workload(
        "sim_workers", tmp_path, {**on_ray(1, "5ms"), "prompts": {"file": "p.jsonl"}, "sim": None}
    )
    shipped = rayfiles.to_ship

    def ship_then_hide(*args: Any) -> dict[str, Any]:
        out = shipped(*args)
        prompts.rename(tmp_path / "hidden.jsonl")
        return out

    monkeypatch.setattr(raypool, "to_ship", ship_then_hide)
    e = make_engine(w, results_path=w.results_path(), total_expected=60)
    out = await asyncio.wait_for(e.run(), timeout=120)
    assert not prompts.exists()
    assert out.exit_code == 0, out.warnings
    assert sorted(r["id"] for r in journal(w)) == sorted(f"q{i}" for i in range(60))


def _caught_sigterm(pid: int) -> bool:
    """The process has its own SIGTERM handler (the run's): a SIGTERM now stops the run."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_a_stop_while_joining_ends_the_run_at_once_with_the_resume_hint(tmp_path: Path) -> None:
    """Ray tries to join an address for 20 to 60 s before it says it cannot; a SIGTERM meanwhile
    ends the run then (exit 130, nothing sent), and the hint continues on the same address."""
    pytest.importorskip("ray")
    port = free_port()  # nobody listens on it
    write_workload("sim_workers", tmp_path, {**on_ray(40, "1ms"), "output.results": None}, file="w.toml")

    def joining(proc: subprocess.Popen[str]) -> bool:
        if not _caught_sigterm(proc.pid):
            return False
        time.sleep(0.5)  # into the join
        return True

    args = ["w.toml", "--headless", "--ray-address", f"127.0.0.1:{port}"]
    code, err, took = stopped_once(args, tmp_path, joining)
    assert code == 130, err
    assert took < 10, f"{took:.1f} s: the stop waited for Ray's join"  # Ray gives up after 20-60 s
    assert f"continue with: oxconsole w.toml --resume --ray-address 127.0.0.1:{port}" in err, err
    assert "40 requests not sent" in err and "stopping before the run started" in err


def _ray_servers() -> set[int]:
    """PIDs of every GCS server and raylet on the machine (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                name = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if name in ("gcs_server", "raylet"):
                found.add(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.xdist_group("ray")
def test_ray_address_local_starts_a_ray_of_its_own_and_stops_it(tmp_path: Path) -> None:
    """`--ray-address local` from a process of its own (not already in a Ray, as the tests above
    are): it starts Ray, runs its two actors there, and leaves no Ray process behind. Ray's
    processes end with the thread that started them, so that thread must outlive the run."""
    pytest.importorskip("ray")
    write_workload("sim_workers", tmp_path, {**on_ray(40, "1ms"), "output.results": None}, file="w.toml")
    before = _ray_servers()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "oxconsole",
            "w.toml",
            "--headless",
            "--ray-address",
            "local",
            "--summary-json",
            "-",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["workers"] == 2 and s["requests"]["ok"] == 40
    wait_until(lambda: _ray_servers() <= before, timeout=30, what="the run's own Ray to stop")
