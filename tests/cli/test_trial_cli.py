"""What a new user met on the command line in round four's trial, each over the real CLI: the
regex `validate` shows as written, one number format for money."""

from __future__ import annotations

from pathlib import Path

from tests.support import oxconsole_here

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
