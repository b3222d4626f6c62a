"""The control socket's answers for a client that asks (`oxconsole mcp`): a command or a batch with
an `id` answered with the changes it made, a batch admitted whole before any of it is applied, and
the run so far in the summary's keys with its live settings."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from oxconsole.control import LocalSource, RunInfo
from oxconsole.engine.runner import RunEngine, make_engine
from tests.support import until
from tests.support.workloads import load_workload


class Asker:
    """A bare client: JSON lines out, the answer with a given id in (snapshot frames skipped)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def ask(self, msg: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        self.writer.write(orjson.dumps(msg) + b"\n")
        await self.writer.drain()
        while True:
            reply = orjson.loads(await asyncio.wait_for(self.reader.readline(), timeout))
            if reply.get("id") == msg.get("id"):
                return dict(reply)


async def test_commands_with_an_id_are_answered_and_a_batch_is_all_or_nothing(tmp_path: Path) -> None:
    w = load_workload("two_models", tmp_path, {"prompts.synthetic.count": 100000, "run.concurrency": 4})

    def factory() -> RunEngine:
        return make_engine(w, results_path=w.results_path(), total_expected=None, publish_interval=0.05)

    info = RunInfo(name="t", workload_path=str(w.path), overrides=(), results_path=None)
    local = LocalSource(factory, serve=info)
    await local.start()
    try:
        assert local.server_socket is not None and local.engine is not None
        asker = Asker(*await asyncio.open_unix_connection(str(local.server_socket)))
        await until(lambda: local.engine is not None and local.engine.state == "running", 30, "the clock")
        done = await asker.ask({"op": "cmd", "id": 1, "cmd": "set_concurrency", "value": 6, "by": "agent"})
        assert done["op"] == "done" and done["held"] is False, done
        assert [(c["what"], c["from"], c["to"], c["by"]) for c in done["changes"]] == [
            ("concurrency", 4, 6, "agent")
        ], done
        # one bad command in a batch: nothing of it applied, the run's own words back
        batch = [
            {"cmd": "set_rate", "value": 9},
            {"cmd": "set_weight", "model": "nosuch", "value": 2},
        ]
        refused = await asker.ask({"op": "cmds", "id": 2, "cmds": batch, "by": "agent"})
        assert refused["op"] == "error" and 'unknown model "nosuch"' in refused["message"], refused
        summary = await asker.ask({"op": "summary", "id": 3})
        assert summary["op"] == "summary", summary
        live, s = summary["live"], summary["summary"]
        assert live["rate"] == 0.0 and live["concurrency"] == 6 and live["state"] == "running", live
        assert [c["what"] for c in s["changes"]] == ["concurrency"], s["changes"]
        assert live["phase"]["index"] == 1 and live["phase"]["settings"] == done["changes"], live["phase"]
        for key in ("requests", "throughput", "latency_ms", "ttft_ms", "cost", "models", "phases"):
            assert key in s, (key, sorted(s))
        ok = await asker.ask({"op": "cmds", "id": 4, "cmds": batch[:1], "by": "agent"})
        assert [(c["what"], c["to"]) for c in ok["changes"]] == [("rate", 9.0)], ok
        bad_by = await asker.ask({"op": "cmd", "id": 5, "cmd": "pause", "by": "stage"})
        assert bad_by == {
            "op": "error",
            "id": 5,
            "message": "pause: by: expected key, command or agent, got 'stage'",
        }
        too_many = await asker.ask({"op": "cmds", "id": 6, "cmds": [{"cmd": "pause"}] * 65})
        assert too_many["op"] == "error" and "expected a list of 1 to 64 commands" in too_many["message"]
        asker.writer.close()
    finally:
        if local.engine is not None:
            local.engine.request_stop(cancel=True)
        await local.close()
