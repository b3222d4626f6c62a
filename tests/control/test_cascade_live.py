"""Changing the cascade while it runs: through the control socket (as a script or the console
would), the cascade's order and steps change at once, the change is logged and splits the phases,
so "small first" against "big only" is one run; a command no run could take changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.base.units import change_text
from oxconsole.control import LocalSource, RunInfo, SocketSource
from oxconsole.engine.commands import CommandError, SetCascade, command_from_dict
from oxconsole.engine.livesettings import LiveSettings
from oxconsole.engine.runner import Engine
from oxconsole.workload import load_workload
from tests.support import until
from tests.support.workloads import load_workload as load_test_workload
from tests.support.workloads import write_workload

N = 120


def prompts() -> str:
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"question {i}?", "expected": f"answer {i}"}).decode()
        for i in range(N)
    )


@pytest.mark.asyncio
async def test_cascade_order_changed_over_the_socket_splits_the_phases(
    run_dirs: Path, tmp_path: Path
) -> None:
    sets = {"run.concurrency": 2, "sim.models.small.ttft": "40ms", "sim.models.big.ttft": "40ms"}
    path = write_workload("cascade", tmp_path, sets, prompts=prompts())

    def make() -> Engine:
        w = load_workload(path)
        return Engine(w, results_path=w.results_path(), total_expected=N)

    local = LocalSource(
        make, serve=RunInfo(name="casc", workload_path=str(path), overrides=(), results_path=None)
    )
    await local.start()
    assert local.server_socket is not None
    client = SocketSource(local.server_socket, hz=10.0)
    await client.start()
    try:
        await until(lambda: (s := client.latest()) is not None and s.counts.total >= 40, what="40 finished")
        client.send(SetCascade(("big",)))
        await until(
            lambda: (s := client.latest()) is not None and any(c["what"] == "cascade" for c in s.changes),
            what="the change in a snapshot",
        )
        assert await client.wait_end(30.0)
        summary = client.final_summary
    finally:
        await client.close()
        await local.close()
    assert summary is not None
    (change,) = [c for c in summary["changes"] if c["what"] == "cascade"]
    assert (
        change["from"] == ["small", "big"] and change["to"] == ["big"] and change["by"] == "key"
    )  # the console's client
    assert change_text(change) == "cascade small+big → big"
    recs = [orjson.loads(x) for x in (tmp_path / "results.jsonl").read_bytes().splitlines() if x.strip()]
    # the change's t counts from the run's start, a little before the first request was due: a
    # margin keeps the requests dispatched about the change out of both sides
    t0 = min(r["t_scheduled"] for r in recs)
    after = [r for r in recs if r["t_scheduled"] - t0 > change["t"] + 0.5]
    assert after and all(r["model"] == "big" and "models_tried" not in r for r in after), after[:3]
    before = [r for r in recs if r["t_scheduled"] - t0 < change["t"] - 0.5]
    assert before and all((r.get("models_tried") or [r["model"]])[0] == "small" for r in before), before[:3]
    first, last = summary["phases"][0], summary["phases"][-1]
    assert "small" in first["quality"]["models"], first["quality"]
    steps = (first["cascade"]["steps"], last["cascade"]["steps"], summary["cascade"]["steps"])
    assert steps == (["small", "big"], ["big"], ["big"]), steps  # each phase's in force, the end's
    # only the (at most 2) requests in flight on small at the change end in the new phase from it
    in_flight = last["quality"]["models"].get("small", {"asked": 0})["asked"]
    assert in_flight <= 2 and last["cascade"]["escalated"] <= in_flight, last
    # a wrong answer from a step no longer in the cascade stands: only those can be invalid
    q = last["quality"]
    assert q["models"]["big"]["asked"] >= 10 and q["valid"] >= q["judged"] - in_flight, q


def test_set_cascade_is_admitted_only_with_known_models_each_once(tmp_path: Path) -> None:
    w = load_test_workload("cascade", tmp_path, prompts=prompts())
    live = LiveSettings.of(w)
    assert live.cascade == ("small", "big")
    (c,) = live.apply(command_from_dict({"cmd": "set_cascade", "steps": ["big", "small"]}))
    assert (c.what, c.old, c.new) == ("cascade", ["small", "big"], ["big", "small"])
    assert c.command() == SetCascade(("big", "small"))
    assert live.apply(SetCascade(("big", "small"))) == []  # the same again: nothing changed
    bad: list[tuple[Any, str]] = [
        ((), "expected a non-empty list of model names"),
        (("big", "big"), "each once"),
        (("huge",), 'unknown model "huge"'),
        ((1,), "expected a non-empty list"),
    ]
    for steps, message in bad:
        with pytest.raises(CommandError, match=message):
            live.apply(SetCascade(steps))
    assert live.cascade == ("big", "small")
    plain = LiveSettings.of(
        load_test_workload("cascade", tmp_path, {"quality": None, "routing.cascade": None})
    )
    with pytest.raises(CommandError, match=r"set_cascade: this run has no \[quality\] table"):
        plain.apply(SetCascade(("big",)))
