"""`[[stages]]` and `by` on every change: real HTTP to the embedded simulator, stages a fraction of
a second long, no millisecond asserts (the stage driver's own arithmetic is checked apart)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from oxconsole.engine.commands import SetConcurrency, SetRate
from oxconsole.engine.drivers.stagedriver import ramp_steps, ramp_value
from oxconsole.engine.runner import Engine, make_engine
from oxconsole.reports.summary import summary_from_journal
from oxconsole.workload import WorkloadError, check_prompts
from oxconsole.workload import load_workload as load_file
from tests.support import engine_for, journal, oxconsole, run, until
from tests.support.workloads import Sets, load_workload, write_workload

STEP_RAMP = [
    {"duration": "0.4s", "concurrency": 2, "warmup": True},
    {"duration": "0.4s", "concurrency": 8},
    {"duration": "0.8s", "concurrency": 24, "ramp": True},
    {"duration": "0.4s"},
]


def stage_changes(s: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in s["changes"] if c["by"] == "stage"]


@pytest.mark.asyncio
@pytest.mark.slow
async def test_stages_step_ramp_and_warmup_end_the_run(tmp_path: Path) -> None:
    w = load_workload("sim_stages", tmp_path, {"stages": STEP_RAMP})
    assert len(w.stages) == 4 and w.stages[0].warmup and w.stages[2].ramp
    out = await run(w)
    s = out.summary
    # the run ended after the last stage: not a stop, nothing failed, prompts left unsent
    assert out.exit_code == 0 and not out.interrupted
    assert 1.5 < s["duration_s"] < 5.0
    assert s["requests"]["not_sent"] > 0
    # every boundary is a change by "stage"; no other origin changed anything
    assert {c["by"] for c in s["changes"]} == {"stage"}
    bounds = [(c["from"], c["to"]) for c in s["changes"] if c["what"] == "stage"]
    assert bounds == [(0, 1), (1, 2), (2, 3)]
    conc = [c["to"] for c in s["changes"] if c["what"] == "concurrency"]
    assert conc[:2] == [2, 8] and conc[-1] == 24
    assert conc == sorted(conc) and len(conc) >= 2 + ramp_steps(0.8) - 1  # the ramp climbs in steps
    # the stages, with their figures; the warm-up is left out of the run's
    st = s["stages"]
    assert [x["index"] for x in st] == [0, 1, 2, 3]
    assert [x["concurrency"] for x in st] == [2, 8, 24, 24]
    assert [x["warmup"] for x in st] == [True, False, False, False]
    assert all(x["t_start"] <= x["t_end"] for x in st) and st[0]["t"] == 0.0
    warm = st[0]["requests"]["total"]
    assert warm > 0 and s["warmup"]["requests"] == warm
    assert s["requests"]["total"] == sum(x["requests"]["total"] for x in st[1:])
    assert s["requests"]["not_sent"] == 100_000 - s["requests"]["total"] - warm
    recs = journal(w)
    assert len(recs) == s["requests"]["total"] + warm
    assert sum(1 for r in recs if r.get("warmup")) == warm
    assert {r["stage"] for r in recs} == {0, 1, 2, 3}
    # the report from the journal leaves the warm-up out too, and splits by stage the same way
    rep = summary_from_journal(w.results_path())
    assert rep["requests"]["total"] == s["requests"]["total"]
    assert [x["requests"]["total"] for x in rep["stages"]] == [x["requests"]["total"] for x in st]
    # phases split at every boundary
    assert len(s["phases"]) >= 4


@pytest.mark.asyncio
async def test_a_key_holds_until_the_next_boundary_and_commands_say_who(
    tmp_path: Path,
) -> None:
    w = load_workload(
        "sim_stages",
        tmp_path,
        {"stages": [{"duration": "0.6s", "concurrency": 3}, {"duration": "0.4s", "concurrency": 6}]},
    )
    e = engine_for(w)

    async def drive() -> None:
        await until(lambda: e.state == "running" and e.live.concurrency == 3)
        e.apply(SetConcurrency(10), "key")
        e.apply(SetRate(500.0))  # a command from a script: by "command"
        await until(lambda: e.stages is not None and e.stages.index == 1, timeout=10)
        assert e.live.concurrency == 6  # the boundary took over from the key
        assert e.live.rate == 500.0  # the stage names no rate: the command's holds

    d = asyncio.create_task(drive())
    out = await run(w, e)
    await d
    ch = [(c["what"], c["to"], c["by"]) for c in out.summary["changes"]]
    assert ch == [
        ("concurrency", 3, "stage"),
        ("concurrency", 10, "key"),
        ("rate", 500.0, "command"),
        ("stage", 1, "stage"),
        ("concurrency", 6, "stage"),
    ]
    assert out.exit_code == 0


@pytest.mark.asyncio
async def test_prompts_running_out_end_the_run_before_the_stages(tmp_path: Path) -> None:
    w = load_workload(
        "sim_stages",
        tmp_path,
        {"prompts.synthetic.count": 20, "stages": [{"duration": "30s", "concurrency": 4}]},
    )
    out = await run(w)
    assert out.exit_code == 0
    assert out.summary["requests"]["ok"] == 20 and out.summary["duration_s"] < 20
    assert out.summary["requests"]["not_sent"] == 0


def test_ramp_staircase_is_monotone_and_ends_on_target() -> None:
    for start, end, duration in ((2, 200, 30.0), (50, 10, 0.5), (1.5, 20.0, 7.3)):
        n = ramp_steps(duration)
        vals = [ramp_value(start, end, i, n) for i in range(1, n + 1)]
        assert vals == sorted(vals, reverse=end < start)
        assert vals[-1] == end
    assert ramp_steps(30.0) == 30 and ramp_steps(0.5) == 4


@pytest.mark.parametrize(
    ("stage", "key", "expected"),
    [
        ({"duration": "fast"}, "stages.0.duration", "a duration > 0"),
        ({"concurrency": 2}, "stages.0.duration", "required"),
        ({"duration": "1s", "concurency": 2}, "stages.0.concurency", 'did you mean "concurrency"'),
        ({"duration": "1s", "ramp": True}, "stages.0.ramp", "something to ramp to"),
        ({"duration": "1s", "rate": 5, "ramp": True}, "stages.0.rate", "0 is unlimited"),
        ({"duration": "1s", "concurrency": 0}, "stages.0.concurrency", "an integer >= 1"),
    ],
)
def test_bad_stages_are_refused_naming_the_key(
    tmp_path: Path, stage: dict[str, Any], key: str, expected: str
) -> None:
    with pytest.raises(WorkloadError) as e:
        load_workload("sim_stages", tmp_path, {"prompts.synthetic.count": 10, "stages": [stage]})
    assert key in str(e.value) and expected in str(e.value)


def test_validate_exits_2_naming_the_key_and_says_what_the_stages_need(tmp_path: Path) -> None:
    ten: Sets = {"prompts.synthetic.count": 10, "output.results": None}
    bad_stages = [{"duration": "-1s"}, {"duraton": "1s"}]
    bad = write_workload("sim_stages", tmp_path, {**ten, "stages": bad_stages}, file="bad.toml")
    r = oxconsole("validate", str(bad), cwd=tmp_path)
    assert r.returncode == 2
    assert "stages.0.duration" in r.stderr and "stages.1.duraton" in r.stderr
    good_stages = [{"duration": "2s", "concurrency": 2}]
    good = write_workload("sim_stages", tmp_path, {**ten, "stages": good_stages}, file="good.toml")
    r = oxconsole("validate", str(good), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "stages" in r.stdout and "run out" in r.stdout


@pytest.mark.asyncio
@pytest.mark.slow
async def test_stages_with_two_workers(tmp_path: Path) -> None:
    w = load_workload(
        "sim_stages",
        tmp_path,
        {
            "run.workers": 2,
            "stages": [
                {"duration": "1.5s", "concurrency": 2, "warmup": True},  # workers take a while to start
                {"duration": "0.7s", "concurrency": 8},
            ],
        },
    )
    pool = make_engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    out = await pool.run()
    s = out.summary
    assert out.exit_code == 0 and not out.interrupted
    assert [(c["what"], c["to"], c["by"]) for c in s["changes"]] == [
        ("concurrency", 2, "stage"),
        ("stage", 1, "stage"),
        ("concurrency", 8, "stage"),
    ]
    warm = s["stages"][0]["requests"]["total"]
    assert warm > 0 and s["requests"]["total"] == s["stages"][1]["requests"]["total"]
    recs = journal(w)
    assert sum(1 for r in recs if r.get("warmup")) == warm
    assert {r["stage"] for r in recs} == {0, 1}  # every record knows its stage, the first ones too


def test_the_console_and_the_progress_line_show_the_stage() -> None:
    from oxconsole.metrics.collector import Collector
    from oxconsole.metrics.snapshot import Snapshot
    from oxconsole.metrics.stages import StageSpan
    from oxconsole.reports.progress import progress_line
    from oxconsole.ui.lines import Palette
    from oxconsole.ui.panels.header import header_lines
    from tests.support.metrics import gauges

    now = [0.0]
    c = Collector(["m"], started_at=0.0, clock=lambda: now[0])
    c.stage_log.begin(StageSpan(0, 0.0, True, False, 10.0), 0.0, 3, 100.0)
    now[0] = 12.0
    c.stage_log.begin(StageSpan(1, 10.0, False, True, 60.0), 10.0, 3, 100.0)
    c.change(10.0, "stage", 0, 1, by="stage")
    snap = Snapshot.from_dict(c.snapshot(gauges(elapsed_s=12.0)).to_dict())  # as over the socket
    assert snap.stage is not None and snap.stage["index"] == 1
    lines = [x.plain for x in header_lines(snap, Palette(), 80, name="burst", state="running")]
    assert all(len(x) <= 80 for x in lines), [x for x in lines if not (len(x) <= 80)][:5]
    assert "stage 2/3 ramp 58s left" in lines[1]
    assert "stage 2" in lines[2]  # the phase began at the boundary
    assert "stage 2/3 ramp 58s left" in progress_line(snap) and "ETA 1m28s" in progress_line(snap)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_commands_over_the_socket_say_who_sent_them(run_dirs: Path) -> None:
    """A script's raw command is by "command"; the console's client (SocketSource) sends by "key"."""
    import orjson

    from oxconsole.control import LocalSource, RunInfo, SocketSource

    path = write_workload(
        "sim_stages",
        run_dirs,
        {"output.results": str(run_dirs / "r.jsonl"), "stages": [{"duration": "1.5s"}]},
        file="who.toml",
    )

    def factory() -> Any:
        w = load_file(path)
        return engine_for(w, publish_interval=0.05)

    local = LocalSource(
        factory, serve=RunInfo(name="who", workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None and local.engine is not None
    engine = local.engine
    assert isinstance(engine, Engine), engine
    _reader, writer = await asyncio.open_unix_connection(str(local.server_socket))
    writer.write(orjson.dumps({"op": "cmd", "cmd": "set_concurrency", "value": 7}) + b"\n")
    await writer.drain()
    console = SocketSource(local.server_socket, hz=10)
    await console.start()
    await until(lambda: engine.live.concurrency == 7)
    console.send(SetConcurrency(9))
    await until(lambda: engine.live.concurrency == 9)
    writer.close()
    await console.close()
    out = await asyncio.to_thread(local.wait_done, 30)
    assert out is not None and out.exit_code == 0
    assert [(c["to"], c["by"]) for c in out.summary["changes"]] == [(7, "command"), (9, "key")]


@pytest.mark.asyncio
async def test_a_stop_during_the_stages_is_a_stop(tmp_path: Path) -> None:
    from oxconsole.engine.commands import Stop

    w = load_workload("sim_stages", tmp_path, {"stages": [{"duration": "30s"}, {"duration": "30s"}]})
    e = engine_for(w)

    async def drive() -> None:
        await until(lambda: e.state == "running" and e.shard.dispatched > 20)
        e.apply(Stop(), "key")

    d = asyncio.create_task(drive())
    out = await run(w, e)
    await d
    assert out.interrupted and out.exit_code == 130
    assert out.summary["duration_s"] < 20
    assert [x["index"] for x in out.summary["stages"]] == [0]


class _VirtualRun:
    """The surface the stage driver drives, on a virtual clock: the live settings and the log."""

    def __init__(self, w: Any) -> None:
        from oxconsole.engine.livesettings import LiveSettings
        from oxconsole.metrics.collector import Collector

        self.w = w
        self.live = LiveSettings.of(w)
        self.loop = asyncio.get_running_loop()
        self.collector = Collector(["m"], started_at=0.0, clock=self.loop.time)
        self.stage_mark: tuple[int, bool] | None = None
        self.ended: float | None = None

    def apply(self, cmd: Any, by: Any = "command") -> None:
        for c in self.live.apply(cmd):
            self.collector.change(self.elapsed(), c.what, c.old, c.new, by=by)

    def elapsed(self) -> float:
        return self.loop.time()

    def end(self) -> None:
        self.ended = self.elapsed()


def test_the_driver_keeps_time_exactly_on_a_virtual_clock(tmp_path: Path) -> None:
    from oxconsole.engine.drivers.stagedriver import StageDriver
    from tests.support.clock import run_virtual

    w = load_workload(
        "sim_stages",
        tmp_path,
        {
            "run.rate": 12,
            "prompts.synthetic.count": 10,
            "stages": [
                {"duration": "10s", "concurrency": 10, "warmup": True},
                {"duration": "8s", "concurrency": 50, "rate": 20, "ramp": True},
                {"duration": "2s", "rate": 40},
            ],
        },
    )

    async def go() -> _VirtualRun:
        run = _VirtualRun(w)
        StageDriver.start(run, run.end)
        while run.ended is None:
            await asyncio.sleep(0.5)
        return run

    run = run_virtual(go())
    assert run.ended == pytest.approx(20.0)
    ch = [(round(c["t"], 3), c["what"], c["to"]) for c in run.collector.changes]
    assert ch[0] == (0.0, "concurrency", 10)  # [run] says 4; the first stage sets 10 at once
    assert ch[1] == (10.0, "stage", 1)
    ramp = [(t, v) for t, what, v in ch if what == "concurrency"][1:]
    assert [t for t, _ in ramp] == [10.0 + i for i in range(8)]  # one step a second, from the boundary
    assert [v for _, v in ramp] == [15, 20, 25, 30, 35, 40, 45, 50]
    rates = [(t, v) for t, what, v in ch if what == "rate"]
    assert rates == [(10.0 + i, 13.0 + i) for i in range(8)] + [(18.0, 40.0)]  # 12/s to 20/s, then 40
    assert (18.0, "stage", 2) in ch
    assert run.stage_mark == (2, False)
