"""What a new user met on the command line in round four's trial, each over the real CLI: the
regex `validate` shows as written, one number format for money."""

from __future__ import annotations

from pathlib import Path

from tests.support import oxconsole_here

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

QUALITY = r"""
[endpoints.default]
base_url = "sim"
[[models]]
name = "m"
[prompts]
items = ["a"]
[quality]
regex = '^(yes|no)\b\s*"x"$'
"""


def test_validate_shows_the_regex_as_the_file_writes_it(tmp_path: Path) -> None:
    (tmp_path / "w.toml").write_text(QUALITY)
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
