"""Before a run's clock starts, each endpoint has its requests built: the SDK's first build (its
platform probe runs in a thread) is not timed as the first wave's wait for the server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from oxconsole.engine.endpoints import Endpoints
from oxconsole.engine.send.apis import PATHS
from tests.support.workloads import load_workload


def test_every_api_a_model_uses_is_built_at_start_and_no_other(tmp_path: Path) -> None:
    w = load_workload("sim_apis", tmp_path)

    async def go() -> frozenset[str]:
        eps = Endpoints(w, {"default": "http://127.0.0.1:9/v1"}, [])
        await eps.start()  # no request is sent: building needs no server
        try:
            return eps.clients["default"].built
        finally:
            await eps.close()

    built = asyncio.run(go())
    want = {PATHS[m.api] for m in w.models}
    assert built == want, (sorted(built), sorted(want))
    assert PATHS["responses"] not in built
