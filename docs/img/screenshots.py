"""Regenerate the console screenshots in docs/img/ (run from the repository root):

    python docs/img/screenshots.py

They use the same frozen snapshot as the snapshot tests (tests/support/ui.py), so they only
change when the console's look does.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from oxconsole.ui.app import ConsoleApp  # noqa: E402
from tests.support.ui import StaticSource, fixed_snapshot  # noqa: E402

SHOTS = [
    ("console-80x24.svg", (80, 24), []),
    ("console-160x48.svg", (160, 48), []),
    ("console-80x24-latency.svg", (80, 24), ["h"]),
    ("console-help.svg", (100, 30), ["question_mark"]),
    ("console-routing.svg", (100, 30), ["w"]),
]


async def shoot(name: str, size: tuple[int, int], keys: list[str]) -> None:
    app = ConsoleApp(StaticSource(fixed_snapshot()), theme_dirs=[], cursor_blink=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        for k in keys:
            await pilot.press(k)
        await pilot.pause(0.3)
        app.save_screenshot(name, path=str(ROOT / "docs" / "img"))


for shot in SHOTS:
    asyncio.run(shoot(*shot))
    print("docs/img/" + shot[0])
