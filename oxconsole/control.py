"""Attach to and list runs going on this machine (placeholder until the console issue lands)."""

from __future__ import annotations

import sys


def ps_main(argv: list[str]) -> int:
    print("oxconsole ps: not available in this build yet (it comes with the live console)", file=sys.stderr)
    return 2


def attach_main(argv: list[str]) -> int:
    print("oxconsole attach: not available in this build yet (it comes with the live console)", file=sys.stderr)
    return 2
