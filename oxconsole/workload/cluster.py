"""`run.cluster`: where a run's engines run ("local" processes, or "ray" actors on a Ray cluster).

Why this module exists: running on Ray is optional (`pip install 'oxconsole[ray]'`); reading the key
and telling a user without Ray how to get it is one thought, kept out of `sections._parse_run`,
which keeps a one-line hook. Ray itself is never imported here (only looked for).
"""

from __future__ import annotations

import importlib.util
from typing import Literal, cast

from oxconsole.workload.values import Table

Cluster = Literal["local", "ray"]

INSTALL_HINT = "pip install 'oxconsole[ray]'"


def ray_installed() -> bool:
    """Whether `import ray` would find a package (without importing it: that takes seconds)."""
    return importlib.util.find_spec("ray") is not None


def parse_cluster(t: Table) -> Cluster:
    """`run.cluster`, "local" when absent; "ray" where Ray is not installed is an error saying how
    to install it."""
    cluster = cast(Cluster, t.enum("cluster", "local", ("local", "ray")))
    if cluster == "ray" and not ray_installed():
        t.fail("cluster", f'"local", or Ray installed for "ray" ({INSTALL_HINT})')
    return cluster
