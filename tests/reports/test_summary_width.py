"""The summary table never cuts what tells two things apart: full model names (on a terminal, in
a file, at any width), every error class of a long list, and the same model order whether the
summary is the run's own or rebuilt from its journal."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from oxconsole.cli.headless import print_summary
from oxconsole.reports.summarytable import UNCUT, render_summary, table_width

SMALL, LARGE = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"


def model(total: int) -> dict[str, Any]:
    return {
        "requests": {"total": total, "ok": total, "error": 0},
        "throughput": {"requests_per_s": total / 10},
        "latency_ms": {"p50": 120.0, "p99": 300.0},
        "ttft_ms": {"p50": 40.0},
        "cost": {"total": 0.0},
    }


def summary(models: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "name": "two-llamas",
        "duration_s": 10.0,
        "requests": {"total": 30, "ok": 30, "error": 0, "retried": 0},
        "throughput": {"requests_per_s": 3.0, "output_tokens_per_s": 30.0},
        "models": models,
        **more,
    }


def rows_of(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name)]


def test_two_models_that_differ_late_in_their_names_are_told_apart_at_80_columns() -> None:
    text = render_summary(summary({SMALL: model(10), LARGE: model(20)}))
    lines = text.splitlines()
    assert rows_of(text, SMALL) and rows_of(text, LARGE), text
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    i = lines.index(LARGE)  # the name alone on its row, its figures under the figure columns
    assert lines[i + 1].split()[:3] == ["20", "20", "0"], lines[i : i + 2]


def test_a_wide_terminal_gives_each_model_one_row_with_its_whole_name() -> None:
    text = render_summary(summary({SMALL: model(10), LARGE: model(20)}), width=200)
    row = rows_of(text, LARGE)
    assert len(row) == 1 and row[0].split()[:4] == [LARGE, "20", "20", "0"], text


def test_models_are_listed_in_the_same_order_whatever_order_the_summary_met_them() -> None:
    a = render_summary(summary({"zeta": model(1), "alpha": model(2)}))
    b = render_summary(summary({"alpha": model(2), "zeta": model(1)}))
    assert a == b, f"{a}\n---\n{b}"
    assert a.index("alpha ") < a.index("zeta "), a


def test_a_long_list_of_error_classes_wraps_and_keeps_every_class() -> None:
    attempts = {f"http_{500 + i}": 1000 + i for i in range(8)} | {"timeout": 7}
    text = render_summary(summary({"m": model(1)}, attempt_errors=attempts))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    flat = " ".join(text.split())
    assert "timeout 7 (attempts)" in flat and all(f"{k} {v:,}" in flat for k, v in attempts.items()), text


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_table_takes_a_terminals_width_and_80_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert (table_width(Terminal()), table_width(io.StringIO())) == (200, UNCUT)
    monkeypatch.setenv("COLUMNS", "60")  # a narrow terminal wraps what is longer than 80 itself
    assert table_width(Terminal()) == 80


def test_the_end_of_a_run_printed_to_a_file_shows_whole_names(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(summary({SMALL: model(10), LARGE: model(20)}), None)
    out = capsys.readouterr().out
    assert SMALL in out.splitlines() or rows_of(out, SMALL), out
    assert "…" not in out, out


def test_a_summary_written_to_a_file_is_not_cut(tmp_path: Path) -> None:
    """Headless with stdout a file (not a terminal): the heading keeps the run's whole name and
    start, and no line is cut or wrapped at 80 columns."""
    from tests.support import oxconsole_here
    from tests.support.workloads import write_workload

    name = "a-run-whose-name-is-long-enough-to-push-its-start-past-eighty-cols"[:64]
    sets = {"name": name, "run.requests": 4, "prompts.synthetic.count": 4, "sim.models.m.ttft": "10ms"}
    path = write_workload("sim_exact", tmp_path, sets)
    r = oxconsole_here(str(path), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert head.startswith(name) and "started 20" in head and len(head) > 80, head
    assert "…" not in r.stdout, r.stdout
