"""Long prompts through both ends: a prompts file's lines longer than its read buffer come whole, a
1 MB prompt is counted exactly by the simulator (its body read with one join)."""

from __future__ import annotations

import json

from oxconsole.workload import SimModelProfile, iter_prompts, prompts
from oxconsole.workload.synthtext import synthetic_text
from tests.conftest import WorkloadFactory
from tests.sim_support import raw_post, running_sim

PROFILES = {"m": SimModelProfile(ttft=0.0, tokens_per_s=0.0, output_tokens=3, jitter=0.0)}


def test_lines_longer_than_the_read_buffer_come_whole(make_workload: WorkloadFactory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    size = prompts.READ_BUFFER + 12_345  # one line over the buffer, between short ones
    texts = ["short one", "x" * size, "short two", synthetic_text(1, 2, 250_000)]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": t}) + "\n" for i, t in enumerate(texts)))
    w = make_workload(
        f'[endpoints.default]\nbase_url = "sim"\n[[models]]\nname = "m"\n[prompts]\nfile = "{path}"\n'
    )
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
