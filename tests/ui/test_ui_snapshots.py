"""How the console looks: pytest-textual-snapshot screenshots from a frozen snapshot.

The source always returns the same Snapshot (built from a Collector on a fixed clock), themes come
from the package only, the routing editor's cursor does not blink: the SVGs never change between
runs. Update them with `pytest tests/ui/test_ui_snapshots.py --snapshot-update` after a deliberate
change, and look at the report before committing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from oxconsole.ui.app import ConsoleApp
from tests.support.ui import StaticSource, fixed_snapshot


def make_app() -> ConsoleApp:
    return ConsoleApp(StaticSource(fixed_snapshot()), theme_dirs=[], cursor_blink=False)


def test_main_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24))


def test_main_160x48(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(160, 48))


def test_main_80x24_latency_tab(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["h"])


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 30), press=["question_mark"])


def test_routing_editor(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 30), press=["w"])


def test_light_theme_160x48(snap_compare: Any) -> None:
    app = ConsoleApp(StaticSource(fixed_snapshot()), theme="light", theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(160, 48))


def test_confirmation_in_the_status_line_80x24(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(80, 24), press=["minus", "minus"])


def test_routing_editor_12_models_80x24(snap_compare: Any) -> None:
    snap = fixed_snapshot()
    gauge = snap.gauges.models["deepseek-v4-flash"]
    models = {
        f"model-{i:02d}": dataclasses.replace(gauge, weight=1.0 + i % 3, enabled=i != 4) for i in range(12)
    }
    snap = dataclasses.replace(snap, gauges=dataclasses.replace(snap.gauges, models=models))
    app = ConsoleApp(StaticSource(snap), theme_dirs=[], cursor_blink=False)
    assert snap_compare(app, terminal_size=(80, 24), press=["w"])
