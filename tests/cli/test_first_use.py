"""What a new user hit first (issue 10, points 2, 8, 9 and the small ones of 10), outside the console.

Each test stands for one thing a first user should see: the first detail of each error class at
the end of a headless run (a base_url without /v1 says so, over real HTTP), in `report` and in the
snapshot the console gets; the models table sized to its names; `s` saving a file that routes as
the tuned run did; the summary's phase table in words; no ETA while draining; keys typed before
the console was up held unechoed.
"""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import termios
from pathlib import Path

import orjson

from oxconsole.engine.commands import EnableModel
from oxconsole.engine.runner import Engine
from oxconsole.metrics import Collector, Snapshot
from oxconsole.reports.progress import progress_line
from oxconsole.reports.summary import render_summary, summary_from_journal
from oxconsole.reports.tuned import write_tuned
from oxconsole.ui.lines import Palette
from oxconsole.ui.panels.errors import errors_lines
from oxconsole.ui.panels.header import header_lines
from oxconsole.ui.panels.models import models_lines
from oxconsole.ui.typeahead import TypeAhead, keys, plan
from oxconsole.workload import load_workload
from tests.support import oxconsole_here
from tests.support.firstuse import HINT, no_v1, rec
from tests.support.ui import fixed_snapshot
from tests.support.workloads import write_workload

ROOT = Path(__file__).resolve().parents[2]


# -- point 2: the first detail of each error class reaches the user -----------------------------


def test_collector_keeps_the_first_detail_of_each_class_in_snapshot_and_summary() -> None:
    c = Collector(["m"], started_at=1000.0, clock=lambda: 5.0)
    c.record_attempt_error("m", "http_429", "HTTP 429: slow down (first)")
    c.record_attempt_error("m", "http_429", "HTTP 429: slow down (second)")
    c.record(rec(1, "http_404", f"HTTP 404: Not Found (is base_url 'http://x' {HINT})"))
    c.record(rec(2, "http_404", "HTTP 404: Not Found"))
    c.record(rec(3, "connection", ""))  # no detail: the next one is the first
    c.record(rec(4, "connection", "ClientConnectorError: refused (is the server running?)"))
    want = {
        "connection": "ClientConnectorError: refused (is the server running?)",
        "http_404": f"HTTP 404: Not Found (is base_url 'http://x' {HINT})",
        "http_429": "m: HTTP 429: slow down (first)",
    }
    summary = c.summary("t", 5.0)
    assert summary["error_details"] == want
    assert summary["errors"] == {"connection": 2, "http_404": 2}  # the contract's counts unchanged
    snap = c.snapshot(fixed_snapshot().gauges)
    assert snap.error_details == want
    assert snap.errors["http_404"].detail == want["http_404"]
    # it crosses the control socket
    assert Snapshot.from_dict(orjson.loads(orjson.dumps(snap.to_dict()))).error_details == want


def test_report_of_a_journal_wraps_each_first_detail_under_the_table(tmp_path: Path) -> None:
    long = "HTTP 404: Error code: 404 (is base_url 'http://127.0.0.1:18931/some/long/prefix' " + HINT + ")"
    lines = [rec(i, "http_404", long if i == 0 else "later").to_json_dict() for i in range(3)]
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in lines))
    summary = summary_from_journal(path)
    assert summary["error_details"] == {"http_404": long}
    text = render_summary(summary)
    assert all(len(line) <= 80 for line in text.splitlines()), [
        line for line in text.splitlines() if not (len(line) <= 80)
    ][:5]
    tail = text[text.index("detail    http_404:") :]
    assert " ".join(tail.split()).startswith(f"detail http_404: {' '.join(long.split())}")


