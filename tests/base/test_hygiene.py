"""Import hygiene: the engine never loads Textual; the fast commands load neither Textual nor the SDK.

Each case imports in a fresh interpreter and lists the top-level packages it loaded.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO

HELP = (
    "import sys, runpy\n"
    "sys.argv = ['oxconsole', '--help']\n"
    "try:\n"
    "    runpy.run_module('oxconsole', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
)

CASES = [
    # (what is imported, packages it must not load, packages it must load: proof the probe sees)
    pytest.param(
        "import oxconsole.engine.runner, oxconsole.metrics.collector, oxconsole.sim.routes,"
        " oxconsole.reports.summary",
        {"textual", "rich"},
        {"openai"},
        id="engine",
    ),
    pytest.param(
        "import oxconsole.cli.main, oxconsole.base.exits, oxconsole.cli.prepare, oxconsole.reports.hints,"
        " oxconsole.workload, oxconsole.reports.summary",
        {"textual", "openai", "aiohttp", "httpx2"},
        set(),
        id="validate-and-report",
    ),
    pytest.param(HELP, {"textual", "openai"}, set(), id="help"),
    pytest.param("import oxconsole.workload", {"textual", "openai", "aiohttp"}, set(), id="workload"),
    pytest.param(
        "import oxconsole.control, oxconsole.cli.detached, oxconsole.cli.headless, oxconsole.cli.attach,"
        " oxconsole.cli.ps, oxconsole.cli.console, oxconsole.cli.runend, oxconsole.cli.main",
        {"textual"},
        set(),
        id="control-host-headless-attach",
    ),
    pytest.param(
        "import oxconsole.reports.tuned, oxconsole.reports.html", {"textual"}, set(), id="tuned-reports"
    ),
    pytest.param("import oxconsole.sim, oxconsole.sim.cli", {"textual"}, {"aiohttp"}, id="sim"),
]


def _loaded(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=60,
    ).stdout.split()
    return {m.split(".")[0] for m in out}


@pytest.mark.parametrize(("code", "never", "always"), CASES)
def test_imports_stay_light(code: str, never: set[str], always: set[str]) -> None:
    mods = _loaded(code)
    assert not never & mods
    assert always <= mods
