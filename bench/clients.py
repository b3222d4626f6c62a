"""Reference clients for the benchmarks, each run as its own process against one server.

Why this module exists: the benchmark compares oxconsole with the floor (a raw aiohttp client that
only reads the stream and counts lines) and with the pattern of the article the product grew from
(AsyncOpenAI with its defaults + Semaphore + gather, iterating the SDK's chunk objects). Each client
prints one JSON line: requests, ok, wall seconds, CPU seconds.

    python bench/clients.py raw|article URL N CONCURRENCY [MAX_TOKENS]

CPU time is counted from after the client's imports, as the benchmark does for oxconsole.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "Say sixteen words."}],
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 16,
}


async def raw(url: str, n: int, conc: int) -> int:
    import aiohttp

    ok = 0
    todo = iter(range(n))
    conn = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(connector=conn) as s:

        async def worker() -> None:
            nonlocal ok
            for _ in todo:
                async with s.post(url + "/chat/completions", json=BODY) as r:
                    chunks = 0
                    async for line in r.content:
                        if line.startswith(b"data:"):
                            chunks += 1
                    if r.status == 200 and chunks:
                        ok += 1

        await asyncio.gather(*(worker() for _ in range(conc)))
    return ok


async def article(url: str, n: int, conc: int) -> int:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="bench")

    async def fetch_one(sem: asyncio.Semaphore) -> bool:
        async with sem:
            stream = await client.chat.completions.create(
                model="bench",
                messages=[{"role": "user", "content": "Say sixteen words."}],
                stream=True,
                max_tokens=BODY["max_tokens"],
            )
            got = 0
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    got += 1
            return got > 0

    sem = asyncio.Semaphore(conc)
    results = await asyncio.gather(*(fetch_one(sem) for _ in range(n)))
    return sum(results)


def main() -> None:
    kind, url, n, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if len(sys.argv) > 5:
        BODY["max_tokens"] = int(sys.argv[5])
    fn = {"raw": raw, "article": article}[kind]
    if kind == "raw":
        import aiohttp  # noqa: F401  (imports are not the client's per-request cost)
    else:
        import openai  # noqa: F401
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop) if kind == "raw" else asyncio.Runner()
    except ImportError:
        runner = asyncio.Runner()
    c0, t0 = _cpu(), time.perf_counter()
    with runner:
        ok = runner.run(fn(url, n, conc))
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    print(json.dumps({"requests": n, "ok": ok, "wall_s": wall, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
