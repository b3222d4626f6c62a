"""`oxconsole mcp`'s tools through the SDK's own in-memory client, against real runs: a run an agent
starts is an ordinary detached run (listed by `oxconsole ps`, driven over its control socket), its
changes are logged `by = "agent"`, and every refusal is the message a person gets for the same
mistake, from the command line or from the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from oxconsole.control import list_runs
from tests.support import oxconsole_here, read_jsonl, until
from tests.support.agents import connected, data, refusal, stopping_runs
from tests.support.workloads import write_workload

TOOLS = {"validate", "start", "runs", "snapshot", "set", "stop", "summary", "compare"}

pytestmark = pytest.mark.usefixtures("run_dirs")


async def test_the_contracts_tools_with_typed_schemas_an_agent_can_act_on() -> None:
    async with connected() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS, sorted(tools)
        for t in tools.values():
            assert t.description and len(t.description) > 80, (t.name, t.description)
            assert t.output_schema is not None, t.name
        props = tools["set"].input_schema["properties"]
        assert props["concurrency"]["type"] == "integer" and props["concurrency"]["minimum"] == 1, props
        assert "requests per second" in props["rate"]["description"].lower(), props["rate"]
        assert tools["set"].input_schema["required"] == ["name"], tools["set"].input_schema
        assert set(tools["start"].output_schema["required"]) == {"name", "pid", "journal"}  # type: ignore[index]
        assert tools["runs"].annotations is not None and tools["runs"].annotations.read_only_hint


async def test_validate_says_what_would_run_and_every_problem_in_the_clis_words(tmp_path: Path) -> None:
    w = write_workload("agent", tmp_path)
    async with connected() as client:
        out = data(await client.call_tool("validate", {"workload": str(w), "set": ["run.rate=5"]}))
        assert out["valid"] and out["name"] == "agent" and out["models"] == ["small", "large"], out
        assert out["requests"] == 100_000 and "small" in out["would_run"], out
        bad = ["run.concurrency=0", "models.0.weight=-1"]
        out = data(await client.call_tool("validate", {"workload": str(w), "set": bad}))
        cli = oxconsole_here("validate", str(w), "--set", bad[0], "--set", bad[1], cwd=tmp_path)
        assert cli.returncode == 2, cli.stderr
        person = [line.removeprefix("oxconsole: ") for line in cli.stderr.splitlines()]
        agent = [line.removeprefix("oxconsole: ") for line in out["errors"]]
        assert not out["valid"] and agent == person and len(agent) >= 2, (agent, person)
        out = data(await client.call_tool("validate", {"url": "sim", "model": "m"}))
        assert out["valid"] and out["models"] == ["m"], out


async def test_start_refuses_bad_arguments_as_the_command_line_does(tmp_path: Path) -> None:
    async with connected() as client:
        for args, flags in (
            ({"url": "sim", "concurrency": "fifty"}, ["--concurrency", "fifty"]),
            ({"url": "sim", "concurrency": 0, "requests": 5, "duration": "9s"},
             ["--concurrency", "0", "--requests", "5", "--duration", "9s"]),
            ({"workload": str(tmp_path / "nope.toml")}, []),
        ):  # fmt: skip
            msg = refusal(await client.call_tool("start", args))
            argv = ["run", *flags, *([args["workload"]] if "workload" in args else ["--url", "sim"])]
            cli = oxconsole_here(*argv, cwd=tmp_path)
            assert cli.returncode == 2, cli.stderr
            lines = cli.stderr.splitlines()
            said = [line for line in lines if ": error: " in line] or lines  # argparse's, past its usage
            assert msg.splitlines() == said, (msg, said)
        assert list_runs() == []  # nothing was started


@pytest.mark.slow
async def test_an_agent_starts_reads_turns_and_stops_a_run(tmp_path: Path) -> None:
    w = write_workload("agent", tmp_path)
    with stopping_runs():
        async with connected() as client:
            started = data(await client.call_tool("start", {"workload": str(w), "concurrency": 3}))
            key = started["name"]
            assert set(started) == {"name", "pid", "journal"} and key == f"agent-{started['pid']}", started
            # an ordinary detached run: `oxconsole ps` lists it, as the `runs` tool does
            ps = json.loads(oxconsole_here("ps", "--json", cwd=tmp_path).stdout)
            assert [f"{r['name']}-{r['pid']}" for r in ps] == [key], ps
            assert [r["pid"] for r in data(await client.call_tool("runs"))["runs"]] == [started["pid"]]

            async def snap() -> dict[str, Any]:
                return dict(data(await client.call_tool("snapshot", {"name": "agent"})))

            await until_ok(snap, 30)
            first = await snap()
            assert first["run"] == key and first["concurrency"] == 3 and first["rate"] == 0.0, first
            assert first["state"] == "running" and first["in_flight"] <= 3, first
            for k in ("requests", "throughput", "latency_ms", "ttft_ms", "cost", "models", "changes"):
                assert k in first, (k, sorted(first))

            turn = {"name": key, "concurrency": 8, "weights": {"large": 2}}
            out = data(await client.call_tool("set", turn))
            assert [(c["what"], c.get("model"), c["from"], c["to"], c["by"]) for c in out["changes"]] == [
                ("concurrency", None, 3, 8, "agent"),
                ("weight", "large", 1.0, 2.0, "agent"),
            ], out
            now = await snap()
            assert now["concurrency"] == 8 and now["changes"][-2:] == out["changes"], now["changes"]
            assert now["phase"]["settings"] == out["changes"], now["phase"]

            # refused in the run's words; nothing changed
            for args, said in (
                ({"concurrency": "fifty"}, 'set_concurrency: expected an integer >= 1'),
                ({"weights": {"gpt": 2}}, 'set_weight: unknown model "gpt"'),
                ({"rate": 5, "enabled": {"nosuch": False}}, 'enable_model: unknown model "nosuch"'),
            ):  # fmt: skip
                msg = refusal(await client.call_tool("set", {"name": key, **args}))
                assert msg.startswith(said), (args, msg)
            after = await snap()
            assert after["changes"] == now["changes"] and after["rate"] == 0.0, after["changes"]

            out = data(await client.call_tool("set", {"name": key, "paused": True}))
            assert [c["what"] for c in out["changes"]] == ["paused"], out
            await until_state(snap, "paused")
            data(await client.call_tool("set", {"name": key, "paused": False, "auto": True}))
            assert (await snap())["auto"] is True

            end = data(await client.call_tool("stop", {"name": key}))
            assert end["state"] == "done" and end["exit_code"] == 130 and end["run"] == key, end
            assert end["requests"]["not_sent"] > 0 and end["requests"]["ok"] > 0, end["requests"]
            agents = [c for c in end["changes"] if c["by"] == "agent"]
            whats = [c["what"] for c in agents]  # auto is turned before the pause is lifted
            assert whats == ["concurrency", "weight", "paused", "auto", "paused"], agents
            assert data(await client.call_tool("summary", {"name": key})) == end
            assert data(await client.call_tool("snapshot", {"name": key}))["state"] == "done"

            # the journal's summary, as `oxconsole report --json` rebuilds it
            journal = started["journal"]
            from_journal = data(await client.call_tool("summary", {"journal": journal}))
            report = json.loads(oxconsole_here("report", journal, "--json", cwd=tmp_path).stdout)
            assert from_journal == report
            assert [c["by"] for c in report["changes"]][:2] == ["agent", "agent"], report["changes"]
            assert len(read_jsonl(Path(journal))) == report["requests"]["total"]
        assert list_runs() == []


async def until_ok(snap: Any, timeout: float) -> None:
    box: dict[str, Any] = {}

    async def some_ok() -> bool:
        box["s"] = await snap()  # the live settings come with the run's first published snapshot
        return bool(box["s"].get("requests", {}).get("ok")) and "in_flight" in box["s"]

    await until_async(some_ok, timeout, "the run's first answers")


async def until_state(snap: Any, state: str) -> None:
    async def there() -> bool:
        return bool((await snap())["state"] == state)

    await until_async(there, 20, f"state {state}")


async def until_async(cond: Any, timeout: float, what: str) -> None:
    flag = {"ok": False}

    async def poll() -> None:
        flag["ok"] = await cond()

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        await poll()
        if flag["ok"]:
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.1)


async def test_a_run_started_in_a_terminal_is_driven_by_an_agent_and_names_are_picked_as_attach_does(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    w = write_workload("agent", tmp_path)
    with stopping_runs():
        p = subprocess.Popen(
            [sys.executable, "-m", "oxconsole", str(w), "--headless"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await until(lambda: any(e.pid == p.pid for e in list_runs()), 60, "the headless run's socket")
            async with connected() as client:

                async def state() -> bool:
                    s = data(await client.call_tool("snapshot", {"name": "agent"}))
                    return bool(s["state"] == "running")

                await until_async(state, 60, "the run's clock")
                msg = refusal(await client.call_tool("snapshot", {"name": "gone"}))
                assert msg.startswith("no run named 'gone' is going; the runs going are:"), msg
                out = data(await client.call_tool("set", {"name": "agent", "rate": 50}))
                assert [(c["what"], c["to"], c["by"]) for c in out["changes"]] == [("rate", 50.0, "agent")]
                assert out["held"] is False, out
                data(await client.call_tool("stop", {"name": "agent", "cancel": True}))
            assert p.wait(60) == 130
        finally:
            if p.poll() is None:
                p.kill()


def test_compare_is_report_a_b_json(tmp_path: Path) -> None:
    journals = []
    for i, rate in enumerate((0, 40)):
        w = write_workload(
            "two_models", tmp_path, {"prompts.synthetic.count": 20, "run.rate": rate}, file=f"w{i}.toml"
        )
        out = tmp_path / f"r{i}.jsonl"
        r = oxconsole_here(str(w), "--headless", "--output", str(out), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        journals.append(str(out))
    want = json.loads(oxconsole_here("report", *journals, "--json", cwd=tmp_path).stdout)
    cli = oxconsole_here("report", str(tmp_path / "none.jsonl"), cwd=tmp_path)
    assert cli.returncode == 2, cli.stderr

    async def ask() -> None:
        async with connected() as client:
            got = data(await client.call_tool("compare", {"journals": journals}))
            assert got == want
            msg = refusal(await client.call_tool("compare", {"journals": journals[:1]}))
            assert msg == "compare: expected two or more journals, got 1", msg
            msg = refusal(await client.call_tool("summary", {"journal": str(tmp_path / "none.jsonl")}))
            assert msg == cli.stderr.strip(), (msg, cli.stderr)

    asyncio.run(ask())


async def test_a_short_run_that_ends_unseen_is_read_from_the_summary_it_left(tmp_path: Path) -> None:
    w = write_workload("agent", tmp_path, {"prompts.synthetic.count": 6})
    with stopping_runs():
        async with connected() as client:
            started = data(await client.call_tool("start", {"workload": str(w)}))
            await until(lambda: all(e.pid != started["pid"] for e in list_runs()), 60, "the run's end")
            snap = data(await client.call_tool("snapshot", {"name": started["name"]}))
            assert snap["state"] == "done" and snap["run"] == started["name"], snap
            assert snap["requests"]["total"] == 6 and snap["requests"]["ok"] == 6, snap["requests"]
            assert data(await client.call_tool("summary", {"name": "agent"})) == snap
            assert data(await client.call_tool("stop", {"name": started["name"]})) == snap
            msg = refusal(await client.call_tool("set", {"name": started["name"], "rate": 1}))
            assert msg == f"{started['name']}: the run has ended; nothing changed", msg
