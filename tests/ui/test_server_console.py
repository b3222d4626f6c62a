"""The server's side in the console: the engine's running, waiting and KV usage beside the client's
in flight, where the queue is in words, and the bound line naming the server; in the in-flight
panel at 38 and 56 columns and in the real console at 80x24 (Pilot and a screenshot), from
snapshots that crossed JSON as an attached console gets them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oxconsole.metrics.bound import bound_by
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.reports.progress import BOUND_WORDS, progress_line
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.in_flight import InFlightPanel, bottleneck, in_flight_lines
from tests.support.ui import StaticSource, fixed_snapshot

QUEUEING = {
    "url": "http://h:8000/metrics",
    "engine": "vllm",
    "running": 32,
    "waiting": 13,
    "kv_usage": 0.56,
    "age_s": 0.4,
    "queued_share": 0.9,
    "client_in_flight": 45,
    "scrapes": 90,
    "failed_scrapes": 0,
}


def with_server(server: dict[str, Any] | None, **gauges: Any) -> Snapshot:
    base = fixed_snapshot()
    snap = dataclasses.replace(base, gauges=dataclasses.replace(base.gauges, server=server, **gauges))
    return Snapshot.from_dict(snap.to_dict())  # what a console attached over the socket gets


def lines_of(snap: Snapshot, width: int, height: int) -> list[str]:
    return [line.plain for line in in_flight_lines(snap, Palette(), width, height)]


@pytest.mark.parametrize(("width", "height"), [(36, 5), (38, 6), (56, 6)])
def test_the_server_line_fits_the_panel(width: int, height: int) -> None:
    lines = lines_of(with_server({"default": QUEUEING}, waiting_slot=0), width, height)
    assert len(lines) <= height, lines
    srv = next((ln for ln in lines if ln.startswith(("server", "srv"))), None)
    assert srv is not None, lines
    assert "run 32" in srv and "wait 13" in srv and ("kv 56%" if width >= 44 else "kv56%") in srv, srv
    if width >= 44:
        assert "queue: engine" in srv, srv
    assert not any("…" in ln or len(ln) > width for ln in lines), lines
    assert lines[-1].startswith("bound") and "server queue: 13 waiting" in lines[-1], lines
    assert not any(ln.startswith(("server", "srv")) for ln in lines_of(fixed_snapshot(), width, height))


@pytest.mark.parametrize(
    ("figures", "waiting_slot", "wide", "narrow"),
    [
        ({"running": 4, "waiting": 0, "client_in_flight": 9}, 0, "in transit 5", "transit 5"),
        ({"running": 4, "waiting": 0, "client_in_flight": 4}, 7, "queue: client 7", "client 7"),
        ({"running": 6, "waiting": 0, "client_in_flight": 4}, 0, "+2 from others", "+2 others"),
        ({"running": 4, "waiting": 0, "client_in_flight": 4}, 0, "no queue", ""),
    ],
)
def test_where_the_queue_is_in_words(
    figures: dict[str, Any], waiting_slot: int, wide: str, narrow: str
) -> None:
    e = {"engine": "vllm", "age_s": 0.5, **figures}
    snap = with_server({"default": e}, waiting_slot=waiting_slot)
    for width, words in ((56, wide), (36, narrow)):
        srv = next(ln for ln in lines_of(snap, width, 6) if ln.startswith(("server", "srv")))
        assert srv.rstrip().endswith(words or "wait 0"), (width, srv)
        assert len(srv) <= width and "…" not in srv, (width, srv)


def test_the_bound_names_the_server() -> None:
    full = with_server({"default": QUEUEING | {"kv_usage": 0.93, "queued_share": 0.2}}, waiting_slot=0)
    assert bound_by(full) == "server KV" and bottleneck(full) == ("info", "server KV cache 93% full")
    queued = with_server({"default": QUEUEING}, waiting_slot=0)
    assert bound_by(queued) == "server queue", bound_by(queued)
    assert "bound: server queue" in progress_line(queued), progress_line(queued)
    assert BOUND_WORDS["server KV"] == "server KV cache"
    brief = with_server({"default": QUEUEING | {"queued_share": 0.5}}, waiting_slot=0)
    assert bound_by(brief) != "server queue"  # waiting half the window is not "most of it"
    stale = with_server({"default": QUEUEING | {"age_s": 30.0, "kv_usage": 0.99}}, waiting_slot=0)
    assert bound_by(stale) not in ("server queue", "server KV")  # a server that stopped answering
    lag = with_server({"default": QUEUEING}, waiting_slot=0, loop_lag_ms=80.0)
    assert bound_by(lag) == "loop lag"  # the client's own limit comes first


def test_a_server_never_read_takes_no_line() -> None:
    """Its warning said why at the start (a hosted API has no /metrics: no line for it all run)."""
    failed = {"url": "http://h:8000/metrics", "failed": [["http://h:8000/metrics", "HTTP 404"]], "scrapes": 3}
    lines = lines_of(with_server({"default": failed}), 56, 6)
    assert not any(ln.startswith("server") for ln in lines), lines


def make_app(snap: Snapshot) -> ConsoleApp:
    return ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)


async def test_the_console_shows_the_server_at_80x24() -> None:
    app = make_app(with_server({"default": QUEUEING}, waiting_slot=0))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.tick()
        await pilot.pause()
        panel = app.main.query_one(InFlightPanel)
        lines = [line.plain for line in panel._lines]
        width = panel.size.width
    srv = next((ln for ln in lines if ln.startswith(("server", "srv"))), None)
    assert srv is not None, lines
    assert "run 32" in srv and "wait 13" in srv and "kv" in srv and "56%" in srv and "…" not in srv, srv
    assert all(len(ln) <= width for ln in lines), (width, lines)
    assert any("server queue" in ln for ln in lines), lines


def test_server_figures_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(with_server({"default": QUEUEING}, waiting_slot=0)), terminal_size=(80, 24))
