"""A server's error body carrying terminal control sequences (OSC 52 clipboard write, clear
screen) is shown as text, never obeyed: the headless summary and `report` print no ESC."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from tests.support import oxconsole
from tests.support.http import chat_server
from tests.support.workloads import write_workload

HOSTILE = "boom \x1b]52;c;SGVsbG8=\x07 and \x1b[2J \x9b31m done"


async def test_server_control_sequences_never_reach_the_terminal(tmp_path: Path) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": HOSTILE}}, status=500)

    journal = tmp_path / "run" / "results.jsonl"
    async with chat_server(handler) as base:
        sets = {
            "name": "esc",
            "run.concurrency": 2,
            "output.results": str(journal),
            "prompts.items": ["a", "b", "c"],
        }
        write_workload(
            "server", tmp_path, {**sets, "endpoints.default.base_url": f"{base}/v1"}, file="w.toml"
        )
        run = await asyncio.to_thread(oxconsole, "w.toml", "--headless", cwd=tmp_path)
    assert "SGVsbG8=" in run.stdout + run.stderr, (run.returncode, run.stdout, run.stderr)
    report = await asyncio.to_thread(oxconsole, "report", str(journal), cwd=tmp_path)
    for name, out in (("run", run), ("report", report)):
        text = out.stdout + out.stderr
        assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text, (name, text)
    assert "\\x1b]52" in report.stdout + report.stderr, report.stdout


def test_the_console_errors_panel_shows_control_sequences_as_text() -> None:
    import dataclasses

    from oxconsole.ui.lines import Palette
    from oxconsole.ui.panels.tables import errors_lines
    from tests.support.ui import fixed_snapshot

    base = fixed_snapshot()
    snap = dataclasses.replace(base, error_details={**base.error_details, "http_500": HOSTILE})
    text = "\n".join(x.plain for x in errors_lines(snap, Palette(), 78, 20))
    assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text, text
    assert "\\x1b[2J" in text, text
