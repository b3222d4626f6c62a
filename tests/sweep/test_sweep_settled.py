"""A sweep point is read once its phase has settled, or at `--point-duration`, now its limit: a
point that settles ends early and says when; one cut by the limit says "not settled"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oxconsole.cli.main import main
from tests.support.workloads import write_workload

pytestmark = pytest.mark.slow


def write(folder: Path) -> Path:
    """Prompts for minutes at 4 or 8 in flight, answered in ~20 ms with 10% jitter."""
    sets = {
        "name": "sw",
        "run": {"concurrency": 4, "timeout": "20s", "grace": "5s", "settle_tolerance": 0.1},
        "output.results": "out/results.jsonl",
        "prompts.synthetic": {"count": 100000, "input_tokens": 5, "output_tokens": 4},
        "sim.models.m": {
            "ttft": "20ms",
            "tokens_per_s": 400,
            "output_tokens": 4,
            "capacity": 64,
            "jitter": 0.1,
        },
    }
    return write_workload("sim_short", folder, sets, file="w.toml")


def test_points_end_once_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = [
        "sweep",
        "w.toml",
        "--over",
        "concurrency=4,8",
        "--point-duration",
        "2m",
        "--summary-json",
        "s.json",
    ]
    main(args)
    out, err = capsys.readouterr()
    points = json.loads((tmp_path / "s.json").read_text())["points"]
    for p in points:
        s = p["summary"]
        assert s["settled_at_s"] is not None and 10.0 <= s["settled_at_s"] < 100.0, s["settled_at_s"]
        assert s["duration_s"] < 110.0, s["duration_s"]  # ended once settled, not at its 2 minutes
        assert s["requests"]["not_sent"] == 0, s["requests"]  # a planned end, not a stop
    assert err.count("settled ±") == 2, err
    assert "settled" in out and "not settled" not in out, out


def test_a_point_cut_by_its_limit_is_not_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    monkeypatch.chdir(tmp_path)
    main(
        ["sweep", "w.toml", "--over", "concurrency=4,8", "--point-duration", "2s", "--summary-json", "s.json"]
    )
    out, _ = capsys.readouterr()
    points = json.loads((tmp_path / "s.json").read_text())["points"]
    assert all(p["summary"]["settled_at_s"] is None for p in points), [p["summary"]["ci"] for p in points]
    assert "not settled (read at --point-duration): point #0, #1" in out, out
