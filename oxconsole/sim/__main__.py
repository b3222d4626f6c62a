"""``python -m oxconsole.sim``: the simulator as a standalone server (see `oxconsole.sim.cli`).

Why this module exists: `SimProcess` starts the simulator as ``sys.executable -m oxconsole.sim`` so it
needs no console script on PATH.
"""

from __future__ import annotations

import sys

from oxconsole.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
