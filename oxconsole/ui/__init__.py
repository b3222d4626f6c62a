"""The live console (Textual). Reads snapshots from a `RunSource`, sends commands, nothing else.

Importing this package does not import Textual; `run_console` does, when called, so a headless run
never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oxconsole.control import RunSource

__all__ = ["run_console"]


def run_console(
    source: RunSource, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
) -> str:
    """Run the console on ``source`` until the user quits ("quit") or detaches ("detach");
    ``attached``: opened by `oxconsole attach` (`q` closes the console, the run goes on)."""
    from oxconsole.ui.app import run_console as run

    return run(source, theme=theme, refresh=refresh, attached=attached)
