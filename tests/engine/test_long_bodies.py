"""Long prompts through both ends: a prompts file's lines longer than its read buffer come whole, a
1 MB prompt is counted exactly by the simulator (its body read with one join), and the client's
encoding of a body is not counted in the server's time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oxconsole.workload import SimModelProfile, iter_prompts
from oxconsole.workload.prompts import feed
from oxconsole.workload.prompts.synthtext import synthetic_text
from tests.support.sim import raw_post, running_sim
from tests.support.workloads import load_workload

PROFILES = {"m": SimModelProfile(ttft=0.0, tokens_per_s=0.0, output_tokens=3, jitter=0.0)}


def test_lines_longer_than_the_read_buffer_come_whole(tmp_path: Path) -> None:
    size = feed.READ_BUFFER + 12_345  # one line over the buffer, between short ones
    texts = ["short one", "x" * size, "short two", synthetic_text(1, 2, 250_000)]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": t}) + "\n" for i, t in enumerate(texts)))
    w = load_workload("minimal", tmp_path, {"prompts": {"file": str(path)}})
    got = [(p.id, p.messages[0]["content"]) for p in iter_prompts(w)]
    assert [i for i, _ in got] == ["p0", "p1", "p2", "p3"], [i for i, _ in got]
    assert [t for _, t in got] == texts, [len(t) for _, t in got]


async def test_a_1_mb_prompt_is_counted_exactly() -> None:
    text = synthetic_text(5, 0, 250_000)
    async with running_sim(PROFILES) as url:
        status, _, body = await raw_post(url, {"model": "m", "messages": [{"role": "user", "content": text}]})
    assert status == 200, body[:200]
    usage = json.loads(body)["usage"]
    assert usage["prompt_tokens"] == (len(text) + 3) // 4, (usage, len(text))


async def test_encoding_the_body_is_not_counted_as_the_servers_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """An encoding that takes 300 ms (a stand-in for a huge prompt on a slow machine): the attempt's
    latency (and TTFT) start once the body is encoded, as the server sees it."""
    import time as clock
    import types

    import orjson

    from oxconsole.engine.send import client as client_mod
    from oxconsole.engine.send.client import EndpointClient

    def slow_dumps(obj: object, *a: object, **kw: object) -> bytes:
        clock.sleep(0.3)
        return orjson.dumps(obj, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(client_mod, "orjson", types.SimpleNamespace(dumps=slow_dumps, loads=orjson.loads))
    async with running_sim(PROFILES) as url:
        c = EndpointClient("e", url, None, max_connections=2, timeout=10.0)
        try:
            t = clock.perf_counter()
            res = await c.attempt(
                {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                stream=True,
                timeout=10.0,
                save_text=False,
            )
            wall = (clock.perf_counter() - t) * 1000
        finally:
            await c.close()
    assert res.ok, res
    assert wall >= 300 and res.latency_ms is not None and res.latency_ms < 250, (wall, res.latency_ms)
