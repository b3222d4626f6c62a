"""`[quality] expected_path`: a JSON answer is right when the value at that path equals the prompts
line's "expected", over real HTTP: a loopback server of the test's own answering the reported case
(`{"label": "positive"}` to every review), and the simulator, whose right answers honour the path
(so examples/labels.toml works with no key and no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from oxconsole.cli.main import main
from oxconsole.engine.runner import make_engine
from oxconsole.sim.quality import draw
from oxconsole.workload import Workload, WorkloadError, check_prompts
from tests.support import read_jsonl
from tests.support.http import chat_server
from tests.support.workloads import load_workload

LABEL = {"type": "object", "required": ["label"], "properties": {"label": {"enum": ["positive", "negative"]}}}


def answering(answer: Any) -> Any:
    """A chat server: `answer(prompt text)` is the answer's text."""

    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        text = answer(body["messages"][-1]["content"])
        usage = {"prompt_tokens": 10, "completion_tokens": 4}
        return web.json_response({"choices": [{"message": {"content": text}}], "usage": usage})

    return handler


def lines(expected: list[Any]) -> str:
    return "\n".join(
        orjson.dumps({"id": f"q{i}", "prompt": f"review {i}", "expected": e}).decode()
        for i, e in enumerate(expected)
    )


async def run(w: Workload) -> Any:
    engine = make_engine(w, results_path=w.results_path(), total_expected=check_prompts(w).total_requests)
    return await engine.run()


def by_id(w: Workload) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in read_jsonl(w.results_path())}


def on(base: str, quality: dict[str, Any]) -> dict[str, Any]:
    """The cascade workload's small model alone, on the loopback server, with `quality`."""
    return {
        "endpoints.default.base_url": base + "/v1",
        "run.stream": False,
        "quality": quality,
        "routing.cascade": None,
        "models.1.weight": 0,
    }


@pytest.mark.asyncio
async def test_sixteen_positive_labels_are_right_only_for_the_positive_reviews(tmp_path: Path) -> None:
    """The reported case: 16 of 16 `{"label": "positive"}` were called valid (they fit the schema)
    though half the reviews were negative."""
    expected = ["positive", "negative"] * 8
    async with chat_server(answering(lambda text: '{"label": "positive"}')) as base:
        quality = {"json_schema": LABEL, "expected": True, "expected_path": "label"}
        w = load_workload("cascade", tmp_path, on(base, quality), prompts=lines(expected))
        out = await run(w)
    recs = by_id(w)
    assert len(recs) == 16
    for i, want in enumerate(expected):
        r = recs[f"q{i}"]
        if want == "positive":
            assert r["valid"] is True and "invalid_reason" not in r, r
        else:
            assert r["valid"] is False and r["invalid_reason"] == "expected", r
    q = out.summary["quality"]
    assert (q["valid"], q["judged"], q["fraction"]) == (8, 16, 0.5), q


CASES: list[tuple[str, Any, str, str | None]] = [
    # (path, expected, answer, invalid_reason)
    ("label", "Spam", '{"label": " spam "}', None),
    ("label", "spam", '```json\n{"label": "spam"}\n```', None),
    ("label", "spam", '{"label": "ham"}', "expected"),
    ("label", "spam", "spam", "json"),
    ("label", "spam", '{"other": "spam"}', "expected"),
    ("items.0.name", "Ada", '{"items": [{"name": "Ada"}, {"name": "Bob"}]}', None),
    ("items.1.name", "Ada", '{"items": [{"name": "Ada"}, {"name": "Bob"}]}', "expected"),
    ("items.2.name", "Ada", '{"items": [{"name": "Ada"}]}', "expected"),
    ("score", 3, '{"score": 3.0}', None),
    ("score", "0.10", '{"score": 0.1}', None),
    ("score", 1, '{"score": true}', "expected"),
    ("ok", True, '{"ok": true}', None),
    ("ok", "false", '{"ok": true}', "expected"),
    ("none", "null", '{"none": null}', None),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("path", "expected", "answer", "reason"), CASES, ids=[c[0] for c in CASES])
async def test_the_value_at_the_path_is_compared_as_docs_say(
    tmp_path: Path, path: str, expected: Any, answer: str, reason: str | None
) -> None:
    async with chat_server(answering(lambda text: answer)) as base:
        quality = {"expected": True, "expected_path": path}
        w = load_workload("cascade", tmp_path, on(base, quality), prompts=lines([expected]))
        await run(w)
    r = by_id(w)["q0"]
    assert r["valid"] is (reason is None) and r.get("invalid_reason") == reason, r


@pytest.mark.asyncio
@pytest.mark.subprocess
async def test_the_simulator_answers_the_value_at_the_path_right_as_often_as_its_quality(
    tmp_path: Path,
) -> None:
    expected = ["positive", "negative"] * 20
    sets = {
        "quality": {"json_schema": LABEL, "expected": True, "expected_path": "label"},
        "routing.cascade": None,
        "models.1.weight": 0,
        "sim.models.small.quality": 0.6,
    }
    w = load_workload("cascade", tmp_path, sets, prompts=lines(expected))
    out = await run(w)
    recs = by_id(w)
    right = {f"q{i}" for i in range(40) if draw(3, "small", f"q{i}") < 0.6}
    assert 0 < len(right) < 40
    for i, label in enumerate(expected):
        r = recs[f"q{i}"]
        answer = orjson.loads(r["text"])
        if r["id"] in right:
            assert r["valid"] is True and answer == {"label": label}, r
        else:  # another label the schema allows: wrong by its value, not its shape
            other = "negative" if label == "positive" else "positive"
            assert r["valid"] is False and r["invalid_reason"] == "expected", r
            assert answer == {"label": other}, r
    assert out.summary["quality"]["valid"] == len(right)


@pytest.mark.subprocess
def test_the_labels_example_on_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    for name in ("labels.toml", "labels.jsonl"):
        shutil.copy(root / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    fast = ["--set", "sim.models.small.ttft=0.01", "--set", "sim.models.large.ttft=0.02"]
    assert main(["labels.toml", "--headless", *fast, "--summary-json", "s.json", "--output", "l.jsonl"]) == 0
    s = json.loads((tmp_path / "s.json").read_text())
    small = s["quality"]["models"]["small"]
    assert small["asked"] == 40 and 0.55 < small["fraction"] < 0.95, small  # quality 0.75
    assert s["cascade"]["escalated"] == 40 - small["valid"]
    recs = read_jsonl(tmp_path / "l.jsonl")
    wrong = [a for r in recs for a in r.get("answers") or ()]
    assert wrong and all(a["invalid_reason"] == "expected" for a in wrong), wrong


@pytest.mark.parametrize(
    ("quality", "message"),
    [
        (
            {"json_schema": LABEL, "expected_path": "label"},
            r'quality\.expected_path: expected expected = true beside it .*, got "label" without it',
        ),
        (
            {"expected": True, "expected_path": "items..name"},
            r"quality\.expected_path: expected a dotted path of object keys and array indexes "
            r'\("label", "items\.0\.name"\), got "items\.\.name" \(an empty part\)',
        ),
        (
            {"expected": True, "expected_path": 3},
            r"quality\.expected_path: expected a dotted path of object keys and array indexes",
        ),
    ],
)
def test_a_bad_expected_path_names_the_file_the_key_and_what_was_expected(
    tmp_path: Path, quality: dict[str, Any], message: str
) -> None:
    sets = {"quality": quality, "routing.cascade": None}
    with pytest.raises(WorkloadError, match=r"workload\.toml: " + message):
        load_workload("cascade", tmp_path, sets, prompts=lines(["a"]))
