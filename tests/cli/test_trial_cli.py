"""What a new user met on the command line in round four's trial, each over the real CLI: the
regex `validate` shows as written, one number format for money."""

from __future__ import annotations

from pathlib import Path

from tests.support import oxconsole_here
from tests.support.workloads import write_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

QUALITY = r'^(yes|no)\b\s*"x"$'
"""A regex with a backslash and quotes in it."""


def test_validate_shows_the_regex_as_the_file_writes_it(tmp_path: Path) -> None:
    write_workload("minimal", tmp_path, {"prompts.items": ["a"], "quality.regex": QUALITY}, file="w.toml")
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r"""an answer is valid when it matches '^(yes|no)\b\s*"x"$'""" in r.stdout, r.stdout
    assert "\\\\b" not in r.stdout, r.stdout  # not Python's repr, each backslash doubled


def test_money_and_prices_are_never_shown_with_an_exponent(tmp_path: Path) -> None:
    """A per-request price of 0.0000177367 reads as that in `validate`, and the packing line's
    cost per task is in the summary's one money format (as `cost` beside it), never `1.77e-05`."""
    import shutil

    for name in ("packing.toml", "prompts.jsonl"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    price = ["--set", "models.0.price_per_request=1.77367e-05", "--set", "prompts.repeat=1"]
    fast = ["--set", 'sim.models."deepseek-v4-flash".ttft="5ms"']
    r = oxconsole_here("validate", "packing.toml", *price, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "price 0.0000177367/request" in r.stdout and "e-05" not in r.stdout, r.stdout
    r = oxconsole_here("packing.toml", "--headless", *price, *fast, cwd=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    packing = next(line for line in r.stdout.splitlines() if line.startswith("packing   size"))
    assert "per task" in packing and "e-0" not in packing, packing
    assert "e-0" not in r.stdout, r.stdout


def test_a_closed_loops_queue_says_what_it_is(tmp_path: Path) -> None:
    """4 in flight, 200 ms each: the next request read ahead waits ~200 ms for a slot, which is
    the concurrency at work; the table says so under a closed loop's timings, not an open one's."""
    from oxconsole.reports.summarytable import CLOSED_QUEUE
    from tests.support.workloads import write_workload

    sets = {"run.requests": 24, "prompts.synthetic.count": 24}
    closed = write_workload("sim_exact", tmp_path, sets, file="closed.toml")
    r = oxconsole_here(str(closed), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    queue = next(line for line in r.stdout.splitlines() if line.startswith("queue "))
    assert float(queue.split()[-1].replace(",", "")) > 100, queue  # its max: a slot's wait
    assert CLOSED_QUEUE in r.stdout, r.stdout
    opened = write_workload("sim_exact", tmp_path, {**sets, "run.arrival": "constant", "run.rate": 40.0})
    r = oxconsole_here(str(opened), "--headless", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "queue " in r.stdout and CLOSED_QUEUE not in r.stdout, r.stdout
