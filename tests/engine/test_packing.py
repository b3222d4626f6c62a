"""[packing]: several tasks per request, split back into one record per task, over real HTTP to the
embedded simulator (which answers packs in the contract's format)."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from oxconsole.cli import main as cli
from oxconsole.workload import format_pack, parse_pack, split_answer
from tests.support.workloads import Sets, write_workload

PPR, PIN, POUT = 0.001, 2.0, 5.0

M = {
    "name": "m",
    "max_tokens": 16,
    "price_per_request": PPR,
    "price_per_1m_input": PIN,
    "price_per_1m_output": POUT,
}
"""The model of tests/workloads/sim_packing.toml, priced PPR a request, PIN and POUT per 1M tokens."""
FOUR = {"size": 4}
"""The [packing] table of tests/workloads/sim_packing.toml: four tasks to a request."""


def setup(
    tmp: Path,
    prompts: list[dict[str, Any]],
    packing: Sets | None = FOUR,
    *,
    pack_error_rate: float = 0.0,
    save_text: bool = True,
    sets: Sets | None = None,
) -> Path:
    """tests/workloads/sim_packing.toml as tmp/w.toml over `prompts`: `packing` as its [packing]
    table (None: no [packing] table), then `sets`."""
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    run = {
        "output.save_text": save_text,
        "models": [M],
        "sim.models.m.pack_error_rate": pack_error_rate,
        "packing": packing,
    }
    return write_workload("sim_packing", tmp, {**run, **(sets or {})}, file="w.toml")


def run(tmp: Path, *args: str) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    summary = tmp / "summary.json"
    code = cli.main([str(tmp / "w.toml"), "--headless", "--summary-json", str(summary), *args])
    recs = [json.loads(x) for x in (tmp / "results.jsonl").read_text().splitlines() if x.strip()]
    return code, recs, json.loads(summary.read_text())


def words(i: int) -> str:
    return f"task{i} alpha{i} beta{i} gamma{i}"


def plain(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": f"t{i}", "prompt": words(i), **extra} for i in range(n)]


def bill(input_tokens: int, output_tokens: int, requests: int) -> float:
    return requests * PPR + input_tokens * PIN / 1e6 + output_tokens * POUT / 1e6


# --- the format, pure -----------------------------------------------------------------------------


def test_format_is_the_contracts_text_and_parses_back() -> None:
    text = format_pack(["one", "two\n\nlines"])
    assert text == (
        "Answer each task separately. Reply with exactly 2 sections, each starting with a line "
        '"### Answer K" (K = 1..2), in order, and nothing else.\n\n'
        "### Task 1\none\n\n### Task 2\ntwo\n\nlines"
    )
    assert parse_pack(text) == ["one", "two\n\nlines"]
    assert parse_pack("hello") is None


def test_split_needs_exactly_n_sections_in_order() -> None:
    assert split_answer("### Answer 1\na\n\n### Answer 2\nb b\n", 2) == ["a", "b b"]
    assert split_answer("\n### Answer 1\na\n### Answer 2\n", 2) == ["a", ""]
    assert split_answer("### Answer 1\na\n", 2) is None  # a section missing
    assert split_answer("### Answer 2\na\n### Answer 1\nb", 2) is None  # out of order
    assert split_answer("Sure!\n### Answer 1\na\n### Answer 2\nb", 2) is None  # something else first
    assert split_answer("### Answer 1\na\n### Answer 2\nb\n### Answer 3\nc", 2) is None
    assert split_answer(None, 1) is None


# --- runs -----------------------------------------------------------------------------------------


def test_clean_split_each_record_has_its_own_section_and_sums_are_the_bill(tmp_path: Path) -> None:
    setup(tmp_path, plain(10))
    code, recs, s = run(tmp_path)
    assert code == 0
    assert sorted(r["id"] for r in recs) == [f"t{i}" for i in range(10)]
    packs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        i = int(r["id"][1:])
        assert r["status"] == "ok"
        assert r["text"].startswith(f"Re: {words(i)}")  # its own section, nobody else's
        assert "### Answer" not in r["text"]
        packs[r["pack"]].append(r)
    assert sorted(len(v) for v in packs.values()) == [2, 4, 4]
    total_in = total_out = 0
    for pid, members in packs.items():
        assert pid.startswith("pack-")
        assert {r["pack_size"] for r in members} == {len(members)}
        assert len({(r["t_sent"], r["latency_ms"]) for r in members}) == 1  # the request's timing
        texts = [words(int(r["id"][1:])) for r in sorted(members, key=lambda r: int(r["id"][1:]))]
        assert sum(r["input_tokens"] for r in members) == (len(format_pack(texts)) + 3) // 4
        total_in += sum(r["input_tokens"] for r in members)
        total_out += sum(r["output_tokens"] for r in members)
    assert s["requests"]["total"] == 10 and s["requests"]["ok"] == 10
    assert s["packing"] == {"size": 4, "requests_sent": 3, "repacked": 0}
    assert s["tokens"] == {"input": total_in, "output": total_out}
    assert sum(r["cost"] for r in recs) == pytest.approx(bill(total_in, total_out, 3), rel=1e-12)
    assert s["cost"]["total"] == pytest.approx(bill(total_in, total_out, 3), abs=1e-6)


def test_save_text_false_still_splits_but_keeps_no_text(tmp_path: Path) -> None:
    setup(tmp_path, plain(4), save_text=False)
    code, recs, s = run(tmp_path)
    assert code == 0 and s["packing"]["requests_sent"] == 1
    assert all("text" not in r and r["pack_size"] == 4 for r in recs), [
        r for r in recs if not ("text" not in r and r["pack_size"] == 4)
    ][:5]


def test_missing_section_resends_alone_and_bills_the_failed_pack(tmp_path: Path) -> None:
    setup(tmp_path, plain(8), pack_error_rate=1.0)
    code, recs, s = run(tmp_path)
    assert code == 0
    assert len(recs) == 8 and all(r["status"] == "ok" and r["repacked"] is True for r in recs)
    assert s["packing"] == {"size": 4, "requests_sent": 2 + 8, "repacked": 8}
    assert s["requests"]["total"] == 8
    # each alone: the answer to the task alone (not a section), its own request's timing
    assert all("### Answer" not in r["text"] for r in recs), [r for r in recs if "### Answer" in r["text"]][
        :5
    ]
    # the bill: 2 packs that did not split + 8 requests alone, every token and request in the journal
    packs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        packs[r["pack"]].append(r)
    pack_in = 0
    for members in packs.values():
        texts = [words(int(r["id"][1:])) for r in sorted(members, key=lambda r: int(r["id"][1:]))]
        pack_in += (len(format_pack(texts)) + 3) // 4
    alone_in = sum((len(words(i)) + 3) // 4 for i in range(8))
    assert s["tokens"]["input"] == pack_in + alone_in
    expected = bill(s["tokens"]["input"], s["tokens"]["output"], 10)
    assert sum(r["cost"] for r in recs) == pytest.approx(expected, rel=1e-12)
    assert s["cost"]["total"] == pytest.approx(expected, abs=1e-6)


def test_only_the_given_tags_are_packed(tmp_path: Path) -> None:
    prompts = [{"id": f"a{i}", "prompt": words(i), "tag": "a"} for i in range(4)]
    prompts += [{"id": f"b{i}", "prompt": words(10 + i), "tag": "b"} for i in range(3)]
    prompts += [{"id": "n0", "prompt": words(20)}]
    setup(tmp_path, prompts, {"size": 4, "tags": ["a"]})
    code, recs, s = run(tmp_path)
    assert code == 0
    by_id = {r["id"]: r for r in recs}
    assert {by_id[f"a{i}"]["pack"] for i in range(4)} == {"pack-1"}
    assert all("pack" not in by_id[k] for k in ("b0", "b1", "b2", "n0")), [
        k for k in ("b0", "b1", "b2", "n0") if "pack" in by_id[k]
    ][:5]
    assert by_id["b1"]["text"] and not by_id["b1"]["text"].startswith("Re:")
    assert s["packing"] == {"size": 4, "requests_sent": 5, "repacked": 0}


def test_mixed_tags_are_never_in_one_pack(tmp_path: Path) -> None:
    prompts = [{"id": f"x{i}", "prompt": words(i), "tag": "ab"[i % 2]} for i in range(8)]
    setup(tmp_path, prompts)
    code, recs, _ = run(tmp_path)
    assert code == 0
    tags: dict[str, set[str]] = defaultdict(set)
    for r in recs:
        tags[r["pack"]].add(r["tag"])
    assert len(tags) == 2 and all(len(t) == 1 for t in tags.values())


def test_differing_earlier_messages_are_not_packed_together(tmp_path: Path) -> None:
    prompts = []
    for i in range(6):
        system = "You are terse." if i % 2 else "You are verbose."
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": words(i)}]
        prompts.append({"id": f"c{i}", "messages": msgs})
    setup(tmp_path, prompts)
    code, recs, s = run(tmp_path)
    assert code == 0
    groups: dict[str, set[int]] = defaultdict(set)
    for r in recs:
        groups[r["pack"]].add(int(r["id"][1:]) % 2)
        assert r["text"].startswith(f"Re: {words(int(r['id'][1:]))}")
    assert len(groups) == 2 and all(len(g) == 1 for g in groups.values())
    assert s["packing"]["requests_sent"] == 2


def test_max_input_tokens_closes_a_pack_early(tmp_path: Path) -> None:
    long = [{"id": f"l{i}", "prompt": f"{words(i)} " + "x" * 120} for i in range(6)]
    setup(tmp_path, long, {"size": 6, "max_input_tokens": 120})
    code, recs, s = run(tmp_path)
    assert code == 0
    sizes = {r.get("pack_size", 1) for r in recs}
    assert max(sizes) == 2  # head (~35 tokens) + 2 tasks (~35 each) fit in 120, 3 do not
    assert s["packing"]["requests_sent"] == 3


def test_resume_sends_only_tasks_not_yet_ok(tmp_path: Path) -> None:
    setup(tmp_path, plain(16))
    code, first, _ = run(tmp_path, "--set", "sim.models.m.error_rate=0.5")
    failed = sorted(r["id"] for r in first if r["status"] == "error")
    assert code == 1 and 0 < len(failed) < 16 and len(failed) % 4 == 0  # whole packs failed
    code, recs, s = run(tmp_path, "--resume")
    assert code == 0
    new = recs[len(first) :]
    assert sorted(r["id"] for r in new) == failed  # the tasks not yet ok, and only those
    assert all(r["status"] == "ok" and r["pack"].startswith("pack-r") for r in new), [
        r for r in new if not (r["status"] == "ok" and r["pack"].startswith("pack-r"))
    ][:5]
    assert not {r["pack"] for r in new} & {r["pack"] for r in first}  # pack ids stay unique
    # the whole journal's summary counts each task once, by its last record (as `report` does)
    assert s["requests"]["ok"] == 16 and s["requests"]["total"] == 16
    assert s["packing"]["requests_sent"] == 4  # the packs that answered them


def test_size_1_is_no_packing(tmp_path: Path) -> None:
    setup(tmp_path, plain(5), {"size": 1})
    code, recs, s = run(tmp_path)
    keys_packed_off = {k for r in recs for k in r}
    assert code == 0 and "packing" not in s
    assert not keys_packed_off & {"pack", "pack_size", "repacked"}
    (tmp_path / "results.jsonl").unlink()
    setup(tmp_path, plain(5), None)
    code, recs2, s2 = run(tmp_path)
    assert {k for r in recs2 for k in r} == keys_packed_off
    assert [r["text"] for r in recs2] == [r["text"] for r in recs]
    assert s2["tokens"] == s["tokens"] and "packing" not in s2


@pytest.mark.slow
def test_set_packing_size_and_workers(tmp_path: Path) -> None:
    setup(tmp_path, plain(16), None)
    code, recs, s = run(tmp_path, "--set", "packing.size=8", "--set", "run.workers=2")
    assert code == 0 and len(recs) == 16
    assert s["packing"]["size"] == 8 and s["packing"]["requests_sent"] == 2
    assert len({r["pack"] for r in recs}) == 2
    for r in recs:
        assert r["text"].startswith(f"Re: {words(int(r['id'][1:]))}")


def test_bad_packing_values_exit_2_naming_every_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup(tmp_path, plain(2), {"size": 0, "max_input_tokens": -5, "tags": "a", "sise": 2})
    code = cli.main(["validate", str(tmp_path / "w.toml")])
    err = capsys.readouterr().err
    assert code == 2
    for key in ("packing.size", "packing.max_input_tokens", "packing.tags", "packing.sise"):
        assert key in err, err
    setup(tmp_path, plain(2), None, sets={"sim.models.z.pack_error_rate": 2})
    assert cli.main(["validate", str(tmp_path / "w.toml")]) == 2
    assert "sim.models.z.pack_error_rate" in capsys.readouterr().err


def test_a_pack_falls_back_as_one_request_and_still_splits(tmp_path: Path) -> None:
    setup(
        tmp_path,
        [{**p, "tag": "x"} for p in plain(4)],
        {"size": 4},
        sets={
            "models": [M, {"name": "bad"}],
            "sim.models.bad.error_rate": 1.0,
            "routing.rules": [{"tag": "x", "models": ["bad"], "fallback": ["m"]}],
        },
    )
    code, recs, s = run(tmp_path)
    assert code == 0
    assert all(r["model"] == "m" and r["models_tried"] == ["bad", "m"] for r in recs), [
        r for r in recs if not (r["model"] == "m" and r["models_tried"] == ["bad", "m"])
    ][:5]
    assert all(r["text"].startswith(f"Re: {words(int(r['id'][1:]))}") for r in recs), [
        r for r in recs if not r["text"].startswith(f"Re: {words(int(r['id'][1:]))}")
    ][:5]
    assert s["packing"]["requests_sent"] == 1 and s["requests"]["fallbacks"] == 4


def test_tpm_budgets_a_packs_tokens(tmp_path: Path) -> None:
    setup(tmp_path, plain(16), {"size": 8})
    code, recs, s = run(tmp_path, "--set", "run.tpm=100000")
    assert code == 0 and len(recs) == 16 and s["packing"]["requests_sent"] == 2


def test_console_shows_tasks_per_s_requests_per_s_and_cost_per_task() -> None:
    from oxconsole.metrics.snapshot import Snapshot
    from oxconsole.ui.lines import Palette, join_lines
    from oxconsole.ui.panels.throughput import throughput_lines
    from tests.support.ui import fixed_snapshot

    snap = fixed_snapshot()
    plain_text = join_lines(throughput_lines(snap, Palette(), 120, 8)).plain
    assert "tasks/s" not in plain_text and "cost/task" not in plain_text
    packed = dataclasses.replace(
        snap, packing={"size": 8, "requests_sent": 10, "repacked": 0, "tasks": 80}, cost=0.8
    )
    text = join_lines(throughput_lines(packed, Palette(), 120, 8)).plain
    assert "tasks/s" in text and "req/s" in text and "cost/task 0.0100" in text
    assert Snapshot.from_dict(packed.to_dict()).packing == packed.packing
