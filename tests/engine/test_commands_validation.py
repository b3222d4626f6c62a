"""Every live command is checked before anything changes (issue 16.2): types, finiteness, ranges,
known models. A refused command changes nothing, and its sender is told why: an `error` answer on
the control socket, `CommandError` in process, a toast in the console.

The socket cases run against a real engine over the real control socket, in one process and with
`run.workers = 2`: each bad command gets its error answer, the run's settings and `changes` stay as
they were, snapshots keep coming, and the run still ends with a summary that serialises. Before,
`set_rate inf` left the limiter broken for good, weights of 1e308 crashed the router,
`set_concurrency 1e300` stopped snapshots and broke --summary-json, concurrency -5 became 1, rate
-3 or "nan" became unlimited, and `enabled: "no"` was stored as a truthy string.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from oxconsole.control import LocalSource, RunInfo, SocketSource
from oxconsole.engine.commands import (
    CommandError,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetTpm,
    SetWeight,
    Stop,
    command_from_dict,
)
from oxconsole.engine.livesettings import LiveSettings, check
from oxconsole.engine.outcome import RunEngine
from oxconsole.engine.runner import make_engine
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.workload import load_workload
from tests.support import until
from tests.support.workloads import write_workload

RATE = "set_rate: expected a finite number >= 0 and <= 1e6 (requests per second; 0 = unlimited), got "
CONC = "set_concurrency: expected an integer >= 1 and <= 1_000_000, got "
TPM = "set_tpm: expected a finite number >= 0 and <= 1e12 (tokens per minute; 0 = no budget), got "


def weight(model: str) -> str:
    return f'set_weight: expected a finite number >= 0 and <= 1e9 (the weight of "{model}"), got '


UNKNOWN = '{}: unknown model "zzz" (models: "a", "b")'
FLAG = "enable_model: enabled: expected true or false, got "

BAD: list[tuple[dict[str, Any], str]] = [
    ({"cmd": "set_rate", "value": "inf"}, RATE + '"inf"'),
    ({"cmd": "set_rate", "value": "nan"}, RATE + '"nan"'),
    ({"cmd": "set_rate", "value": -3}, RATE + "-3"),
    ({"cmd": "set_rate", "value": 1e300}, RATE + "1e+300"),
    ({"cmd": "set_rate", "value": True}, RATE + "true"),
    ({"cmd": "set_rate", "value": None}, RATE + "null"),  # what JSON makes of a float inf
    ({"cmd": "set_concurrency", "value": 1e300}, CONC + "1e+300"),
    ({"cmd": "set_concurrency", "value": -5}, CONC + "-5"),
    ({"cmd": "set_concurrency", "value": 0}, CONC + "0"),
    ({"cmd": "set_concurrency", "value": 1_000_001}, CONC + "1000001"),
    ({"cmd": "set_concurrency", "value": 2.5}, CONC + "2.5"),
    ({"cmd": "set_concurrency", "value": "8"}, CONC + '"8"'),
    ({"cmd": "set_concurrency", "value": False}, CONC + "false"),
    ({"cmd": "set_tpm", "value": -1}, TPM + "-1"),
    ({"cmd": "set_tpm", "value": "inf"}, TPM + '"inf"'),
    ({"cmd": "set_tpm", "value": 1e13}, TPM + "10000000000000.0"),
    ({"cmd": "set_weight", "model": "a", "value": 1e308}, weight("a") + "1e+308"),
    ({"cmd": "set_weight", "model": "b", "value": 1e308}, weight("b") + "1e+308"),
    ({"cmd": "set_weight", "model": "a", "value": -1}, weight("a") + "-1"),
    ({"cmd": "set_weight", "model": "a", "value": "nan"}, weight("a") + '"nan"'),
    ({"cmd": "set_weight", "model": "zzz", "value": 1}, UNKNOWN.format("set_weight")),
    ({"cmd": "set_weight", "model": 5, "value": 1}, "set_weight: model: expected a model name, got 5"),
    ({"cmd": "enable_model", "model": "a", "enabled": "no"}, FLAG + '"no"'),
    ({"cmd": "enable_model", "model": "a", "enabled": 0}, FLAG + "0"),
    ({"cmd": "enable_model", "model": "zzz", "enabled": False}, UNKNOWN.format("enable_model")),
    ({"cmd": "stop", "cancel": "yes"}, 'stop: cancel: expected true or false, got "yes"'),
    ({"cmd": "explode"}, 'unknown command "explode" (known: set_concurrency, set_rate, set_tpm, set_weight, '
                         "enable_model, pause, resume, stop, set_auto, set_cascade)"),
    ({"cmd": "set_cascade", "steps": "a"},
     'set_cascade: steps: expected a non-empty list of model names, each once, got "a"'),
    ({"cmd": "set_rate"}, 'set_rate: missing field "value"'),
    (
        {"cmd": "set_rate", "value": 1, "by": "me"},
        'set_rate: by: expected one of key, command, stage, auto, agent, got "me"',
    ),
    ({"cmd": "pause", "value": 1}, 'pause: unknown field "value" (fields: none)'),
]  # fmt: skip


def settings() -> LiveSettings:
    return LiveSettings(4, 50.0, {"a": 1.0, "b": 1.0}, tpm=1e6)


def state(s: LiveSettings) -> tuple[Any, ...]:
    return (s.concurrency, s.rate, s.tpm, dict(s.weights), dict(s.enabled), s.paused, s.stopped)


@pytest.mark.parametrize(("d", "message"), BAD, ids=[f"{i}-{d['cmd']}" for i, (d, _) in enumerate(BAD)])
def test_a_bad_command_is_refused_with_a_clear_message_and_changes_nothing(
    d: dict[str, Any], message: str
) -> None:
    s = settings()
    before = state(s)
    with pytest.raises(CommandError) as e:
        s.apply(command_from_dict(d))
    assert str(e.value) == message
    assert state(s) == before


def test_commands_built_in_process_are_checked_the_same_way() -> None:
    s = settings()
    for cmd in (
        SetRate(float("inf")),
        SetRate(float("-inf")),
        SetTpm(float("nan")),
        SetWeight("a", float("inf")),
    ):
        with pytest.raises(CommandError, match="expected a finite number"):
            s.apply(cmd)
    with pytest.raises(CommandError, match=r"got inf$"):
        check(SetRate(float("inf")))
    assert state(s) == state(settings())


def test_good_commands_at_the_limits_are_taken() -> None:
    s = settings()
    for cmd in (
        SetConcurrency(1_000_000),
        SetConcurrency(1),
        SetRate(0),
        SetRate(1e6),
        SetTpm(0),
        SetTpm(1e12),
        SetWeight("a", 1e9),
        SetWeight("b", 0),
        EnableModel("a", False),
        Stop(True),
    ):
        s.apply(cmd)
    assert state(s)[:5] == (1, 1e6, 1e12, {"a": 1e9, "b": 0.0}, {"a": False, "b": True})
    assert isinstance(s.rate, float)


# --- a real run over the real control socket ---------------------------------------------------
def control_workload(run_dirs: Path, name: str, workers: int) -> Path:
    """tests/workloads/sim_workers.toml as run_dirs/NAME.toml: 40 requests at 50 a second, 4 in
    flight, over models "a" and "b" (4 tokens each, 20 ms after admission), `workers` workers."""
    answer = {"ttft": "20ms", "tokens_per_s": 0, "output_tokens": 4, "jitter": 0}
    sets = {
        "name": name,
        "run": {
            "concurrency": 4,
            "rate": 50.0,
            "tpm": 1000000,
            "requests": 40,
            "workers": workers,
            "grace": "2s",
        },
        "output.results": str(run_dirs / "r.jsonl"),
        "models": [{"name": "a", "max_tokens": 4}, {"name": "b", "max_tokens": 4}],
        "prompts.synthetic": {"count": 40, "input_tokens": 10, "output_tokens": 4},
        "sim.models": {"a": answer, "b": answer},
    }
    return write_workload("sim_workers", run_dirs, sets, file=f"{name}.toml")


class Wire:
    """A bare client on the control socket: raw JSON lines out, the server's answers in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, path: Path) -> Wire:
        return cls(*await asyncio.open_unix_connection(str(path)))

    async def send(self, d: dict[str, Any]) -> None:
        self.writer.write(orjson.dumps({"op": "cmd", **d}) + b"\n")
        await self.writer.drain()

    async def answer(self, timeout: float = 5.0) -> dict[str, Any]:
        msg = orjson.loads(await asyncio.wait_for(self.reader.readline(), timeout))
        assert isinstance(msg, dict)
        return msg

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def settings_of(snap: Snapshot) -> tuple[Any, ...]:
    g = snap.gauges
    return (g.concurrency, g.rate, g.tpm, {n: (m.weight, m.enabled) for n, m in g.models.items()})


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.slow
async def test_bad_commands_over_the_socket_change_nothing_and_the_run_ends_well(
    run_dirs: Path, workers: int
) -> None:
    name = f"valid{workers}"
    path = control_workload(run_dirs, name, workers)

    def factory() -> RunEngine:
        w = load_workload(path)
        return make_engine(w, results_path=w.results_path(), total_expected=40, publish_interval=0.05)

    local = LocalSource(
        factory, serve=RunInfo(name=name, workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None and local.engine is not None
    wire = await Wire.open(local.server_socket)
    await wire.send({"cmd": "pause"})  # hold the run still while it is prodded
    await until(lambda: (s := local.latest()) is not None and s.gauges.state == "paused", 90)
    snap = local.latest()
    assert snap is not None
    before, changes = settings_of(snap), list(snap.changes)
    assert before == (4, 50.0, 1e6, {"a": (1.0, True), "b": (1.0, True)})

    for d, message in BAD:
        await wire.send(d)
        assert await wire.answer() == {"op": "error", "message": message}, d
    # in process, the sender gets the same refusal at once, in its own thread
    for cmd in (
        SetRate(float("inf")),
        SetWeight("a", 1e308),
        EnableModel("a", cast(bool, "no")),  # the wrong type on purpose, as a client may send it
        SetConcurrency(10**300),
    ):
        with pytest.raises(CommandError):
            local.engine.submit(cmd)
        with pytest.raises(CommandError):
            local.send(cmd)

    t_before = snap.gauges.elapsed_s
    await until(lambda: (s := local.latest()) is not None and s.gauges.elapsed_s > t_before + 0.2, 90)
    now = local.latest()
    assert now is not None and now.gauges.state == "paused"  # `stop` with a bad `cancel` did not stop it
    assert settings_of(now) == before and list(now.changes) == changes

    # the limits still work: a good rate after the refused ones, then resume and finish
    await wire.send({"cmd": "set_rate", "value": 400})
    await wire.send({"cmd": "set_weight", "model": "b", "value": 1e9})
    await wire.send({"cmd": "resume"})
    await wire.send({"cmd": "set_tpm", "value": "x"})
    assert (await wire.answer())["message"] == TPM + '"x"'  # the good ones were not answered
    outcome = await asyncio.to_thread(local.wait_done, 60.0)
    await wire.close()
    assert outcome is not None and outcome.exit_code == 0
    summary = orjson.loads(orjson.dumps(outcome.summary))  # as --summary-json writes it
    assert summary["requests"]["total"] == 40 and summary["requests"]["ok"] == 40
    assert [(c["what"], c["from"], c["to"]) for c in summary["changes"]] == [
        ("paused", False, True),
        ("rate", 50.0, 400.0),
        ("weight", 1.0, 1e9),
        ("paused", True, False),
    ]


@pytest.mark.slow
async def test_a_socket_client_sending_inf_gets_an_answer(run_dirs: Path) -> None:
    """`SocketSource.send(SetRate(inf))`: JSON has no inf, so it arrives as null and is refused."""
    path = control_workload(run_dirs, "inf", 1)

    def factory() -> RunEngine:
        w = load_workload(path)
        return make_engine(w, results_path=w.results_path(), total_expected=40)

    local = LocalSource(
        factory, serve=RunInfo(name="inf", workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None
    client = SocketSource(local.server_socket)
    await client.start()
    client.send(Pause())
    client.send(SetRate(float("inf")))
    await until(lambda: client.last_error is not None, 5.0)
    assert client.last_error == RATE + "null"
    client.send(Resume())
    client.send(Stop())
    assert await client.wait_end(30.0)
    assert client.exit_code in (0, 130) and client.final_summary is not None
    await client.close()
    await asyncio.to_thread(local.wait_done, 30.0)


# --- the console ----------------------------------------------------------------------------------
async def test_the_console_toasts_a_refused_command_and_sends_nothing() -> None:
    import dataclasses

    from oxconsole.ui.app import ConsoleApp
    from tests.support.ui import StaticSource, fixed_snapshot

    snap = fixed_snapshot()
    src = StaticSource(
        dataclasses.replace(snap, gauges=dataclasses.replace(snap.gauges, concurrency=1_000_000))
    )
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("plus")
        assert src.sent == []
        messages = [str(n.message) for n in app._notifications]
        assert messages == [CONC + "1100000"]
        await pilot.press("minus")  # a good one goes
        assert src.sent == [SetConcurrency(900_000)]


async def test_the_console_toasts_what_the_run_refused() -> None:
    from oxconsole.ui.app import ConsoleApp
    from tests.support.ui import StaticSource, fixed_snapshot

    class Refusing(StaticSource):
        def send(self, cmd: Any) -> None:
            settings().admit(cmd)  # models "a" and "b" only: the snapshot's are not this run's

    src = Refusing(fixed_snapshot())
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(120, 40)):
        assert not app.send(SetWeight("qwen-3-32b", 2.0))
        assert [str(n.message) for n in app._notifications] == [
            'set_weight: unknown model "qwen-3-32b" (models: "a", "b")'
        ]
