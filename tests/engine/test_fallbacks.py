"""Fallbacks are visible: each record says which models it went through, a model that never failed
shows no retries, and the summary counts the requests that fell back, and from which model.

Real HTTP to the embedded simulator: "broken" answers every request with HTTP 500, the routing
rule sends tag "b" to it with "backup" as its fallback; tag "a" goes to "flaky", which throttles
a quarter of its requests (so retries are still counted where they happen; a few may still end in
`http_429` after three attempts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from oxconsole.engine.runner import make_engine
from oxconsole.reports.summary import render_summary, summary_from_journal
from oxconsole.workload import Workload, check_prompts
from tests.support.workloads import load_workload

pytestmark = pytest.mark.asyncio

A, B = 30, 6
PROMPTS = "\n".join(
    f'{{"id": "{tag}{i}", "prompt": "hi", "tag": "{tag}"}}'
    for tag, n in (("a", A), ("b", B))
    for i in range(n)
)


def journal(w: Workload) -> dict[str, dict[str, Any]]:
    lines = w.results_path().read_bytes().splitlines()
    return {d["id"]: d for d in map(orjson.loads, filter(bytes.strip, lines))}


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
async def test_fallbacks_recorded_counted_and_never_retries_on_a_healthy_model(
    tmp_path: Path, workers: int
) -> None:
    w = load_workload("fallbacks", tmp_path, {"run.workers": workers}, prompts=PROMPTS)
    engine = make_engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    out = await engine.run()
    recs = journal(w)
    assert len(recs) == A + B
    assert out.error == sum(r["status"] == "error" for r in recs.values())  # only flaky's 429s

    # the journal: every model tried, in order, and the attempts each took
    for i in range(B):
        r = recs[f"b{i}"]
        assert r["status"] == "ok" and r["model"] == "backup"
        assert r["models_tried"] == ["broken", "backup"]
        assert r["model_attempts"] == [3, 1] and r["attempts"] == 4
        assert r["attempt_errors"] == {"http_500": 3}
    assert not any("models_tried" in r or "model_attempts" in r for k, r in recs.items() if k[0] == "a")
    flaky_retried = sum(1 for k, r in recs.items() if k[0] == "a" and r["attempts"] > 1)
    assert flaky_retried, "throttle_rate 0.25 over 30 requests should have retried some"

    # the summary: retries where they happened, fallbacks where they left from
    s = out.summary
    models = s["models"]
    assert models["backup"]["requests"]["retried"] == 0  # it never failed
    assert models["backup"]["requests"]["ok"] == models["backup"]["requests"]["total"] == B
    assert models["broken"]["requests"]["total"] == 0  # every request left it...
    assert models["broken"]["requests"]["fallbacks"] == B  # ...for a fallback
    assert models["flaky"]["requests"]["retried"] == flaky_retried
    assert models["flaky"]["requests"]["fallbacks"] == 0
    assert s["requests"]["fallbacks"] == B
    assert s["requests"]["retried"] == flaky_retried + B  # the b requests were retried on broken

    # the journal alone gives the same counts
    rebuilt = summary_from_journal(w.results_path())
    # a journal alone knows no total, so not what was not sent
    assert rebuilt["requests"] == {k: v for k, v in s["requests"].items() if k != "not_sent"}
    for m in ("flaky", "broken", "backup"):
        assert rebuilt["models"][m]["requests"] == models[m]["requests"], m

    text = render_summary(s)
    assert f"{B} fell back" in text
    assert f"fell back from  broken {B}" in text
    assert max(len(line) for line in text.splitlines()) <= 80


async def test_live_counts_agree_with_the_summary(tmp_path: Path) -> None:
    """The console's per-model counts (the snapshot) show no retries on the fallback model either."""
    w = load_workload("fallbacks", tmp_path, prompts=PROMPTS)
    engine = make_engine(w, results_path=w.results_path())
    out = await engine.run()
    snap = engine.latest
    assert snap is not None
    counts = {m.name: m.counts for m in snap.models}
    assert counts["backup"].retried == 0 and counts["backup"].ok == B
    assert counts["flaky"].retried == out.summary["models"]["flaky"]["requests"]["retried"]
    assert snap.counts.retried == out.summary["requests"]["retried"]
