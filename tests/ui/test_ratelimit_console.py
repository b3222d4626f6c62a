"""The headroom line: in the in-flight panel (whole at 40 and 56 columns, and in the real console at
80x24), and the summary table's rate-limit lines."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oxconsole.metrics.snapshot import Snapshot
from oxconsole.reports.summarytable import render_summary
from oxconsole.ui.app import ConsoleApp
from oxconsole.ui.lines import Palette
from oxconsole.ui.numbers import tight_count
from oxconsole.ui.panels.in_flight import in_flight_lines
from tests.support.ui import StaticSource, fixed_snapshot
from tests.support.workloads import write_workload

FIGURES = {
    "limit_requests": 600, "remaining_requests": 12, "remaining_requests_min": 3, "reset_requests_s": 3.24,
    "limit_tokens": 150_000, "remaining_tokens": 81_234, "remaining_tokens_min": 70_000,
    "reset_tokens_s": 3.24, "waits": 2, "wait_s": 4.5, "seen_at": 1.0,
}  # fmt: skip


def limited(s: Snapshot, **kw: Any) -> Snapshot:
    return dataclasses.replace(s, gauges=dataclasses.replace(s.gauges, ratelimit={"default": FIGURES}, **kw))


@pytest.mark.parametrize(("width", "height"), [(38, 5), (56, 6), (38, 6)])
def test_the_in_flight_panel_shows_the_headroom_whole(width: int, height: int) -> None:
    lines = [
        line.plain
        for line in in_flight_lines(limited(fixed_snapshot(), tpm=12_000), Palette(), width, height)
    ]
    assert len(lines) <= height, lines
    room = next((line for line in lines if line.startswith(("headroom", "room"))), None)
    assert room is not None, lines
    tokens = "81k/150k" if width < 44 else "81,234/150k"
    assert "12/600" in room and tokens in room and "3.2s" in room, room
    assert not any("…" in line or len(line) > width for line in lines), lines
    assert lines[-1].startswith("bound"), lines
    plain = [line.plain for line in in_flight_lines(fixed_snapshot(), Palette(), width, height)]
    assert not any(line.startswith(("headroom", "room")) for line in plain)  # no headers, no line


@pytest.mark.parametrize("width", [38, 56])
def test_requests_held_for_the_reset_are_counted_on_the_waiting_line(width: int) -> None:
    held = dataclasses.replace(
        fixed_snapshot(),
        gauges=dataclasses.replace(
            fixed_snapshot().gauges,
            waiting_slot=1,
            waiting_bucket=0,
            ratelimit={"default": FIGURES | {"waiting": 16}},
        ),
    )
    lines = [line.plain for line in in_flight_lines(held, Palette(), width, 6)]
    waiting = next((line for line in lines if line.startswith(("waiting", "wait"))), None)
    assert waiting is not None and "reset 16" in waiting and "slot 1" in waiting, lines
    assert ("bucket" in waiting) == (width >= 44), waiting  # a narrow panel drops an empty bucket
    assert not any("…" in line or len(line) > width for line in lines), lines
    none_held = [line.plain for line in in_flight_lines(limited(fixed_snapshot()), Palette(), width, 6)]
    assert not any("reset " in line for line in none_held if line.startswith(("waiting", "wait"))), none_held


def screen_rows(app: ConsoleApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def test_the_console_shows_the_headroom_at_80x24() -> None:
    app = ConsoleApp(StaticSource(limited(fixed_snapshot())), theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        rows = screen_rows(app)
    row = next((r for r in rows if "req 12/600" in r), None)
    assert row is not None, "\n".join(rows)
    assert "tok 81k/150k" in row and "3.2s" in row and "…" not in row, row


def test_tight_counts_fit_four_columns() -> None:
    cases = {
        0: "0",
        600: "600",
        8_100: "8.1k",
        81_234: "81k",
        150_000: "150k",
        1_500_000: "1.5M",
        10**10: "10G",
    }
    assert {n: tight_count(n) for n in cases} == cases


def test_the_summary_table_says_the_limits() -> None:
    figures = {"limit_requests": 600, "limit_tokens": None, "remaining_requests_min": 0,
               "remaining_tokens_min": None, "waits": 3, "wait_s": 41.25}  # fmt: skip
    summary = {"ratelimit": {"default": figures}}
    text = render_summary(summary)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("default:"))
    assert "requests 600, lowest left 0" in line and "3 waits for a reset, 41.2 s" in line, line
    assert "tokens" not in line, line
    assert all(len(ln) <= 80 for ln in text.splitlines())
    assert "rate limits" not in render_summary({}), "no headers, no lines"


def test_a_wait_for_the_providers_reset_is_what_bounds_the_run() -> None:
    from oxconsole.reports.progress import BOUND_WORDS
    from oxconsole.ui.panels.in_flight import bottleneck

    base = dataclasses.replace(
        fixed_snapshot(), gauges=dataclasses.replace(fixed_snapshot().gauges, waiting_slot=0, in_flight=3)
    )
    waiting = dataclasses.replace(
        base, gauges=dataclasses.replace(base.gauges, ratelimit={"default": FIGURES | {"waiting": 1}})
    )
    assert bottleneck(waiting) == ("info", "provider limit (its reset)"), bottleneck(waiting)
    idle = limited(base)  # figures heard, nothing waiting: not the bound
    assert bottleneck(idle)[1] != "provider limit (its reset)", bottleneck(idle)
    assert BOUND_WORDS["ratelimit"] == "provider rate limit"


def test_the_headroom_crosses_the_control_socket_as_it_is() -> None:
    """A console attached over the socket reads the snapshot through `to_dict` / JSON / `from_dict`."""
    import orjson

    snap = limited(fixed_snapshot())
    back = Snapshot.from_dict(orjson.loads(orjson.dumps(snap.to_dict())))
    assert back.gauges.ratelimit == {"default": FIGURES}, back.gauges.ratelimit
    assert Snapshot.from_dict(orjson.loads(orjson.dumps(fixed_snapshot().to_dict()))).gauges.ratelimit is None


HELD = {
    "name": "held",
    "run": {"concurrency": 2, "grace": "1s"},
    "endpoints.default.pace_by_headers": True,
    "models": [{"name": "m", "max_tokens": 4}],
    "prompts": {"synthetic": {"count": 40, "input_tokens": 8, "output_tokens": 4}},
    "sim.rpm_limit": 6,
    "sim.tpm_limit": None,
    "sim.ratelimit_window": "23h",
    "sim.models.m.output_tokens": 4,
}
"""tests/workloads/sim_ratelimit.toml at 6 requests a 23-hour window, paced by its headers: 40 prompts."""


@pytest.mark.slow
async def test_the_eta_waits_for_the_providers_reset(tmp_path: Any) -> None:
    """A real engine against the simulator's limit of 6 requests a 23-hour window, paced by its
    headers: once 6 are done the rest are held for the reset, and the ETA (the console's header,
    the headless line) says the day it will take, not the seconds the rate so far would."""
    from oxconsole.reports.progress import eta_seconds, progress_line
    from tests.support import until
    from tests.support.ui import EngineSource

    path = write_workload("sim_ratelimit", tmp_path, HELD, file="held.toml")
    src = EngineSource(path)
    src.engine.total_expected = 40
    app = ConsoleApp(src, theme_dirs=[], cursor_blink=False)

    def held() -> bool:
        s = src.latest()
        rl = (s.gauges.ratelimit or {}) if s is not None else {}
        return any(e.get("waiting") for e in rl.values())

    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(held, 30, what="requests held for the reset")
            await until(lambda: app.last is not None and held_in(app.last), 10, what="a frame of it")
            await pilot.pause(0.3)
            snap = app.last
            assert snap is not None
            eta = eta_seconds(snap)
            assert eta is not None and eta > 22 * 3600, (eta, snap.gauges.ratelimit)
            bar = "".join(seg.text for seg in app.screen._compositor.render_strips()[1])
            assert "ETA 22h" in bar or "ETA 23h" in bar, bar
            line = progress_line(snap)
            assert "ETA 22h" in line or "ETA 23h" in line, line
    finally:
        src.shutdown()


def held_in(s: Snapshot) -> bool:
    return any(e.get("waiting") for e in (s.gauges.ratelimit or {}).values())