def test_headless_run_against_a_base_url_without_v1_prints_the_hint(tmp_path: Path, sim_url: str) -> None:
    assert sim_url.endswith("/v1")
    w = no_v1(tmp_path, tmp_path / "out" / "results.jsonl", sim_url[: -len("/v1")])
    r = oxconsole_here(str(w), "--headless", "--summary-json", str(tmp_path / "s.json"), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "errors    http_404 12" in r.stdout
    joined = " ".join(r.stdout.split())
    assert "detail http_404: HTTP 404:" in joined and HINT in joined
    s = orjson.loads((tmp_path / "s.json").read_bytes())
    assert s["errors"] == {"http_404": 12}
    assert HINT in s["error_details"]["http_404"]


def test_errors_panel_wraps_details_at_80_columns_and_keeps_every_class_when_short() -> None:
    base = fixed_snapshot()
    long = "HTTP 404: Error code: 404 (is base_url 'http://127.0.0.1:18931' " + HINT + ")"
    snap = dataclasses.replace(base, error_details={**base.error_details, "http_500": long})
    lines = [x.plain for x in errors_lines(snap, Palette(), 78, 20)]
    assert all(len(x) <= 78 for x in lines), [x for x in lines if not (len(x) <= 78)][:5]
    assert not any(x.endswith("…") for x in lines)
    joined = " ".join(" ".join(lines).split())
    assert " ".join(long.split()) in joined
    short = [x.plain for x in errors_lines(snap, Palette(), 78, 7)]
    assert len(short) <= 7
    assert [c for c in ("http_500", "timeout", "http_429") if any(x.startswith(c) for x in short)] == [
        "http_500",
        "timeout",
        "http_429",
    ]


# -- point 8: the models table --------------------------------------------------------------------


def test_models_table_sizes_the_name_column_to_the_names_and_shows_cost_at_80() -> None:
    snap = fixed_snapshot()
    longest = max(len(m.name) for m in snap.models)
    for width in (78, 118, 198):
        head, _, *rows = [x.plain for x in models_lines(snap, Palette(), width)]
        # the next column starts right after the names (at 80, the state follows the name)
        assert head.index("weight" if width < 100 else "state") <= longest + 2 + (
            len(" cooling") if width < 100 else 0
        )
        assert head.rstrip().endswith("cost") and all(len(x) <= width for x in (head, *rows))
        for m, row in zip(snap.models, rows, strict=True):
            assert row.startswith(m.name) and row.rstrip().endswith(f"{m.cost:.4f}")
    head = models_lines(snap, Palette(), 198)[0].plain
    headers = ("model", "state", "weight", "target", "share", "in fl", "req/s", "TTFT p50/99")
    assert head.split() == " ".join((*headers, "lat p50/99", "ok", "err", "tok in/out", "cost")).split()
    assert "weight" in models_lines(snap, Palette(), 78)[0].plain.split()


# -- point 9: `s` saves what reproduces the tuned run -------------------------------------------


def _prompts() -> str:
    tags = ["classify", "summarize", "only-c", None]
    lines = []
    for i in range(80):
        tag = tags[i % 4]
        lines.append(orjson.dumps({"id": f"p{i}", "prompt": f"hello {i}", **({"tag": tag} if tag else {})}))
    return b"\n".join(lines).decode() + "\n"


def _routes(results: Path) -> dict[str, set[str]]:
    """tag -> the models its requests went to."""
    out: dict[str, set[str]] = {}
    for line in results.read_bytes().splitlines():
        r = orjson.loads(line)
        tag = ["classify", "summarize", "only-c", "untagged"][int(r["id"][1:]) % 4]
        out.setdefault(tag, set()).add(r["model"])
    return out


async def test_saved_tuned_file_routes_as_the_tuned_run_did(tmp_path: Path) -> None:
    path = write_workload(
        "routed",
        tmp_path,
        {"output.results": str(tmp_path / "live.jsonl")},
        file="routed.toml",
        prompts=_prompts(),
    )
    w = load_workload(path, ["run.concurrency=4"])
    live = Engine(w, results_path=w.results_path())
    live.apply(EnableModel("c", False))  # tuned before the first request
    out = await live.run()
    assert out.summary["requests"]["ok"] == 80
    tuned_routes = _routes(tmp_path / "live.jsonl")
    assert "c" not in set().union(*tuned_routes.values())
    assert live.latest is not None

    saved = write_tuned(path, ["run.concurrency=4"], live.latest)
    assert saved.overrides == ("run.concurrency=4",)
    assert "models.2.weight 2 → 0 (c off)" in saved.changes
    assert any(ch.startswith("routing.rules.2 (tag only-c) dropped") for ch in saved.changes), [
        ch for ch in saved.changes
    ][:5]
    again = load_workload(saved.path, [f"output.results={(tmp_path / 'again.jsonl').as_posix()!r}"])
    assert again.run.concurrency == 4  # the --set baked in
    assert [r.tag for r in again.routing.rules] == ["classify", "summarize"]
    assert all("c" not in (*r.models, *r.fallback) for r in again.routing.rules), [
        r for r in again.routing.rules if "c" in (*r.models, *r.fallback)
    ][:5]
    rerun = Engine(again, results_path=again.results_path())
    await rerun.run()
    assert _routes(tmp_path / "again.jsonl") == tuned_routes


# -- point 10: the small things -------------------------------------------------------------------


def test_summary_phase_table_names_changes_as_the_console_does() -> None:
    c = Collector(["m"], started_at=1000.0, clock=lambda: 30.0)
    c.record(rec(1))
    c.change(10.0, "paused", False, True)
    c.record(rec(2))
    c.change(20.0, "paused", True, False)
    c.record(rec(3))
    c.change(25.0, "rate", 0.0, 27.5)
    c.record(rec(4))
    c.change(28.0, "rate", 27.5, 0.0)
    text = render_summary(c.summary("t", 30.0))
    assert "False" not in text and "True" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), [
        line for line in text.splitlines() if not (len(line) <= 80)
    ][:5]
    text = " ".join(text.split())  # what changed is wrapped in its column, not cut
    for words in ("paused", "resumed", "rate unlimited → 27.5/s", "rate 27.5/s → unlimited"):
        assert words in text, words


