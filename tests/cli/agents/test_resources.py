"""The two resources: `oxconsole://runs` and a run's snapshot, read and subscribed to in both
protocol eras, against a real run; a run that ends is told once more, then read as done."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import MCPError
from mcp.types import ResourceUpdatedNotification

from oxconsole.cli.agents.watch import RUNS_URI, SNAPSHOT_TEMPLATE, snapshot_uri
from tests.support.agents import TICK_S, connected, data, headless_run


def _json(result: Any) -> Any:
    return json.loads(result.contents[0].text)


async def test_resources_are_listed_read_and_updated(run_dirs: Path, tmp_path: Path) -> None:
    with headless_run(tmp_path) as entry:
        heard: list[str] = []

        async def on_message(message: object) -> None:
            if isinstance(message, ResourceUpdatedNotification):
                heard.append(str(message.params.uri))

        async with connected("legacy", message_handler=on_message) as client:
            assert [str(r.uri) for r in (await client.list_resources()).resources] == [RUNS_URI]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == [SNAPSHOT_TEMPLATE]
            runs = _json(await client.read_resource(RUNS_URI))["runs"]
            assert [r["pid"] for r in runs] == [entry.pid], runs
            with anyio.fail_after(20):  # the live settings come with the run's first published snapshot
                while "in_flight" not in (snap := _json(await client.read_resource(snapshot_uri(entry.key)))):
                    await anyio.sleep(TICK_S)
            assert snap["run"] == entry.key and snap["state"] == "running" and "in_flight" in snap, snap
            with pytest.raises(MCPError) as e:
                await client.read_resource(snapshot_uri("gone"))
            assert "no run named 'gone' is going" in str(e.value), e.value
            uri = snapshot_uri(entry.key)
            with warnings.catch_warnings():  # deprecated as of 2026-07-28, the only way before it
                warnings.simplefilter("ignore")
                await client.subscribe_resource(uri)
                await client.subscribe_resource(RUNS_URI)
            with anyio.fail_after(10):
                while heard.count(uri) < 2:  # the run moves: told every tick
                    await anyio.sleep(TICK_S)
            told = len(heard)  # before the stop: what it sets off may be told before it answers
            end = data(await client.call_tool("stop", {"name": entry.key, "cancel": True}))
            assert end["state"] == "done", end
            with anyio.fail_after(10):
                while RUNS_URI not in heard[told:] or uri not in heard[told:]:
                    await anyio.sleep(TICK_S)  # it left the runs and its snapshot moved once more
            assert _json(await client.read_resource(uri))["state"] == "done"
