"""Watching a sweep: one control socket for every point, the sweep gauge on each snapshot, the
console that `oxconsole sweep` opens on a terminal, and the keys that must not spoil a point.

Real parts only: the sweep runs in a process of its own against the embedded simulator, read
through a real `SocketSource`; the console is the real app under Textual's Pilot (or a real pty).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.engine.commands import Pause, Resume, SetConcurrency, Stop
from oxconsole.metrics import Snapshot
from oxconsole.sweep.gauge import sweep_fraction, sweep_gauge, sweep_text
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.header import HeaderPanel
from oxconsole.ui.panels.points import points_lines
from tests.support import q_in_a_terminal, until
from tests.support.sweep import records, write
from tests.support.ui import StaticSource, fixed_snapshot

DONE = [
    {"index": 0, "value": "1", "req_per_s": 9.8, "goodput_per_s": None, "p99_ms": 51.0, "slo_met": None},
    {"index": 1, "value": "2", "req_per_s": 19.5, "goodput_per_s": None, "p99_ms": 52.0, "slo_met": None},
]


def gauge(*, count: int | None = 5, index: int = 2, value: str = "4") -> dict[str, Any]:
    g = sweep_gauge(
        "concurrency", index=index, value=value, count=count, done=(DONE, "2"), point_s=30.0, elapsed_s=12.0
    )
    g["locked"] = ["concurrency", "auto"]
    return g


def sweep_snapshot(**kw: Any) -> Snapshot:
    return dataclasses.replace(fixed_snapshot(seconds=12), sweep=gauge(**kw))


# -- the gauge ------------------------------------------------------------------------------------


def test_the_sweep_gauge_crosses_the_socket_as_it_was() -> None:
    snap = sweep_snapshot()
    back = Snapshot.from_dict(orjson.loads(orjson.dumps(snap.to_dict())))
    assert back.sweep == snap.sweep and back == snap
    plain = fixed_snapshot(seconds=12)
    assert (
        plain.sweep is None and Snapshot.from_dict(orjson.loads(orjson.dumps(plain.to_dict()))).sweep is None
    )


def test_the_gauge_says_which_point_of_how_many_and_the_time_left() -> None:
    g = gauge()
    assert g["eta_s"] == 18.0 + 2 * 30.0  # what is left of this point, then two more points
    assert sweep_text(g) == "sweep #2 (3/5) concurrency=4 · ETA 1m18s"
    assert sweep_fraction(g, 12.0) == pytest.approx((2 + 0.4) / 5)
    last = sweep_gauge(
        "concurrency", index=1, value="2", count=2, done=(DONE, "2"), point_s=30.0, elapsed_s=0.0
    )
    assert last["eta_s"] == 0.0  # the last point has ended: nothing left
    search = gauge(count=None, index=2, value="16")
    assert search["eta_s"] is None
    assert sweep_text(search) == "sweep #2 concurrency=16 · searching"
    assert sweep_fraction(search, 12.0) == pytest.approx(0.4)


def test_the_points_table_marks_the_knee_so_far_and_the_point_running() -> None:
    lines = [x.plain.rstrip() for x in points_lines(sweep_snapshot(), Palette(), 60, 12)]
    assert lines[0].split() == ["#", "concurrency", "req/s", "p99"]  # no goodput column without [slo]
    assert lines[2].split() == ["0", "1", "9.80", "51.0ms"]
    assert lines[3].split() == ["*", "1", "2", "19.50", "52.0ms"]
    assert lines[4].split()[:3] == ["▸", "2", "4"]
    assert lines[5] == "knee so far: concurrency=2"


# -- the console on a sweep -------------------------------------------------------------------------


def test_sweep_header_80x24(snap_compare: Any) -> None:
    app = ConsoleApp(StaticSource(sweep_snapshot()), theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(80, 24))


@pytest.mark.slow
def test_sweep_points_tab_80x24(snap_compare: Any) -> None:
    app = ConsoleApp(StaticSource(sweep_snapshot()), theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(80, 24), press=["t", "t", "t", "t"])


async def test_keys_that_change_the_swept_setting_are_refused_and_say_so() -> None:
    src = StaticSource(sweep_snapshot())
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.last is not None, 30)
        for key in ("plus", "minus", "a"):
            await pilot.press(key)
            await pilot.pause(0.05)
            assert not app.sent, key
            assert app.flash == (
                "refused: the sweep sets concurrency at each point (a change would spoil it)",
                "warn",
            )
        await pilot.press("right_square_bracket")  # the rate is not swept: it goes to the point running
        await pilot.pause(0.05)
        assert len(app.sent) == 1
        header = app.main.query_one(HeaderPanel)
        assert "sweep #2 (3/5) concurrency=4 · ETA 1m18s" in header._lines[1].plain


# -- one socket for the whole sweep ---------------------------------------------------------------


def start_headless(folder: Path, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "oxconsole", "sweep", "w.toml", *args]
    return subprocess.Popen(
        cmd, cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


async def attach(proc: subprocess.Popen[str]) -> Any:
    from oxconsole.control import SocketSource, list_runs

    await until(
        lambda: any(e.pid == proc.pid for e in list_runs()) or proc.poll() is not None, 30, what="listing"
    )
    [entry] = [e for e in list_runs() if e.pid == proc.pid]
    assert entry.name == "sw"
    src = SocketSource.from_entry(entry, hz=20.0)
    await src.start()
    return src


@pytest.mark.slow
async def test_one_socket_stays_attached_across_points_and_ends_with_the_sweep(
    run_dirs: Path, tmp_path: Path
) -> None:
    write(tmp_path, capacity=8)
    proc = start_headless(tmp_path, "--over", "concurrency=1,2,3", "--point-duration", "0.5s")
    try:
        src = await attach(proc)
        seen: list[tuple[int, str]] = []
        while not src.ended and src.connected:
            s = src.latest()
            if (
                s is not None
                and s.sweep is not None
                and (not seen or seen[-1] != (s.sweep["index"], s.gauges.state))
            ):
                seen.append((s.sweep["index"], s.gauges.state))
            await asyncio.sleep(0.02)
        await src.close()
        out, err = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    indexes = [i for i, _ in seen]
    assert indexes == sorted(indexes) and {0, 1, 2} <= set(indexes), seen
    assert all(state != "done" for _, state in seen[:-1]), seen  # no false end between points
    assert src.ended and src.exit_code == 0 == proc.returncode, err
    assert src.final_summary is not None and src.final_summary["sweep"]["knee"] is not None
    table = [text for stream, text in src.final_summary["lines"] if stream == "out"]
    assert table and table[0] in out and "knee: point" in table[0]
    last = src.latest()
    assert last is not None and last.sweep is not None and len(last.sweep["done"]) == 3


@pytest.mark.slow
async def test_pause_holds_the_sweep_and_runs_the_paused_point_again(run_dirs: Path, tmp_path: Path) -> None:
    write(tmp_path, capacity=8)
    proc = start_headless(tmp_path, "--over", "concurrency=1,2", "--point-duration", "1s")
    try:
        src = await attach(proc)
        await until(lambda: (s := src.latest()) is not None and s.counts.total >= 3, 30, what="requests")
        src.send(SetConcurrency(5))  # the swept setting: refused, nothing changes
        src.send(Pause())
        await until(lambda: (s := src.latest()) is not None and s.gauges.state == "paused", 30, what="paused")
        await asyncio.sleep(1.2)  # past the point's duration: held, the next point does not start
        s = src.latest()
        assert s is not None and s.sweep is not None and s.sweep["index"] == 0 and not s.sweep["done"]
        assert src.last_error is not None and "refused during a sweep over concurrency" in src.last_error
        src.send(Resume())
        assert await src.wait_end(30.0)
        await src.close()
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "point #0 was paused; it runs again from its start" in err
    recs = records(tmp_path)
    assert any(r["id"].endswith("@0") for r in recs) and any(r["id"].endswith("@0.2") for r in recs)
    manifest = json.loads((tmp_path / "out" / "results.jsonl.meta.json").read_text())
    assert manifest["sweep"]["starts"] == {"0": 2, "1": 1}


# -- `oxconsole sweep` on a terminal --------------------------------------------------------------


def wait_for_end(
    source: Any, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
) -> str:
    """The real console under Pilot, left alone: it closes itself when the sweep ends."""

    async def go() -> str:
        app = ConsoleApp(source, theme_dirs=[], cursor_blink=False, refresh=20.0)
        async with app.run_test(size=(80, 24)):
            await until(lambda: app.return_value is not None, timeout=60, what="the console to close")
        return str(app.return_value)

    return asyncio.run(go())


@pytest.mark.slow
def test_sweep_on_a_terminal_opens_the_console_and_prints_the_table_at_its_end(
    run_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oxconsole.cli import console
    from oxconsole.cli import main as cli

    write(tmp_path, capacity=8)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(console, "load_console", lambda: (wait_for_end, ""))
    code = cli.main(["sweep", "w.toml", "--over", "concurrency=1,2", "--point-duration", "0.7s"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "sweep over concurrency: 2 point(s)" in cap.out and "knee: point #1, concurrency=2" in cap.out
    assert "oxconsole: journal: " in cap.err
    assert {r["point"] for r in records(tmp_path)} == {0, 1}
    assert (
        "sweep: point #1, 2 of 2" in (tmp_path / "out" / "engine.log").read_text()
    )  # the sweep's own process


@pytest.mark.slow
def test_q_on_a_sweep_in_a_real_terminal_stops_it_with_130_and_the_resume_hint(
    run_dirs: Path, tmp_path: Path
) -> None:
    write(tmp_path, capacity=8)
    journal = tmp_path / "out" / "results.jsonl"
    args = ["sweep", "w.toml", "--over", "concurrency=1,2,4"]
    rc, after = q_in_a_terminal(args, cwd=tmp_path, journal=journal, timeout=60)
    assert rc == 130, after
    assert "sweep over concurrency: no point ended" in after
    assert "sweep stopped; continue with: oxconsole sweep w.toml --over concurrency=1,2,4" in after
    assert "--resume" in after


@pytest.mark.slow
def test_stop_over_the_socket_stops_the_sweep_with_130(run_dirs: Path, tmp_path: Path) -> None:
    write(tmp_path, capacity=8)
    proc = start_headless(tmp_path, "--over", "concurrency=1,2", "--point-duration", "20s")

    async def go() -> Any:
        src = await attach(proc)
        await until(lambda: (s := src.latest()) is not None and s.counts.total >= 2, 30, what="requests")
        src.send(Stop())
        assert await src.wait_end(20.0)
        await src.close()
        return src

    try:
        src = asyncio.run(go())
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert src.exit_code == 130 == proc.returncode, err
    assert "sweep stopped; continue with:" in err


def detach_at_once(
    source: Any, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
) -> str:
    """The real console under Pilot: `d` once the first figures show."""

    async def go() -> str:
        app = ConsoleApp(source, theme_dirs=[], cursor_blink=False, refresh=20.0)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(lambda: app.last is not None, 30, what="the first figures")
            await pilot.press("d")
            await until(lambda: app.return_value is not None, 30, what="the console to close")
        return str(app.return_value)

    return asyncio.run(go())


@pytest.mark.slow
def test_d_detaches_the_sweep_goes_on_and_attach_brings_it_back_to_its_end(
    run_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from oxconsole.cli import attach, console
    from oxconsole.cli import main as cli

    # answers of 200 ms: the machine's noise does not double p99 from one point to the next
    write(tmp_path, capacity=8, ttft="200ms")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(console, "load_console", lambda: (detach_at_once, ""))
    # points long enough that the console detaches during the first, however loaded the machine
    assert cli.main(["sweep", "w.toml", "--over", "concurrency=1,2", "--point-duration", "4s"]) == 0
    cap = capsys.readouterr()
    assert "goes on" in cap.out and "re-attach with: oxconsole attach sw" in cap.out
    assert "sweep over concurrency" not in cap.out  # no table: the sweep has not ended
    monkeypatch.setattr(console, "load_console", lambda: (wait_for_end, ""))
    assert attach.attach_main(["sw"]) == 0
    cap = capsys.readouterr()
    assert "sweep over concurrency: 2 point(s)" in cap.out and "knee: point #1, concurrency=2" in cap.out