def test_no_eta_while_draining_and_time_progress_for_a_duration_bound_run() -> None:
    snap = fixed_snapshot()
    running = " ".join(x.plain for x in header_lines(snap, Palette(), 100, name="d", state="running"))
    assert "ETA" in running
    draining = dataclasses.replace(snap, gauges=dataclasses.replace(snap.gauges, state="draining"))
    for s, state in ((snap, "draining"), (draining, "draining"), (draining, "running")):
        line = header_lines(s, Palette(), 100, name="d", state=state)[1].plain
        assert "ETA" not in line and "draining" in line
    assert "ETA" in progress_line(snap) and "ETA" not in progress_line(draining)
    open_ended = dataclasses.replace(snap, gauges=dataclasses.replace(snap.gauges, total_expected=None))
    bar = header_lines(open_ended, Palette(), 100, name="d", state="running", duration=190.0)[1].plain
    assert "1:35 of 3:10" in bar and "50.3%" in bar and "finished" in bar  # elapsed 95.5 s


def test_typeahead_holds_keys_unechoed_and_gives_them_back() -> None:
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        held = TypeAhead(slave)
        assert held.hold()
        os.write(master, b"++x\x1b[A")
        assert not select.select([master], [], [], 0.2)[0], "the terminal echoed what was typed"
        assert held.take() == "++x\x1b[A"
        assert termios.tcgetattr(slave) == before
        assert held.take() == ""
    finally:
        os.close(master)
        os.close(slave)
    assert not TypeAhead(os.open(os.devnull, os.O_RDONLY)).hold()  # not a terminal


def test_typeahead_plan_maps_keys_to_console_actions() -> None:
    assert keys("+ ]x\x1b[A\r") == (["plus", "space", "right_square_bracket", "x"], 2)
    bound = {"plus": "app.concurrency(1)", "right_square_bracket": "app.rate(1)", "space": "app.pause"}
    assert plan("+]\x1b[Bz", bound) == (["app.concurrency(1)", "app.rate(1)"], "+ ]", 2)


def test_demo_workload_still_loads_after_save(tmp_path: Path) -> None:
    for name in ("demo.toml", "prompts.jsonl"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    saved = write_tuned(tmp_path / "demo.toml", ["prompts.repeat=2"], fixed_snapshot())
    w = load_workload(saved.path)
    assert w.prompts.repeat == 2
    assert [(r.tag, r.models, r.fallback) for r in w.routing.rules] == [
        ("classify", ("qwen-3-32b",), ()),
        ("summarize", ("deepseek-v4-flash",), ("qwen-3-32b",)),
    ]
