"""Import hygiene: the engine never loads Textual; the fast commands load neither Textual nor the SDK."""

from __future__ import annotations

import subprocess
import sys


def _loaded(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {m.split(".")[0] for m in out}


def test_engine_never_imports_textual() -> None:
    mods = _loaded(
        "import oxconsole.engine.runner, oxconsole.metrics.collector, oxconsole.sim.app, oxconsole.report"
    )
    assert "textual" not in mods
    assert "rich" not in mods
    assert "openai" in mods  # sanity: the probe does see what the engine imports


def test_help_and_validate_paths_stay_light() -> None:
    mods = _loaded("import oxconsole.cli, oxconsole.runprep, oxconsole.workload, oxconsole.report")
    assert not {"textual", "openai", "aiohttp", "httpx2"} & mods


def test_help_does_not_import_sdk_or_textual() -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['oxconsole', '--help']\n"
        "try:\n"
        "    runpy.run_module('oxconsole', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    mods = _loaded(code)
    assert not {"textual", "openai"} & mods
